"""Typos are errors: the YAML is read strictly (a key given twice, a key that is not a name, nesting past
any real config's, an indentation slip: each said plainly with its line; `autod.config.yamlshape`)
and an AUTOD_ variable shaped like a config override that names no section is refused, not ignored."""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from autod.config.bounded import CONFIG_CAP, read_bounded
from autod.config.errors import ConfigError
from autod.config.yamlshape import depth_problem, node_problem

# AUTOD_ variables that are not config overrides: read by the CLI, the units or the test suite.
NOT_OVERRIDES = frozenset({"AUTOD_CONFIG", "AUTOD_INSTANCE"})

_MAX_NODES = 100_000  # far above any real config; stops alias bombs before validation walks them


_PLAIN = (
    ("mapping values are not allowed", "a key is indented deeper than the line above allows"
     " (or a value holds an unquoted ': ')"),
    ("expected <block end>", "the indentation does not line up with the lines above"),
    ("could not find expected ':'", "a line is neither `key: value` nor a `- item` at this indentation"),
    ("cannot start any token", "a tab or a reserved character (@, `) where a value starts; indent with"
     " spaces and quote such values"),
    ("expected a comment or a line break", "text after a closing quote or bracket"),
    ("found unexpected end of stream", "a quote or bracket is never closed"),
    ("found undefined alias", "an alias (*name) with no anchor (&name) before it"),
    ("found duplicate anchor", "an anchor (&name) defined twice"),
)


def plain_yaml_problem(exc: yaml.YAMLError) -> str:
    """What is wrong, in words an operator reads without knowing PyYAML's parser states."""
    raw = f"{getattr(exc, 'context', '') or ''} {getattr(exc, 'problem', '') or ''}"
    for needle, said in _PLAIN:
        if needle in raw:
            return said
    return "not valid YAML here"


def read_yaml(path: Path) -> tuple[dict[str, Any], str]:
    """The config file as a mapping and its text; ConfigError naming the file (and line) on failure."""
    try:
        text = read_bounded(path, CONFIG_CAP).decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config: {exc.strerror or type(exc).__name__}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: cannot read config: {type(exc).__name__}") from None
    deep = depth_problem(text)  # before anything builds the document recursively
    if deep is not None:
        raise ConfigError(f"{path}:{deep[0]}: {deep[1]}: {deep[2]}")
    try:
        shape = node_problem(yaml.compose(text, Loader=yaml.SafeLoader))
        if shape is not None:
            raise ConfigError(f"{path}:{shape[0]}: {shape[1]}: {shape[2]}")
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise ConfigError(f"{where}: YAML syntax error: {plain_yaml_problem(exc)}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}:1: the config must be a mapping of keys to values")
    _check_aliases(path, data)
    return data, text


def _check_aliases(path: Path, data: Any) -> None:
    """Refuse an anchor used inside itself (endless recursion) or aliases that expand without bound."""
    seen = 0
    stack: list[tuple[Any, set[int]]] = [(data, set())]
    while stack:
        node, above = stack.pop()
        seen += 1
        if seen > _MAX_NODES:
            raise ConfigError(f"{path}: YAML aliases expand to over {_MAX_NODES} values")
        if isinstance(node, dict | list):
            if id(node) in above:
                raise ConfigError(f"{path}: a YAML anchor is used inside itself (recursive alias)")
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, above | {id(node)}) for child in children)


def misspelt_variables(fields: Iterable[str], environ: dict[str, str] | None = None) -> list[str]:
    """One message per AUTOD_ variable that looks like an override but sets nothing.

    `AUTOD_<SECTION>__<KEY>` whose section is no config key (`AUTOD_LIMTS__...`), and a name with a
    single underscore where the double one belongs (`AUTOD_LIMITS_MAX_CYCLES_PER_HOUR`); other AUTOD_
    names that start with no section (a test knob) are left alone."""
    top = sorted(f.lower() for f in fields)
    out = []
    for name in sorted(environ if environ is not None else os.environ):
        upper = name.upper()
        if not upper.startswith("AUTOD_") or upper in NOT_OVERRIDES:
            continue
        rest = upper[len("AUTOD_"):].lower().replace("-", "_")
        section = rest.split("__", 1)[0]
        if section in top:
            continue
        if "__" in rest:
            near = difflib.get_close_matches(section, top, n=1)
            hint = f" (did you mean AUTOD_{near[0].upper()}__...?)" if near else ""
            out.append(f"environment variable {name}: {section}: unknown section{hint}")
            continue
        for field in top:
            if rest.startswith(field + "_") and rest != field:
                fixed = f"AUTOD_{field.upper()}__{rest[len(field) + 1:].upper()}"
                out.append(f"environment variable {name}: sets nothing (a section and its key are"
                           f" joined by two underscores: {fixed})")
                break
    return out
