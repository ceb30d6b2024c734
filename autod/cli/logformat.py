"""How `autod logs` shows one JSON log record to a human: one line, with the time, level, mode, cycle and
phase in fixed places, the reflection record summarised, and colour only on a terminal. Every value is
made terminal-safe (autod.safety.termsafe): a log line is untrusted input."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from autod.linebreaks import lines_of
from autod.safety import termsafe

_LEVELS = {"debug": 10, "info": 20, "warn": 30, "warning": 30, "error": 40, "exception": 40,
           "critical": 50, "fatal": 50}


def _level_rank(level: object) -> int:
    return _LEVELS.get(str(level).lower(), 0)


def _parse_time(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


_RESET, _DIM, _BOLD = "\x1b[0m", "\x1b[2m", "\x1b[1m"
_RED, _GREEN, _YELLOW, _CYAN, _MAGENTA = "\x1b[31m", "\x1b[32m", "\x1b[33m", "\x1b[36m", "\x1b[35m"
_LEVEL_SHOW = {10: ("DEBUG", _DIM), 20: ("INFO", _GREEN), 30: ("WARN", _YELLOW), 40: ("ERROR", _RED),
               50: ("CRIT", _RED + _BOLD)}
_STATUS_COLOR = {"fixed": _GREEN, "improved": _GREEN, "reported": _GREEN, "no_change": _DIM,
                 "pending_approval": _YELLOW, "rejected": _YELLOW, "rolled_back": _RED,
                 "partly_rolled_back": _RED, "failed": _RED}
_SHOWN_ELSEWHERE = {"timestamp", "level", "event", "mode", "cycle_id", "phase", "event_id", "exception"}
_REFLECT_KEYS = {"status", "edits", "checks", "durations_ms", "tokens", "memory_used", "lesson"}


def _clean(text: str) -> str:
    # One record, one line; and no terminal escapes, C1 controls, bidi overrides or line separators
    # smuggled in from a build log excerpt or an LLM's summary (autod.safety.termsafe).
    return termsafe.line(text)


def _value(value: Any) -> str:
    if isinstance(value, str):
        needs_quotes = not value or any(c.isspace() or c in "\"'=" for c in value)
        return _clean(json.dumps(value, ensure_ascii=False) if needs_quotes else value)
    if isinstance(value, dict | list):
        return _clean(json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str))
    return _clean(str(value))


def _paint(text: str, style: str, color: bool) -> str:
    return f"{style}{text}{_RESET}" if color and style else text


def _clock(record: dict) -> str:
    stamp = _parse_time(record.get("timestamp"))
    if stamp is None:
        return "??:??:??.???"
    stamp = stamp.astimezone(UTC)
    return stamp.strftime("%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}"


def _duration(ms: Any) -> str:
    if not isinstance(ms, int | float):
        return _value(ms)
    return f"{ms / 1000:.1f}s" if ms >= 1000 else f"{ms:.0f}ms"


def _exception_summary(exc: Any) -> str:
    if isinstance(exc, list) and exc and isinstance(exc[-1], dict):
        last = exc[-1]  # dict_tracebacks: the outermost exception is last
        where = ""
        frames = last.get("frames")
        if isinstance(frames, list) and frames and isinstance(frames[-1], dict):
            frame = frames[-1]
            where = f" at {Path(str(frame.get('filename', '?'))).name}:{frame.get('lineno', '?')}"
        return _clean(f"{last.get('exc_type', 'Exception')}: {last.get('exc_value', '')}{where}")
    return _clean(lines_of(str(exc).strip())[-1]) if str(exc).strip() else ""


def _reflection_fields(record: dict, color: bool) -> list[str]:
    status = str(record.get("status"))
    parts = ["status=" + _paint(_clean(status), _STATUS_COLOR.get(status, ""), color)]
    edits = record.get("edits")
    if isinstance(edits, list):
        files = [
            f"{_clean(str(e.get('path', '?')))}(+{e.get('added', 0)} -{e.get('removed', 0)})"
            for e in edits if isinstance(e, dict)
        ]
        parts.append("files=" + (",".join(files) if files else "-"))
    checks = record.get("checks")
    if isinstance(checks, list):
        shown = []
        for check in checks:
            if isinstance(check, dict):
                code = check.get("exit_code")
                text = f"{_clean(str(check.get('name', '?')))}={code}"
                shown.append(_paint(text, _GREEN if code == 0 else _RED, color))
        parts.append("checks=" + (",".join(shown) if shown else "-"))
    durations = record.get("durations_ms")
    if isinstance(durations, dict) and durations:
        shown_durations = [f"{_clean(str(k))}:{_duration(v)}" for k, v in durations.items()]
        parts.append("durations=" + ",".join(shown_durations))
    tokens = record.get("tokens")
    if isinstance(tokens, dict) and tokens:
        parts.append(f"tokens={tokens.get('prompt', 0)}+{tokens.get('completion', 0)}")
    memory = record.get("memory_used")
    if isinstance(memory, list) and memory:
        parts.append(f"memory={len(memory)}")
    lesson = record.get("lesson")
    if isinstance(lesson, str) and lesson:
        parts.append("lesson=" + _value(lesson if len(lesson) <= 100 else lesson[:99] + "…"))
    return parts


def format_record(record: dict, *, color: bool) -> str:
    """One line: "HH:MM:SS.mmm LEVEL [mode cycle8 phase] event key=value ..."."""
    rank = _level_rank(record.get("level"))
    name, style = _LEVEL_SHOW.get(rank, (_clean(str(record.get("level", "?"))).upper()[:5], ""))
    parts = [_paint(_clock(record), _DIM, color), _paint(f"{name:<5}", style, color)]
    context = [_clean(str(record[k]))[:8] if k == "cycle_id" else _clean(str(record[k]))
               for k in ("mode", "cycle_id", "phase") if record.get(k)]
    if context:
        parts.append(_paint("[" + " ".join(context) + "]", _CYAN, color))
    parts.append(_paint(_clean(str(record.get("event", ""))), _BOLD, color))
    reflection = record.get("phase") == "reflect" and "status" in record
    if reflection:
        parts += _reflection_fields(record, color)
    for key, value in record.items():
        if key in _SHOWN_ELSEWHERE or (reflection and key in _REFLECT_KEYS):
            continue
        if key == "logger" and str(value).split(".")[0] == "autod":
            continue  # our own module names are noise; a library's name is worth showing
        parts.append(f"{_paint(_clean(str(key)), _MAGENTA, color)}={_value(value)}")
    if "exception" in record:
        parts.append(_paint("exception=" + _value(_exception_summary(record["exception"])), _RED, color))
    return " ".join(parts)
