"""Config fuzzing: whatever YAML (or bytes) an operator writes, loading raises ConfigError or succeeds.

Inputs start from the shipped config/autod.yaml and are mutated: keys renamed or dropped, values
replaced by other types, lines re-indented, duplicated or cut, random bytes spliced in; plus wholly
random text and bytes; and hostile YAML spliced in at a random place: a value nested thousands deep, a
number of thousands of digits, a NUL, a date that does not exist, an odd tag; a key that is a date, a
number, a boolean, a list or the secret itself. A secret planted in llm.api_key never shows in an error
message, and every error names the file. A few
generated files also go through `autod config check` (exit 0 or 78, no traceback).
"""

from __future__ import annotations

import copy
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shipped import example_config

from autod.config.settings import ConfigError, load_config

EXAMPLE = example_config()  # the working tree's, or the committed one where autod's sandbox hides it
SECRET = "sk-fuzzsecret-7f3a9c2e41"
# ~30 ms a load (pure-Python YAML), 3-5x that beside the whole suite: 200 examples in all (a fixed set).
FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
FUZZ_HEAVY = settings(FUZZ, max_examples=50)

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**12), max_value=10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.just(SECRET),
    st.sampled_from(["", "-1", "1e400", "0x10", "~", "null", "*/5 * * * *", "http://", "../..", "\x00"]),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=10,
)


def base_doc(workspace: Path) -> dict[str, Any]:
    doc = yaml.safe_load(EXAMPLE)
    doc["workspace"] = str(workspace)
    doc["state_dir"] = str(workspace / ".autod")
    doc.setdefault("llm", {})
    doc["llm"] = {**(doc["llm"] or {}), "api_key": SECRET}
    return doc


def paths_of(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += paths_of(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += paths_of(v, (*prefix, i))
    return out


def mutate_tree(doc: dict[str, Any], rng: random.Random, value: Any) -> dict[str, Any]:
    """One structural mutation: replace a value, drop or rename a key, or add an unknown key."""
    value = copy.deepcopy(value)  # never shared: a value inside itself is the alias tests' job
    paths = paths_of(doc)
    path = rng.choice(paths)
    parent: Any = doc
    for p in path[:-1]:
        parent = parent[p]
    last = path[-1]
    op = rng.randrange(4)
    if op == 0:
        parent[last] = value
    elif op == 1:
        del parent[last]
    elif op == 2 and isinstance(parent, dict):
        parent[f"{last}_typo"] = parent.pop(last)
    elif isinstance(parent, dict):
        parent[rng.choice(["extra", "workspace", "enabled", "0", "run", "<<"])] = (
            value  # keys never hold the secret
        )
    else:
        parent.append(value)
    return doc


def mutate_text(text: str, rng: random.Random, junk: bytes) -> bytes:
    """One textual mutation: re-indent, duplicate, cut or drop a line, or splice in bytes."""
    lines = text.splitlines(keepends=True)
    i = rng.randrange(len(lines))
    op = rng.randrange(5)
    if op == 0:
        lines[i] = " " * rng.randrange(1, 7) + lines[i]
    elif op == 1:
        lines[i] = lines[i].lstrip()
    elif op == 2:
        lines.insert(i, lines[i])
    elif op == 3:
        lines[i] = lines[i][: rng.randrange(len(lines[i]) + 1)]
    else:
        data = "".join(lines).encode()
        at = rng.randrange(len(data) + 1)
        return data[:at] + junk + data[at:]
    return "".join(lines).encode()


HOSTILE_VALUES = st.one_of(
    st.integers(1, 3000).map(lambda n: "[" * n + "]" * n),
    st.integers(1, 3000).map(lambda n: "{a: " * n + "1" + "}" * n),
    st.integers(1, 6000).map(lambda n: "9" * n),
    st.integers(1, 6000).map(lambda n: "-0x" + "f" * n),
    st.sampled_from(['"a\\0b"', '"/tmp/x\\0"', "!!binary aGVsbG8=", "2001-12-14", "2001-13-45", ".nan",
                     "-.inf", "!!set {a, b}", "!!timestamp 2001-12-14", "0o777", "!!float 1e999",
                     "!!int 0b1010", "2001-12-14 25:61:61", "!!omap [a: 1]", "!!pairs [a: 1]", "[*x]",
                     "!!python/none ''"]),
)
HOSTILE_KEYS = st.one_of(
    st.sampled_from(["2001-12-14", "on", "off", "yes", "~", "7", "1.5", "0x10", '"a\\0b"', "[a, b]", "{a: 1}",
                     SECRET, "<<", "!!binary aGk=", ".inf", "2001-13-45"]),
    st.integers(1, 6000).map(lambda n: "9" * n),
)
_VALUE, _KEY = "zzhostilevaluezz", "zzhostilekeyzz"


def splice(doc: dict[str, Any], rng: random.Random, value: str, key: str) -> bytes:
    """The doc as YAML with a hostile value put at a random path, or a random key replaced by a hostile
    one: both written as YAML text, which no dumper would produce."""
    path = rng.choice(paths_of(doc))
    parent: Any = doc
    for p in path[:-1]:
        parent = parent[p]
    if isinstance(parent, dict) and rng.random() < 0.5:
        parent[_KEY] = parent.pop(path[-1])
    else:
        parent[path[-1]] = _VALUE
    text = yaml.safe_dump(doc, sort_keys=False, width=10**6)
    return text.replace(f"{_KEY}:", f"{key}:").replace(_VALUE, value).encode()


def load_bytes(tmp_path: Path, data: bytes) -> None:
    """load_config either succeeds or raises ConfigError without the secret; anything else fails."""
    path = tmp_path / "fuzz.yaml"
    path.write_bytes(data)
    try:
        load_config(path)
    except ConfigError as exc:
        message = str(exc)
        assert SECRET not in message and SECRET[:12] not in message, message
        assert "Traceback" not in message
        assert "\n" not in message, message  # one line for the operator
        assert message.startswith(str(path)), message  # names the file (and line and field when known)


@pytest.fixture(autouse=True)
def _no_env_overrides(monkeypatch):
    for name in list(os.environ):
        if name.startswith("AUTOD_") or name == "CREDENTIALS_DIRECTORY":
            monkeypatch.delenv(name)


@pytest.mark.slow
@FUZZ_HEAVY
@given(seed=st.integers(0, 2**32 - 1), value=VALUES, steps=st.integers(1, 4))
def test_mutated_example_config_loads_or_raises_only_config_error(tmp_path_factory, seed, value, steps):
    tmp = tmp_path_factory.mktemp("fuzz")
    rng = random.Random(seed)
    doc = base_doc(tmp)
    for _ in range(steps):
        doc = mutate_tree(doc, rng, value)
    load_bytes(tmp, yaml.safe_dump(doc, sort_keys=False, allow_unicode=True).encode())


@pytest.mark.slow
@FUZZ_HEAVY
@given(seed=st.integers(0, 2**32 - 1), junk=st.binary(max_size=64), steps=st.integers(1, 4))
def test_textually_mangled_config_loads_or_raises_only_config_error(tmp_path_factory, seed, junk, steps):
    tmp = tmp_path_factory.mktemp("fuzz")
    rng = random.Random(seed)
    text = yaml.safe_dump(base_doc(tmp), sort_keys=False)
    data = text.encode()
    for _ in range(steps):
        data = mutate_text(data.decode("utf-8", "replace"), rng, junk)
    load_bytes(tmp, data)


@pytest.mark.slow
@FUZZ
@given(data=st.one_of(st.binary(max_size=512), st.text(max_size=512).map(str.encode)))
def test_random_bytes_load_or_raise_only_config_error(tmp_path_factory, data):
    load_bytes(tmp_path_factory.mktemp("fuzz"), data)


@pytest.mark.slow
@FUZZ_HEAVY
@given(seed=st.integers(0, 2**32 - 1), value=HOSTILE_VALUES, key=HOSTILE_KEYS)
def test_hostile_yaml_at_a_random_place_loads_or_raises_only_a_config_error_naming_the_file(
    tmp_path_factory, seed, value, key
):
    tmp = tmp_path_factory.mktemp("fuzz")
    load_bytes(tmp, splice(base_doc(tmp), random.Random(seed), value, key))


def test_wrong_typed_secret_neighbour_does_not_echo_the_key(tmp_path):
    doc = base_doc(tmp_path)
    doc["llm"]["timeout_s"] = SECRET  # the key's value where a number belongs
    doc["llm"]["api_key"] = {"nested": SECRET}
    doc["limits"]["deny_globs"] = SECRET
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert SECRET not in str(info.value) and "llm.timeout_s" in str(info.value)


@pytest.mark.parametrize(
    "text",
    [
        "llm: &x\n  fallback: *x\n",
        "llm: &x\n  - *x\n",
        "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
        + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 8))
        + "sources: *a7\n",
    ],
    ids=["recursive-mapping", "recursive-list", "alias-bomb"],
)
def test_recursive_or_exploding_yaml_aliases_are_a_config_error(tmp_path, text):
    path = tmp_path / "c.yaml"
    path.write_text(f"workspace: {tmp_path}\n{text}")
    with pytest.raises(ConfigError, match="alias"):
        load_config(path)


@pytest.mark.slow
def test_cli_config_check_exits_0_or_78_on_generated_files(tmp_path):
    # a workspace shaped like this repository, so the example's watch paths and programs are found
    for d in ("autod", "tests", ".venv/bin"):
        (tmp_path / d).mkdir(parents=True)
    for tool in ("python", "ruff"):
        (tmp_path / ".venv/bin" / tool).write_text("#!/bin/sh\n")
        (tmp_path / ".venv/bin" / tool).chmod(0o755)
    rng = random.Random(42)
    cases: list[bytes] = [yaml.safe_dump(base_doc(tmp_path)).encode()]
    for _ in range(3):
        doc = mutate_tree(base_doc(tmp_path), rng, rng.choice([None, -1, "x", [1], {"a": SECRET}, SECRET]))
        cases.append(yaml.safe_dump(doc).encode())
    cases.append(mutate_text(yaml.safe_dump(base_doc(tmp_path)), rng, b"\xff\x00:\n  - ["))
    for value, key in (("[" * 5000 + "]" * 5000, SECRET), ("9" * 5000, "2001-12-14"), ('"a\\0b"', "on")):
        cases.append(splice(base_doc(tmp_path), rng, value, key))
    codes = []
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOD_") and k != "CREDENTIALS_DIRECTORY"}
    for i, data in enumerate(cases):
        path = tmp_path / f"case{i}.yaml"
        path.write_bytes(data)
        out = subprocess.run(
            [sys.executable, "-m", "autod.cli.main", "config", "check", "-c", str(path)],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
        assert out.returncode in (0, 78), (i, out.returncode, out.stderr[-2000:])
        assert "Traceback" not in out.stderr + out.stdout, out.stderr[-2000:]
        assert SECRET not in out.stderr + out.stdout
        codes.append(out.returncode)
    assert codes[0] == 0 and 78 in codes  # the unmutated example is valid; the mangled ones are not
