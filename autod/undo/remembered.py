"""Undone changes are remembered: a later candidate that makes one again waits for a person.

`autod undo` takes a kept change back; without a memory of it the next cycle (on this failure or
another) could write the very same lines again seconds later. Each undo leaves
`<state_dir>/undone/<cycle_id>.json` (never pruned with the undo records); a candidate diff that
adds and removes, in the same files, every line an undone diff did is held as a proposal.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any

from autod import atomicfile
from autod.linebreaks import lines_of

DIR = "undone"
_READ_AT_MOST = 500  # newest first: far above the undos an operator makes; bounds the work per cycle
_FILE = re.compile(r"^diff --git a/(.+) b/")


def remember(state_dir: Path, cycle_id: str, undo_id: str, plan_summary: str, diff: str, reason: str) -> None:
    """Store one undone change (blocking)."""
    root = state_dir / DIR
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    record = {"cycle_id": cycle_id, "undo_id": undo_id, "plan_summary": plan_summary[:300],
              "diff": diff[:20000], "reason": reason[:300], "at": time.time()}
    atomicfile.atomic_write(root / f"{cycle_id}.json", json.dumps(record).encode(), 0o600)


def _is_change(line: str) -> bool:
    return line[:1] in "+-" and bool(line[1:].strip()) and line[:4] not in ("+++ ", "--- ")


def _changed(diff: str) -> dict[str, Counter[str]]:
    """Per file: the lines a unified diff adds ('+...') and removes ('-...'), blank ones aside."""
    out: dict[str, Counter[str]] = {}
    current = None
    for line in lines_of(diff):
        if m := _FILE.match(line):
            current = out.setdefault(m[1], Counter())
        elif current is not None and _is_change(line):
            current[line] += 1
    return {f: c for f, c in out.items() if c}


def reapplies(diff: str, undone: str) -> bool:
    """Whether `diff` makes, in the same files, every line change the undone diff made."""
    mine, theirs = _changed(diff), _changed(undone)
    if not theirs:
        return False
    return all(f in mine and not (lines - mine[f]) for f, lines in theirs.items())


def _records(state_dir: Path) -> list[dict[str, Any]]:
    root = state_dir / DIR
    if not root.is_dir():
        return []
    files = sorted(root.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)[:_READ_AT_MOST]
    out = []
    for path in files:
        try:
            record = json.loads(path.read_bytes()[:1_000_000])
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and isinstance(record.get("diff"), str):
            out.append(record)
    return out


def undone_hold(state_dir: Path, diff: str) -> str:
    """Why a candidate with this diff must wait for `autod approve` ('' when it re-applies nothing undone)."""
    for record in _records(state_dir):
        if reapplies(diff, record["diff"]):
            return (f"it re-applies the change taken back by `autod undo` (cycle {record.get('cycle_id')}:"
                    f" {str(record.get('plan_summary') or '')[:120]})")
    return ""
