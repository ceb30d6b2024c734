"""Where a config error comes from, said in one line: the file and line of the key, or the AUTOD_
environment variable that set it (the environment overrides the file, so a value it set is never blamed
on a line of the YAML), then the field. Input values are never echoed."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from autod.config.bounded import CONFIG_CAP, read_bounded
from autod.config.keynames import shown_key


class ConfigError(Exception):
    """A config problem the operator can fix; the message names file, line and field (exit 78)."""


@dataclass(frozen=True)
class Problem:
    """A part of a valid config that cannot work here (an error) or will surprise (a warning)."""

    key: tuple[str | int, ...]  # where in the YAML, e.g. ("checks", "tests", "run")
    message: str
    error: bool = True  # False: a warning (the config works, but not as it reads)


_UNION_TAGS = {"watch", "logtail", "cron"}  # the source types: a discriminator, not a key to name


def _key_lines(text: str) -> dict[tuple[Any, ...], int]:
    lines: dict[tuple[Any, ...], int] = {}
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return lines

    def walk(node: yaml.Node, path: tuple[Any, ...]) -> None:
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                key = k.value if isinstance(k, yaml.ScalarNode) else str(k)
                lines[(*path, key)] = k.start_mark.line + 1
                walk(v, (*path, key))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                lines[(*path, i)] = item.start_mark.line + 1
                walk(item, (*path, i))

    if root is not None:
        walk(root, ())
    return lines


def key_lines(path: Path) -> dict[tuple[Any, ...], int]:
    """Line of each key path in a config file ({} when it cannot be read): for errors found after loading."""
    try:
        return _key_lines(read_bounded(path, CONFIG_CAP).decode("utf-8"))
    except (OSError, UnicodeDecodeError):
        return {}


ENV_PREFIX = "AUTOD_"


def _norm(part: Any) -> str:
    return str(part).lower().replace("-", "_")


def env_keys(fields: Iterable[str]) -> dict[tuple[str, ...], str]:
    """The AUTOD_* variables that set part of the config, by the key path each sets (lower case, '-' as
    '_'); variables that name no top-level key in `fields` (AUTOD_CONFIG, AUTOD_INSTANCE) are left out."""
    top = {_norm(name) for name in fields}
    out: dict[tuple[str, ...], str] = {}
    for name in os.environ:
        if not name.upper().startswith(ENV_PREFIX):
            continue
        parts = tuple(_norm(p) for p in name[len(ENV_PREFIX):].split("__"))
        if parts[0] in top:
            out[parts] = name
    return out


def blamed_variable(
    loc: tuple[Any, ...], file_keys: dict[tuple[Any, ...], int], fields: Iterable[str]
) -> str | None:
    """The environment variable an error at `loc` comes from, or None when it comes from the file.

    The environment overrides the file: a variable that sets exactly this key (or one below it) is to
    blame; one that sets a whole section as JSON is, unless the file itself has the key."""
    key = tuple(_norm(x) for x in loc)
    env = env_keys(fields)
    exact = [name for path, name in env.items() if path[: len(key)] == key]
    if exact:
        return sorted(exact)[0]
    above = [(len(path), name) for path, name in env.items() if key[: len(path)] == path]
    in_file = {tuple(_norm(x) for x in k) for k in file_keys}
    return max(above)[1] if above and key not in in_file else None


def format_error(
    path: Path | None, text: str, exc: ValidationError, fields: Iterable[str], secrets: Iterable[str] = ()
) -> str:
    """One line (up to five errors) naming, for each, the file and line, or the AUTOD_ variable, and the
    field; input values are never echoed, nor key names that may be secrets (`autod.config.keynames`)."""
    secrets = list(secrets)
    lines = _key_lines(text) if text else {}
    parts = []
    for err in exc.errors(include_input=False, include_url=False):
        loc = tuple(x for x in err["loc"] if not (isinstance(x, str) and x in _UNION_TAGS))
        # walk back up the path until a key with a known line is found
        line = None
        probe = loc
        while probe:
            if probe in lines:
                line = lines[probe]
                break
            probe = probe[:-1]
        variable = blamed_variable(loc, lines, fields) if loc else None
        field = ".".join(shown_key(x, secrets) for x in loc) or "(top level)"
        msg = err["msg"]
        for secret in secrets:  # a validator that names a key it refuses: never a secret pasted as one
            msg = msg.replace(secret, "***") if len(secret) >= 4 else msg
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        elif err["type"] == "missing":
            msg = "required key is missing"
        elif err["type"] == "union_tag_invalid":  # pydantic's message quotes the value given
            msg = f"must be one of {err.get('ctx', {}).get('expected_tags', 'the known types')}"
        where = str(path) if path else "<config>"
        if variable is not None:  # never a line of the file for a value the environment set
            where = f"environment variable {variable}"
        elif line is not None:
            where += f":{line}"
        parts.append(f"{where}: {field}: {msg}")
    return "; ".join(parts[:5]) + (f" (+{len(parts) - 5} more)" if len(parts) > 5 else "")


def env_json_error(exc: Exception, fields: Iterable[str]) -> str | None:
    """The message for a section or list an AUTOD_ variable set as JSON that does not parse (pydantic-
    settings names the field only), or None when no such variable is set."""
    field = re.search(r'field "([^"]+)"', str(exc))
    named = sorted(n for p, n in env_keys(fields).items() if field and p[0] == _norm(field[1]))
    if not named or field is None:
        return None
    return f"environment variable {named[0]}: {field[1]}: not valid (a section or list is set as JSON)"
