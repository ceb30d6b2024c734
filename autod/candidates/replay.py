"""Replay before asking: a fix memory holds for this failure, tried first as a candidate, no model call.

An episode (and its lesson, which a fleet shares) whose change was kept stores what it changed
(`replay` in its metadata, JSON): each edited definition's file, qualname, old and new text, and the
tests that failed. When a failure of the same
fingerprint or of one of the same tests comes back and a definition that fix changed reads as it did
before the fix (its text equal, or close: `CLOSE_RATIO`), the fix's text of that definition is offered
as a plan of whole-definition edits. Memory is untrusted (a shared server holds other daemons' items,
a workspace's text went into them): a replay goes through the act rules and the checks on the mirror
like a model's plan, and one that does not fix the failure is a rejected candidate, never applied.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import structlog

from autod.act.definition import definition_texts
from autod.act.edits import FileChange
from autod.memory import Recalled, Tier
from autod.memory.recall import REPLAY_KEY
from autod.plan import Edit, Plan
from autod.safety.boundary import Boundary
from autod.safety.saferead import read_untrusted_text

log = structlog.get_logger("autod.candidates.replay")

MAX_DEFINITIONS = 4  # a fix that changed more is not replayed (it was no small fix)
MAX_TEXT = 8000  # characters of one definition's text, old or new
MAX_TESTS = 20
MAX_REPLAYS = 2  # candidates a cycle tries from memory before it asks the model
CLOSE_RATIO = 0.9  # how close the definition's text now must be to the text the fix found
FILE_CAP = 2_000_000
ID = re.compile(r"[0-9a-f]{6,40}")


@dataclass(frozen=True)
class Replay:
    """A remembered fix that applies here: its plan and where it came from."""

    plan: Plan
    episode: str  # the recalled episode's id
    cycle_id: str  # the cycle that kept the fix


def definitions(text: str, rel: str) -> dict[str, str]:
    """qualname -> source text of each unit a whole-definition edit can name (functions, classes,
    plain-name assignments at module and class level): the edit layer's own walk, so a fix to a
    class attribute is remembered as that attribute, not as its whole (maybe long) class."""
    return definition_texts(text, rel)


def changed_definitions(changes: Iterable[FileChange]) -> list[dict[str, str]]:
    """The innermost definitions a kept change rewrote: [{path, symbol, old, new}] ([] when it created
    or removed one, touched no Python, or changed more than MAX_DEFINITIONS)."""
    out: list[dict[str, str]] = []
    for c in changes:
        if not c.rel.endswith(".py") or c.old is None:
            return []
        old = definitions(c.old.decode("utf-8", "replace"), c.rel)
        new = definitions(c.new.decode("utf-8", "replace"), c.rel)
        both = old.keys() & new.keys()
        if any(not _inside(q, both) for q in old.keys() ^ new.keys()):
            return []  # a definition added or removed at the top: not one a whole-definition edit replays
        moved = [q for q in both if old[q] != new[q]]
        inner = [q for q in moved if not any(o.startswith(q + ".") for o in moved)]
        out += [{"path": c.rel, "symbol": q, "old": old[q], "new": new[q]} for q in inner]
    if not out or len(out) > MAX_DEFINITIONS or any(len(d["old"]) > MAX_TEXT or len(d["new"]) > MAX_TEXT
                                                     for d in out):
        return []
    return out


def _inside(qual: str, kept: set[str]) -> bool:
    """Whether `qual` (a unit a fix added or removed, such as a local it introduced) sits inside a unit
    the file has before and after: then that unit's new text carries it."""
    parts = qual.split(".")
    return any(".".join(parts[:i]) in kept for i in range(1, len(parts)))


def replay_record(changes: Iterable[FileChange], tests: Iterable[str]) -> str:
    """The episode's `replay` metadata (JSON) for a kept change; "" when it cannot be replayed."""
    defs = changed_definitions(changes)
    if not defs:
        return ""
    return json.dumps({"definitions": defs, "tests": sorted(tests)[:MAX_TESTS]})


def _parse(raw: Any) -> tuple[list[dict[str, str]], set[str]] | None:
    """The stored record, checked for shape (a memory item is untrusted)."""
    try:
        doc = json.loads(raw) if isinstance(raw, str) and raw else None
    except ValueError:
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("definitions"), list):
        return None
    defs = [d for d in doc["definitions"][:MAX_DEFINITIONS] if _well_formed(d)]
    if not defs or len(defs) != len(doc["definitions"]):
        return None
    tests = doc.get("tests") if isinstance(doc.get("tests"), list) else []
    return defs, {str(t) for t in tests[:MAX_TESTS]}


def _well_formed(d: Any) -> bool:
    return (isinstance(d, dict) and all(isinstance(d.get(k), str) and d[k] for k in ("path", "symbol", "new"))
            and isinstance(d.get("old"), str) and len(d["new"]) <= MAX_TEXT)


def close(now: str, then: str) -> bool:
    """Whether a definition's text now is the text a fix found (or nearly: a comment, a renamed local)."""
    if now == then:
        return True
    m = difflib.SequenceMatcher(None, now, then, autojunk=False)
    return m.real_quick_ratio() >= CLOSE_RATIO and m.quick_ratio() >= CLOSE_RATIO and m.ratio() >= CLOSE_RATIO


def replays(recalled: Iterable[Recalled], boundary: Boundary, *, fingerprint: str,
            tests: Iterable[str]) -> list[Replay]:
    """The remembered fixes that apply to this failure, best recalled first (blocking: reads files)."""
    failing = set(tests)
    out: list[Replay] = []
    seen: set[str] = set()
    for item in recalled:
        meta = item.metadata
        if item.tier is Tier.N0 or meta.get("status") not in ("fixed", "improved"):
            continue
        parsed = _parse(meta.get(REPLAY_KEY))
        if parsed is None:
            continue
        defs, tests_then = parsed
        if meta.get("fingerprint") != fingerprint and not (failing & tests_then):
            continue
        edits = _applicable(defs, boundary)
        key = json.dumps([(e.path, e.symbol, e.replace) for e in edits])
        if not edits or key in seen:
            continue
        seen.add(key)
        # ids come from the store (a peer may have written them): only an id's shape reaches a summary
        cycle = str(meta.get("cycle_id") or "")
        cycle = cycle if ID.fullmatch(cycle) else ""
        names = ", ".join(f"{e.symbol} in {e.path}" for e in edits)  # both checked against the file
        where = f"cycle {cycle}" if cycle else "an earlier cycle"
        plan = Plan(summary=f"replay the fix kept by {where}: {names}"[:4000], edits=edits)
        out.append(Replay(plan, item.id, cycle))
        if len(out) >= MAX_REPLAYS:
            break
    return out


def _applicable(defs: list[dict[str, str]], boundary: Boundary) -> list[Edit]:
    """The fix's edits when every definition it changed is back to (or close to) its old text."""
    edits: list[Edit] = []
    texts: dict[str, dict[str, str]] = {}
    for d in defs:
        rel = boundary.readable(d["path"])
        if rel != d["path"]:  # unreadable, outside, or through a symlink: not replayed
            return []
        if rel not in texts:
            try:
                texts[rel] = definitions(read_untrusted_text(boundary.workspace / rel, cap=FILE_CAP), rel)
            except OSError as exc:  # gone, a symlink, a FIFO: nothing to replay there
                log.info("replay.unreadable", path=rel, error=type(exc).__name__)
                return []
        now = texts[rel].get(d["symbol"])
        if now is None or now == d["new"] or not close(now, d["old"]):
            return []
        edits.append(Edit(path=rel, symbol=d["symbol"], replace=d["new"]))
    return edits


def event_tests(payload: dict[str, Any]) -> set[str]:
    """The tests a failure event names (its `failing_tests`, else those its output shows failing)."""
    from autod.checks.outcome import failing_tests

    known = payload.get("failing_tests")
    if isinstance(known, list) and known:
        return {str(t) for t in known}
    return set(failing_tests(str(payload.get("excerpt", ""))) or ())


def for_failure(recalled: Iterable[Recalled], boundary: Boundary, *, fingerprint: str,
                payload: dict[str, Any]) -> list[Replay]:
    """`replays` for a failure event (blocking); a bug here costs the cycle its replays, nothing more."""
    try:
        return replays(recalled, boundary, fingerprint=fingerprint, tests=event_tests(payload))
    except Exception:
        log.exception("replay.lookup_failed")
        return []


def to_remember(changes: Iterable[FileChange], payload: dict[str, Any]) -> str:
    """The `replay` record of a kept change (blocking: parses). "" when a secret would be in it: a
    replay must write the text as it was, and a redacted one would not be."""
    from autod import logs

    try:
        record = replay_record(changes, event_tests(payload))
    except Exception:  # a bug here never costs the cycle its record
        log.exception("replay.record_failed")
        return ""
    return record if record and logs.redact_text(record) == record else ""
