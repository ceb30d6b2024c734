"""The Event contract (sources -> queue -> cycle) and fingerprinting."""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class EventKind(StrEnum):
    FILES_CHANGED = "files_changed"
    BUILD_FAILED = "build_failed"
    CHECK_FAILED = "check_failed"
    SCHEDULE = "schedule"
    MANUAL = "manual"


# Lower number = handled first: failures before file changes before schedules.
PRIORITY: dict[EventKind, int] = {
    EventKind.BUILD_FAILED: 0,
    EventKind.CHECK_FAILED: 0,
    EventKind.MANUAL: 1,
    EventKind.FILES_CHANGED: 2,
    EventKind.SCHEDULE: 3,
}

FAILURE_KINDS = frozenset({EventKind.BUILD_FAILED, EventKind.CHECK_FAILED})


def utcnow() -> datetime:
    return datetime.now(UTC)


class Event(BaseModel):
    """One thing that happened. `payload` keys used by the cycle:

    - ``excerpt``: failure output (str); ``locations``: ``[{"path", "line"}]`` the failure names
    - ``check``: name of the failing configured check; ``exit_code``
    - ``paths``: changed paths relative to the workspace (files_changed)
    - ``mode``: target mode (schedule/manual events address one mode)
    - ``message``: operator text (manual)
    """

    model_config = ConfigDict(extra="forbid")

    id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    source: str
    kind: EventKind
    summary: str
    payload: dict[str, Any] = Field(default_factory=dict)
    fingerprint: str
    created_at: datetime = Field(default_factory=utcnow)
    merged: int = 1

    @property
    def priority(self) -> int:
        return PRIORITY[self.kind]

    @property
    def target_mode(self) -> str | None:
        mode = self.payload.get("mode")
        return mode if isinstance(mode, str) else None


_WIN_TEMP_REST = re.compile(r"[^:'\")]+")


def _win_temp(m: re.Match[str]) -> str:
    r"""A Windows temp path (`C:\Users\x\AppData\Local\Temp\tmpab12`) as `<tmp>`, in a run of non-blanks
    from its first drive on: what `[A-Za-z]:\\[^\s]*\\Temp\\[^\s:'")]+` replaced (up to the last
    `\Temp\` of the run with a name after it), read once from each end. That pattern tried every drive
    of a run to the run's end: a line of `A:\a` repeated was quadratic. A later drive of the run never
    matched where the first did not."""
    run = m.group()
    end = len(run)
    while (at := run.rfind("\\Temp\\", 3, end)) >= 0:
        rest = _WIN_TEMP_REST.match(run, at + 6)
        if rest:
            return "<tmp>" + run[rest.end() :]
        end = at + 5  # an earlier `\Temp\`, which may share this one's first backslash
    return run


_NORMALISERS: list[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]] = [
    # ISO timestamps and clock times
    (re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"), "<ts>"),
    (re.compile(r"\b\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\b"), "<ts>"),
    # memory addresses and long hex ids
    (re.compile(r"0x[0-9a-fA-F]+"), "<addr>"),
    (re.compile(r"\b[0-9a-f]{12,}\b"), "<hex>"),
    # temp paths
    (re.compile(r"(?:/private)?/(?:tmp|var/folders|var/tmp)/[^\s:'\")]+"), "<tmp>"),
    (re.compile(r"[A-Za-z]:\\\S*+"), _win_temp),
    # line/column numbers: file.py:12:3, line 12, (12, 3)
    (re.compile(r"(?<=:)\d+(?=(?::\d+)?(?::|\b))"), "<n>"),
    (re.compile(r"\bline \d+"), "line <n>"),
    (re.compile(r"\(\d+,\s*\d+\)"), "(<n>)"),
    # durations
    (re.compile(r"\b\d+(?:\.\d+)?\s*(?:s|ms|sec|seconds)\b"), "<dur>"),
]


def normalise(text: str) -> str:
    """Strip what changes between two runs of the same failure."""
    out = text
    for pattern, repl in _NORMALISERS:
        out = pattern.sub(repl, out)
    return re.sub(r"\s+", " ", out).strip()


def fingerprint(*parts: str, exact: Iterable[str] = ()) -> str:
    """Stable short hash of the normalised parts, then of the `exact` parts as they are.

    `exact` carries identities that normalising would erase: the fingerprints of the single failures
    a check run found (16 hex digits, which `normalise` turns into ``<hex>``, so every one-failure run
    of a check would share one fingerprint), or a unique id. With no `exact` parts the value is the
    same as before they existed (queue_paths relies on it).
    """
    h = hashlib.sha256()
    for part in parts:
        h.update(normalise(part).encode("utf-8", "replace"))
        h.update(b"\x00")
    for part in exact:
        h.update(b"\x01" + part.encode("utf-8", "replace") + b"\x00")
    return h.hexdigest()[:16]
