"""Tests pytest numbered by their place in a list whose order changes from process to process, matched
across runs by everything else their ids say.

pytest names a parameter it cannot print by its argument's name and its index in the parametrize list
(`test_format[4-1985-expected20-%Y]`: `expected` is a `date`). When that list is a set, its order
follows its elements' hashes, and some hashes change from one process to the next whatever
`PYTHONHASHSEED` says: `None`'s on Python 3.11 and every object's that hashes by identity, since each
process gets its addresses at random. isodate's `TEST_CASES` is such a set: runs of its suite number
2 to 30 tests differently, and the judge rolled back eight true fixes of eight (`bench_truefix.py
--corpus`) as "no longer runs 30 test(s)". Turning address randomization off (`setarch -R`) does
not survive bubblewrap as root (the flag is cleared at the exec after capabilities are dropped), so
the judge matches such tests instead:

- an id's `key` reads each parameter token made of a name and digits (`expected20`) as the name and
  `#` (`expected#`); nothing else of the id changes;
- a test of one run that the other run does not name is matched with the one test of the other run
  that has its key, when no other test of either run has that key: a one-to-one match, or none.

The later run's report is then read under the earlier run's ids (`align`), so every rule of the judge
(a failing test must now pass, a passing one may not fail, what a test ran must be what it ran
before) applies to a matched test as to any other. Reading an id is one pass over it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from autod.checks.pertest import PerTestReport

__all__ = ["align", "key", "known_as", "matched"]


def _token(tok: str) -> str:
    """`expected20` -> `expected#`; a token that is not a name followed by digits is kept."""
    stem = tok.rstrip("0123456789")
    if stem == tok or not stem or not (stem[0].isalpha() or stem[0] == "_"):
        return tok
    return stem + "#" if all(c.isalnum() or c == "_" for c in stem) and stem.isascii() else tok


def key(test_id: str) -> str:
    """The id with each name-and-digits parameter token's digits read as `#` (only inside the last
    `[...]` after the last `::`)."""
    cut = test_id.rfind("::")
    head, sep, params = test_id[cut + 1 :].partition("[")
    if not sep or not params.endswith("]"):
        return test_id
    masked = "-".join(_token(t) for t in params[:-1].split("-"))
    return f"{test_id[: cut + 1]}{head}[{masked}]"


def _unique(ids: Iterable[str]) -> dict[str, str]:
    """key -> id, for the keys exactly one of `ids` has (and that differ from the id: a numbered one)."""
    seen: dict[str, str | None] = {}
    for t in ids:
        k = key(t)
        if k != t:
            seen[k] = None if k in seen else t
    return {k: t for k, t in seen.items() if t is not None}


def matched(earlier: Iterable[str], later: Iterable[str]) -> dict[str, str]:
    """later id -> earlier id, for the tests the two runs name differently and are one by their key."""
    before, after = set(earlier), set(later)
    gone, new = before - after, after - before
    if not gone or not new:
        return {}
    # a key one side shares between two tests matches nothing: count it over each whole run
    first, second = _unique(before), _unique(after)
    out = {}
    for k, t in second.items():
        if t in new and (was := first.get(k)) is not None and was in gone:
            out[t] = was
    return out


def _renamed(values: Mapping[str, object], names: Mapping[str, str]) -> dict[str, object]:
    return {names.get(t, t): v for t, v in values.items()}


def align(was: PerTestReport, after: PerTestReport) -> PerTestReport:
    """`after` read under `was`'s ids where the two runs numbered the same tests differently."""
    names = matched(was.seen, after.seen)
    if not names:
        return after
    return dataclasses.replace(
        after,
        outcomes=_renamed(after.outcomes, names),
        collected=frozenset(names.get(t, t) for t in after.collected),
        ran=_renamed(after.ran, names),
    )


def known_as(ids: frozenset[str], known: Iterable[str]) -> frozenset[str]:
    """`ids` (from a failure's record, maybe of an earlier run) under the names `known` gives the same
    tests, where only their numbering differs."""
    names = matched(known, ids)
    return frozenset(names.get(t, t) for t in ids) if names else ids
