"""The `autod logs` reader: filters, tail, JSON passthrough, follow across rotation, format."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import shutil
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import structlog

from autod import logs
from autod.cli.logview import LogFilter, follow, format_record, parse_since, read_records, run_logs

HANG_GUARD_S = 10  # only stops a broken follower from hanging the suite

BASE = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)


def rec(i: int, **extra: object) -> dict:
    record: dict = {
        "timestamp": (BASE + timedelta(seconds=i)).isoformat().replace("+00:00", "Z"),
        "level": "info",
        "event": f"line {i}",
        "i": i,
    }
    record.update(extra)
    return record


def line(record: dict) -> str:
    return json.dumps(record, ensure_ascii=False) + "\n"


def write(path: Path, *records: dict, mode: str = "a") -> None:
    with open(path, mode, encoding="utf-8") as fh:
        fh.writelines(line(r) for r in records)


REFLECTION = rec(
    99,
    event="cycle.finished",
    phase="reflect",
    cycle_id="0123456789abcdef0123456789abcdef",
    event_id="e" * 32,
    mode="auto-debug",
    status="fixed",
    edits=[{"path": "src/calc.py", "added": 3, "removed": 1}, {"path": "tests/test_calc.py", "added": 5,
                                                                "removed": 0}],
    checks=[{"name": "tests", "exit_code": 0, "duration_ms": 2300}, {"name": "lint", "exit_code": 1,
                                                                      "duration_ms": 80}],
    durations_ms={"observe": 12, "plan": 4100, "act": 35, "reflect": 7},
    tokens={"prompt": 1200, "completion": 340},
    memory_used=["n2-1", "n1-7"],
    lesson="Division by zero in calc.mean:\nguard empty input",
)


# ---------------------------------------------------------------------------------------
# Filters


def test_cycle_filter_matches_the_id_or_its_prefix() -> None:
    record = rec(1, cycle_id="0123456789abcdef")
    assert LogFilter(cycle="01234567").match(record)
    assert LogFilter(cycle="0123456789abcdef").match(record)
    assert not LogFilter(cycle="fedcba").match(record)
    assert not LogFilter(cycle="0123").match(rec(2))


def test_phase_and_mode_filters_match_exactly() -> None:
    record = rec(1, phase="plan", mode="auto-doc")
    assert LogFilter(phase="plan", mode="auto-doc").match(record)
    assert not LogFilter(phase="act").match(record)
    assert not LogFilter(mode="auto-debug").match(record)


def test_level_filter_is_a_minimum() -> None:
    flt = LogFilter(level="warning")
    levels = ["debug", "info", "warning", "error", "critical"]
    assert [flt.match(rec(1, level=lv)) for lv in levels] == [False, False, True, True, True]
    assert LogFilter(level="WARN").match(rec(1, level="error"))


def test_unknown_level_filter_is_refused() -> None:
    with pytest.raises(ValueError, match="level"):
        LogFilter(level="loud")


def test_since_filter_keeps_records_at_or_after_the_time() -> None:
    flt = LogFilter(since=BASE + timedelta(seconds=5))
    assert [flt.match(rec(i)) for i in (4, 5, 6)] == [False, True, True]
    assert not flt.match({"event": "no timestamp"})
    assert LogFilter(since=datetime(2025, 3, 1, 12, 0, 5)).match(rec(5))  # naive means UTC


def test_parse_since_takes_relative_durations_and_iso_times() -> None:
    now = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
    assert parse_since("30s", now=now) == now - timedelta(seconds=30)
    assert parse_since("10m", now=now) == now - timedelta(minutes=10)
    assert parse_since("2h", now=now) == now - timedelta(hours=2)
    assert parse_since("1d", now=now) == now - timedelta(days=1)
    assert parse_since("2025-02-28") == datetime(2025, 2, 28, tzinfo=UTC)
    assert parse_since("2025-02-28T10:30:00Z") == datetime(2025, 2, 28, 10, 30, tzinfo=UTC)
    assert parse_since("2025-02-28T10:30:00+02:00") == datetime(2025, 2, 28, 8, 30, tzinfo=UTC)
    with pytest.raises(ValueError, match="since"):
        parse_since("yesterday")


# ---------------------------------------------------------------------------------------
# Reading


def test_read_records_returns_the_last_n_matching_oldest_first(tmp_path: Path) -> None:
    path = tmp_path / "autod.jsonl"
    write(path, *(rec(i, level="error" if i % 3 == 0 else "info") for i in range(30)))
    assert [r["i"] for r in read_records(path, LogFilter(), 4)] == [26, 27, 28, 29]
    assert [r["i"] for r in read_records(path, LogFilter(level="error"), 3)] == [21, 24, 27]
    assert len(read_records(path, LogFilter(), None)) == 30
    assert read_records(path, LogFilter(), 0) == []


def test_read_records_crosses_block_boundaries_intact(tmp_path: Path) -> None:
    path = tmp_path / "autod.jsonl"
    # Long lines of varying size so lines straddle every read block.
    write(path, *(rec(i, pad="x" * (i * 37 % 3000)) for i in range(600)))
    got = read_records(path, LogFilter(), 550)
    assert [r["i"] for r in got] == list(range(50, 600))
    assert all(r["pad"] == "x" * (r["i"] * 37 % 3000) for r in got)


def test_read_records_fills_in_from_the_rotated_file(tmp_path: Path) -> None:
    path = tmp_path / "autod.jsonl"
    write(path.with_name("autod.jsonl.1"), *(rec(i) for i in range(10)))
    write(path, *(rec(i) for i in range(10, 13)))
    assert [r["i"] for r in read_records(path, LogFilter(), 5)] == [8, 9, 10, 11, 12]
    assert [r["i"] for r in read_records(path, LogFilter(), 2)] == [11, 12]
    assert [r["i"] for r in read_records(path, LogFilter(), None)] == list(range(13))


def test_garbage_and_non_object_lines_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "autod.jsonl"
    with open(path, "wb") as fh:
        fh.write(line(rec(1)).encode())
        fh.write(b"plain text from something else\n")
        fh.write(b"\n   \n")
        fh.write(b'[1, 2, 3]\n"a string"\n42\nnull\n')
        fh.write(b'{"timestamp": "2025-03-01T12:00:02Z", "level": "info", "ev\n')  # torn write
        fh.write(b"\xff\xfe\x00 binary \x80\n")
        fh.write(line(rec(2)).encode().replace(b"\n", b"\r\n"))
        fh.write(line(rec(3)).encode())
    assert [r["i"] for r in read_records(path, LogFilter(), None)] == [1, 2, 3]
    assert [r["i"] for r in read_records(path, LogFilter(), 10)] == [1, 2, 3]


def test_missing_log_file_reads_as_empty(tmp_path: Path) -> None:
    assert read_records(tmp_path / "nope.jsonl", LogFilter(), 10) == []


# ---------------------------------------------------------------------------------------
# run_logs


def test_json_output_is_the_original_lines_byte_for_byte(tmp_path: Path) -> None:
    path = tmp_path / "autod.jsonl"
    originals = [
        '{"level":"info","event":"compact","timestamp":"2025-03-01T12:00:01Z","phase":"act"}\n',
        '{ "event" : "spaced",  "level": "warning", "timestamp": "2025-03-01T12:00:02Z", "phase": "act" }\n',
        '{"event": "ünïcode ✓", "level": "error", "timestamp": "2025-03-01T12:00:03Z", "phase": "plan"}\n',
        '{"event": "escaped \\u00e9 \\n", "level": "info", "timestamp": "2025-03-01T12:00:04Z",'
        ' "phase": "act"}\n',
    ]
    path.write_text("".join(originals) + "not json\n", encoding="utf-8")
    out = io.StringIO()
    code = run_logs(path, follow=False, as_json=True, flt=LogFilter(phase="act"), n=10, out=out)
    assert code == 0
    assert out.getvalue() == originals[0] + originals[1] + originals[3]


def test_human_output_is_one_line_per_record(tmp_path: Path) -> None:
    path = tmp_path / "autod.jsonl"
    write(path, rec(1, phase="plan", mode="auto-debug", cycle_id="abcdef0123456789"), REFLECTION)
    out = io.StringIO()
    assert run_logs(path, follow=False, as_json=False, flt=LogFilter(), n=10, out=out) == 0
    first, second = out.getvalue().splitlines()
    assert first.startswith("12:00:01.000 INFO  [auto-debug abcdef01 plan] line 1")
    assert "status=fixed" in second
    assert "\x1b[" not in out.getvalue()  # a StringIO is not a terminal


def test_run_logs_without_a_log_file_fails_with_a_message(tmp_path: Path, capsys) -> None:
    out = io.StringIO()
    path = tmp_path / "missing.jsonl"
    assert run_logs(path, follow=False, as_json=False, flt=LogFilter(), n=10, out=out) == 1
    assert str(path) in capsys.readouterr().err


# ---------------------------------------------------------------------------------------
# Follow


async def take(agen: AsyncIterator[dict], count: int) -> list[dict]:
    got = []
    async with asyncio.timeout(HANG_GUARD_S):
        while len(got) < count:
            got.append(await anext(agen))
    return got


def test_follow_starts_at_the_end_by_default(tmp_path: Path) -> None:
    path = tmp_path / "autod.jsonl"
    write(path, rec(1), rec(2))

    async def main() -> list[int]:
        agen = follow(path, LogFilter(), poll_s=0.01)
        first = asyncio.ensure_future(take(agen, 1))
        await asyncio.sleep(0.05)
        write(path, rec(3))
        got = await first
        await agen.aclose()
        return [r["i"] for r in got]

    assert asyncio.run(main()) == [3]


def test_follow_reads_across_rename_rotation_in_order_once(tmp_path: Path) -> None:
    path = tmp_path / "autod.jsonl"
    path.touch()

    async def main() -> list[int]:
        agen = follow(path, LogFilter(), poll_s=0.01, start=0)
        write(path, *(rec(i) for i in range(5)))
        got = await take(agen, 2)  # the follower holds the old file open now
        write(path, *(rec(i) for i in range(5, 8)))  # written before the move, read after it
        os.rename(path, path.with_name("autod.jsonl.1"))
        write(path.with_name("autod.jsonl.1"), rec(8))  # the writer has not reopened yet
        write(path, *(rec(i) for i in range(9, 14)))  # the new file
        got += await take(agen, 12)
        # Nothing further: a second pass over either file would show up here.
        write(path, rec(14))
        got += await take(agen, 1)
        await agen.aclose()
        return [r["i"] for r in got]

    assert asyncio.run(main()) == list(range(15))


def test_follow_waits_for_a_missing_file_and_reads_it_from_the_start(tmp_path: Path) -> None:
    path = tmp_path / "autod.jsonl"

    async def main() -> list[int]:
        agen = follow(path, LogFilter(), poll_s=0.01)
        pending = asyncio.ensure_future(take(agen, 3))
        await asyncio.sleep(0.05)
        write(path, rec(1), rec(2), rec(3))
        got = await pending
        await agen.aclose()
        return [r["i"] for r in got]

    assert asyncio.run(main()) == [1, 2, 3]


def test_follow_restarts_after_copytruncate(tmp_path: Path) -> None:
    path = tmp_path / "autod.jsonl"
    path.touch()

    async def main() -> list[int]:
        agen = follow(path, LogFilter(), poll_s=0.01, start=0)
        write(path, *(rec(i, pad="x" * 200) for i in range(5)))
        got = await take(agen, 5)
        shutil.copyfile(path, path.with_name("autod.jsonl.1"))
        with open(path, "r+b") as fh:
            fh.truncate(0)
        write(path, rec(5), rec(6))  # shorter than before: the follower sees the size drop
        got += await take(agen, 2)
        await agen.aclose()
        return [r["i"] for r in got]

    assert asyncio.run(main()) == list(range(7))


def test_follow_holds_a_partial_line_until_it_is_complete(tmp_path: Path) -> None:
    path = tmp_path / "autod.jsonl"
    path.touch()
    second = line(rec(2, note="written in two halves"))

    async def main() -> list[dict]:
        agen = follow(path, LogFilter(), poll_s=0.01, start=0)
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(line(rec(1)) + second[:25])
        got = await take(agen, 1)  # the read that returned line 1 also saw half of line 2
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(second[25:])
        got += await take(agen, 1)
        await agen.aclose()
        return got

    got = asyncio.run(main())
    assert [r["i"] for r in got] == [1, 2]
    assert got[1]["note"] == "written in two halves"


def test_follow_skips_garbage_and_applies_the_filter(tmp_path: Path) -> None:
    path = tmp_path / "autod.jsonl"
    path.touch()

    async def main() -> list[int]:
        agen = follow(path, LogFilter(level="error"), poll_s=0.01, start=0)
        with open(path, "ab") as fh:
            fh.write(b"garbage\n\xff\xfe\n[]\n")
            fh.write(line(rec(1)).encode())
            fh.write(line(rec(2, level="error")).encode())
        got = await take(agen, 1)
        await agen.aclose()
        return [r["i"] for r in got]

    assert asyncio.run(main()) == [2]


def test_follow_ends_when_stop_is_set(tmp_path: Path) -> None:
    path = tmp_path / "autod.jsonl"
    path.touch()

    async def main() -> list[dict]:
        stop = asyncio.Event()
        got = []

        async def consume() -> None:
            async for record in follow(path, LogFilter(), poll_s=5, stop=stop, start=0):
                got.append(record)

        task = asyncio.ensure_future(consume())
        await asyncio.sleep(0.05)
        stop.set()
        async with asyncio.timeout(HANG_GUARD_S):
            await task
        return got

    assert asyncio.run(main()) == []


# ---------------------------------------------------------------------------------------
# Format


def test_reflection_record_is_one_line_with_status_files_checks_durations_tokens() -> None:
    text = format_record(REFLECTION, color=False)
    assert "\n" not in text
    assert text.startswith("12:01:39.000 INFO  [auto-debug 01234567 reflect] cycle.finished status=fixed")
    assert "files=src/calc.py(+3 -1),tests/test_calc.py(+5 -0)" in text
    assert "checks=tests=0,lint=1" in text
    assert "durations=observe:12ms,plan:4.1s,act:35ms,reflect:7ms" in text
    assert "tokens=1200+340" in text
    assert "memory=2" in text
    assert '"Division by zero in calc.mean:\\nguard empty input"' in text


def test_plain_record_shows_key_values_and_no_colour() -> None:
    record = rec(1, level="warning", phase="act", mode="auto-doc", cycle_id="feedbeef" * 4,
                 event_id="x" * 32, path="docs/a b.md", count=3, logger="autod.act.edits")
    text = format_record(record, color=False)
    assert text == '12:00:01.000 WARN  [auto-doc feedbeef act] line 1 i=1 path="docs/a b.md" count=3'


def test_library_logger_name_is_shown() -> None:
    assert "logger=httpx" in format_record(rec(1, logger="httpx"), color=False)


def test_colour_is_only_added_when_asked() -> None:
    assert "\x1b[" in format_record(REFLECTION, color=True)
    assert "\x1b[" not in format_record(REFLECTION, color=False)


def test_terminal_escapes_and_newlines_in_values_are_neutralised() -> None:
    text = format_record(rec(1, event="evil\x1b[2Jclear", excerpt="a\nb\x07"), color=False)
    assert "\x1b" not in text and "\n" not in text and "\x07" not in text
    assert "evil\\x1b[2Jclear" in text


def test_exception_is_summarised_on_the_same_line() -> None:
    exception = [{"exc_type": "ZeroDivisionError", "exc_value": "division by zero",
                  "frames": [{"filename": "/srv/repo/src/calc.py", "lineno": 7, "name": "mean"}]}]
    text = format_record(rec(1, level="error", exception=exception), color=False)
    assert "\n" not in text
    assert "exception=\"ZeroDivisionError: division by zero at calc.py:7\"" in text


# ---------------------------------------------------------------------------------------
# Round trip with the writer


def test_lines_written_by_autod_logs_are_read_and_filtered(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "autod.jsonl"
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        logs.configure_logging(file=path, stderr=False, secrets=["s3cr3t-key"])
        log = logs.get_logger("autod.cycle.phases")
        logs.bind_cycle("abcd" * 8, "e" * 32, "auto-debug")
        logs.set_phase("plan")
        log.info("planning", key="s3cr3t-key")
        logs.set_phase("reflect")
        log.info("cycle.finished", **{k: REFLECTION[k] for k in ("status", "edits", "checks", "durations_ms",
                                                                 "tokens", "memory_used", "lesson")})
        logs.clear_cycle()
        logs.flush()
    finally:
        logs.configure_logging(file=None, stderr=False)
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        logs.set_secrets([])
        structlog.contextvars.clear_contextvars()

    (reflect,) = read_records(path, LogFilter(cycle="abcdabcd", phase="reflect"), 10)
    assert reflect["status"] == "fixed" and reflect["tokens"] == {"prompt": 1200, "completion": 340}
    text = format_record(reflect, color=False)
    assert "[auto-debug abcdabcd reflect] cycle.finished status=fixed" in text
    (plan,) = read_records(path, LogFilter(phase="plan"), 10)
    assert plan["key"] == "***"
