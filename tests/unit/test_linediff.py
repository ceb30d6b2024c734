"""Bounded line diffs: exact where difflib is cheap, valid and linear-ish where it would be quadratic."""

from __future__ import annotations

import difflib
import random
from pathlib import Path

import pytest

from autod.act import Boundary, Caps, prepare, unified_diff
from autod.act.linediff import EXACT_LIMIT, count, opcodes, split_lines, unified
from autod.errors import PlanRejected
from autod.plan import Edit, Plan


def rebuild(a: list[str], b: list[str]) -> list[str]:
    out: list[str] = []
    for tag, i1, i2, j1, j2 in opcodes(a, b):
        if tag == "equal":
            assert a[i1:i2] == b[j1:j2]
            out += a[i1:i2]
        else:
            out += b[j1:j2]
    return out


@pytest.mark.parametrize("seed", range(40))
def test_small_diffs_count_exactly_as_difflib(seed: int) -> None:
    rng = random.Random(seed)
    a = [rng.choice("abcde") + "\n" for _ in range(rng.randrange(0, 40))]
    b = list(a)
    for _ in range(rng.randrange(1, 6)):
        k = rng.randrange(0, len(b) + 1)
        if b and rng.random() < 0.5:
            del b[min(k, len(b) - 1)]
        else:
            b.insert(k, rng.choice("abcxyz") + "\n")
    want_added = want_removed = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            want_removed += i2 - i1
            want_added += j2 - j1
    assert count("".join(a), "".join(b)) == (want_added, want_removed)
    assert rebuild(a, b) == b
    assert patched(a, list(unified(a, b, "a/x", "b/x"))) == b


def patched(a: list[str], diff: list[str]) -> list[str]:
    """Apply a unified diff strictly (context and removed lines must be where the hunk says)."""
    out: list[str] = []
    pos = 0
    for line in diff[2:]:
        if line.startswith("@@"):
            start = int(line.split()[1].split(",")[0][1:])
            count_ = int(line.split()[1].split(",")[1]) if "," in line.split()[1] else 1
            start = start - 1 if count_ else start
            out += a[pos:start]
            pos = start
        elif line[0] in " -":
            assert a[pos] == line[1:], (pos, line)
            if line[0] == " ":
                out.append(line[1:])
            pos += 1
        else:
            out.append(line[1:])
    return out + a[pos:]


def test_large_diffs_past_the_exact_limit_are_still_valid_and_tight() -> None:
    rng = random.Random(7)
    a = [f"row {i},{rng.randrange(10**6)}\n" for i in range(20_000)]
    b = list(a)
    for k in (10, 5_000, 12_345, 19_990):  # four far-apart one-line edits
        b[k] = "changed\n"
    assert len(a) * len(b) > EXACT_LIMIT
    assert rebuild(a, b) == b
    assert count("".join(a), "".join(b)) == (4, 4)


def test_repeated_lines_without_anchors_overcount_rather_than_undercount() -> None:
    a = ["same\n"] * 3000
    b = ["other\n"] + ["same\n"] * 1499 + ["other\n"] + ["same\n"] * 1500
    assert rebuild(a, b) == b
    added, removed = count("".join(a), "".join(b))
    assert added >= 2 and removed >= 0 and added - removed == len(b) - len(a)


def test_only_newline_ends_a_line() -> None:
    assert split_lines("a\u2028b\x85c\x0cd\ne") == ["a\u2028b\x85c\x0cd\n", "e"]


CSV_ROWS = 16_000


@pytest.fixture
def csv_workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    # identical rows (a log-like export) are what made difflib's exact matching quadratic
    rows = ["day,status,id\n"] + ["2024-01-01,ok,0\n"] * CSV_ROWS
    rows[8001] = "2024-01-01,fail,8000\n"
    (ws / "data.csv").write_text("".join(rows))
    return ws


@pytest.mark.timeout(15)  # a hang guard only (this takes milliseconds): the quadratic count took 26-60 s
def test_a_one_line_edit_of_a_16000_row_csv_is_counted_and_diffed_as_one_line(csv_workspace: Path) -> None:
    boundary = Boundary(csv_workspace, csv_workspace / ".autod", [])
    plan = Plan(summary="fix row", edits=[Edit(path="data.csv", search="fail,8000", replace="ok,8000")])
    caps = Caps(max_edits=10, max_lines=200, max_file_bytes=10_000_000)
    [change] = prepare(plan, boundary, caps)
    assert (change.added, change.removed) == (1, 1)
    diff = unified_diff([change])
    assert diff.count("@@ ") == 1 and "-2024-01-01,fail,8000" in diff and "+2024-01-01,ok,8000" in diff
    assert len(diff.splitlines()) == 4 + 3 + 2 + 3  # headers, context, the changed row, context


@pytest.mark.timeout(15)  # a hang guard only: counting every overlapping match took ~10 s on the old code
def test_a_long_search_matching_a_million_times_is_refused_after_the_second_match(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "big.txt").write_text("a" * 1_000_000)
    boundary = Boundary(ws, ws / ".autod", [])
    plan = Plan(summary="x", edits=[Edit(path="big.txt", search="a" * 2000, replace="b")])
    with pytest.raises(PlanRejected, match=r"occurs more than once in big\.txt"):
        prepare(plan, boundary, Caps(max_edits=10, max_lines=200, max_file_bytes=10_000_000))
