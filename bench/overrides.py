"""`--set KEY=VALUE` for the benches that write an autod config: one setting away from the defaults.

KEY is a dotted path in the YAML (`llm.reply_form`, `candidates.n`), VALUE is read as YAML (`code`,
`4`, `true`). The result says which settings it ran with, so a run off the defaults is never taken for
one on them.
"""
from __future__ import annotations

import argparse
from typing import Any

import yaml

SET: list[tuple[list[str], Any]] = []  # filled by the bench's main from --set


def parse(text: str) -> tuple[list[str], Any]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: expected KEY=VALUE, e.g. llm.reply_form=code")
    return key.strip().split("."), yaml.safe_load(value)


def apply(cfg: dict[str, Any]) -> dict[str, Any]:
    for path, value in SET:
        node = cfg
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
    return cfg


def described(default: str) -> str:
    if not SET:
        return default
    return default + "; --set " + ", ".join(f"{'.'.join(p)}={v!r}" for p, v in SET)
