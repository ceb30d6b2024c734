"""A big module is read by a child process (`autod.localize.aside`), which gives back exactly the summary
the daemon's own parse gives, and the daemon's process never parses it: `ast.parse` holds the GIL for
the whole call, ~4 s for a 2 MB module of one-token lines, and `autod status` waited that long."""

from __future__ import annotations

import ast
import random
import sys
from pathlib import Path

import pytest

from autod.localize import aside, index
from autod.localize.modules import parse_module
from autod.safety.boundary import Boundary

STDLIB = Path(ast.__file__).parent


@pytest.mark.parametrize("name", ["argparse.py", "dataclasses.py", "typing.py", "enum.py", "ast.py",
                                  "asyncio/base_events.py", "email/_header_value_parser.py"])
def test_the_child_gives_back_the_same_module_the_daemon_would_read(name: str):
    text = (STDLIB / name).read_text(encoding="utf-8")
    names = (name[:-3].replace("/", "."),)
    mine = parse_module(name, text, names)
    assert mine.defs and mine.error is None
    assert aside.parse_aside(name, text, names) == mine


def _generated(rng: random.Random) -> str:
    """Statements of every kind the index reads, with odd text in them (characters JSON escapes,
    characters other rules break lines at, astral ones)."""
    odd = ["\u2028", "\x0c", "\\\\", '"', "\x1f", "é", "\U0001f600"]
    out = ["import os", "from . import sibling as s", "from .pkg import *", "CONST = os.sep"]
    for i in range(rng.randrange(5, 30)):
        out += [f"@decorate({i})", f"def f{i}(a, b=CONST):", f'    """Doc {rng.choice(odd)} {i}."""',
                f"    x = s.call(a) + os.path.join('{rng.choice(odd)}', b)", "    return x & a", "",
                f"class C{i}(Base, metaclass=Meta):", f"    attr = f{i}", "    def m(self):",
                f"        return self.attr  # {rng.choice(odd)}", ""]
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("seed", range(4))
def test_generated_modules_round_trip_through_the_child(seed: int):
    rng = random.Random(seed)
    text = _generated(rng)
    mine = parse_module("pkg/m.py", text, ("pkg.m", "m"))
    assert len(mine.defs) > 10
    assert aside.parse_aside("pkg/m.py", text, ("pkg.m", "m")) == mine


def test_a_big_module_is_parsed_by_the_child_and_a_small_one_by_the_daemon(tmp_path, monkeypatch):
    body = "".join(f"def f{i}(a):\n    return a + {i}\n\n\n" for i in range(12_000))
    assert len(body) > aside.ASIDE_BYTES
    (tmp_path / "big.py").write_text(body)
    (tmp_path / "small.py").write_text("def g(a):\n    return a\n")
    parsed: list[str] = []

    def in_this_process(rel, text, names):
        parsed.append(rel)
        return parse_module(rel, text, names)

    monkeypatch.setattr(index, "parse_module", in_this_process)
    monkeypatch.setattr(index, "_cache", type(index._cache)())
    built = index.build_index(Boundary(tmp_path, tmp_path / "state", []))
    assert parsed == ["small.py"]
    assert "f11999" in built.modules["big.py"].defs and built.modules["big.py"].error is None
    assert built.get("small.py", "g") is not None


def test_the_child_never_imports_the_workspace(tmp_path, monkeypatch):
    """`python -m` puts the working directory first on the import path; `-P` keeps it off."""
    marker = tmp_path / "imported"
    for name in ("json", "autod", "ast"):
        (tmp_path / f"{name}.py").write_text(f"open({str(marker)!r}, 'a').write('{name}')\n")
    monkeypatch.chdir(tmp_path)
    mod = aside.parse_aside("m.py", "def f():\n    return 1\n", ("m",))
    assert "f" in mod.defs and not marker.exists()


def test_a_child_that_fails_or_runs_too_long_gives_a_module_that_could_not_be_read(monkeypatch):
    text = "def f():\n    return 1\n"
    monkeypatch.setattr(aside, "TIMEOUT_S", 0.001)
    late = aside.parse_aside("m.py", text, ("m",))
    assert late.defs == {} and late.error is not None and "over" in late.error
    monkeypatch.setattr(aside, "TIMEOUT_S", 60.0)
    monkeypatch.setattr(sys, "executable", "/bin/false")
    failed = aside.parse_aside("m.py", text, ("m",))
    assert failed.defs == {} and failed.error is not None and "exit 1" in failed.error


def test_a_summary_far_larger_than_its_module_is_never_sent():
    """Long call chains make a summary ~65 times its source (a probe: 16.8 MB from 255 KB): the child
    sends none over its cap, so the daemon never holds one."""
    line = "def f{}():\n    " + ".".join(["a" * 40 + "()"] * 45) + "\n"
    body = "".join(line.format(i) for i in range(600_000 // len(line)))
    mod = aside.parse_aside("m.py", body, ("m",))
    assert mod.error == "parse failed (exit 3)" and mod.defs == {}


def test_the_child_parses_with_the_daemons_own_autod():
    import os

    import autod

    first = aside._env()["PYTHONPATH"].split(os.pathsep)[0]
    assert Path(first) == Path(autod.__file__).resolve().parents[1]
