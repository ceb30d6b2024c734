"""pytest plugin for bench_reallib's seeder: how many calls from a failing test to the mutated code.

Loaded with `-p reallib_depth` (this directory on PYTHONPATH) when the seeder re-runs a mutant's
failing tests. While each test's call phase runs, `sys.setprofile` records the call graph (caller
code -> callee code); afterwards a breadth-first search from the test function gives the distance
to the target: the mutated function (1 = the test calls it itself), or, for a constant, one more
than the nearest function that reads it. A target reached only outside the test function's own
calls (a fixture) is searched from every code object of the test files instead, and says so.

Environment: REALLIB_DEPTH_TARGET (JSON: file, start, end, name, kind), REALLIB_DEPTH_OUT (a JSON
lines file this appends one line per test to).
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import sys
from collections import deque
from typing import Any

import pytest

Key = tuple[str, int, str]
INLINE = frozenset({"<genexpr>", "<listcomp>", "<dictcomp>", "<setcomp>"})


def _key(code: Any) -> Key:
    return (code.co_filename, code.co_firstlineno, code.co_name)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: Any) -> Any:
    target = json.loads(os.environ["REALLIB_DEPTH_TARGET"])
    edges: dict[Key, set[Key]] = {}
    codes: dict[Key, Any] = {}

    def profile(frame: Any, event: str, _arg: Any) -> None:
        if event != "call" or frame.f_back is None:
            return
        caller, callee = frame.f_back.f_code, frame.f_code
        kc = _key(callee)
        codes.setdefault(kc, callee)
        edges.setdefault(_key(caller), set()).add(kc)

    sys.setprofile(profile)
    try:
        yield
    finally:
        sys.setprofile(None)
    fn = getattr(item, "obj", None)
    fn = getattr(fn, "__func__", fn)
    with contextlib.suppress(Exception):  # a wrapper that cannot be unwrapped: the wrapper is the test
        fn = inspect.unwrap(fn)
    code = getattr(fn, "__code__", None)
    starts = [_key(code)] if code is not None else []
    row = _search(starts, edges, codes, target)
    how = "test"
    if row is None:  # reached only from a fixture or a helper pytest called: any test-file code
        test_dir = os.path.realpath(os.environ.get("REALLIB_DEPTH_TESTS", "")) or "\0"
        starts = [k for k in {*edges, *codes} if os.path.realpath(k[0]).startswith(test_dir)]
        row, how = _search(starts, edges, codes, target), "test files"
    out = {"test": item.nodeid, "depth": None, "via": None, "chain": []}
    if row is not None:
        out.update(depth=row[0], via=how, chain=row[1])
    with open(os.environ["REALLIB_DEPTH_OUT"], "a", encoding="utf-8") as f:
        f.write(json.dumps(out) + "\n")


def _is_target(k: Key, code: Any, target: dict[str, Any]) -> bool:
    if os.path.realpath(k[0]) != target["file"]:
        return False
    if target["kind"] == "function":
        return k[2] == target["name"] and target["start"] <= k[1] <= target["end"]
    return target["name"] in getattr(code, "co_names", ())  # a reader of the constant


def _search(
    starts: list[Key], edges: dict[Key, set[Key]], codes: dict[Key, Any], target: dict[str, Any]
) -> tuple[int, list[str]] | None:
    """(distance, chain of qualnames) from the nearest start to the target, breadth first."""
    seen: dict[Key, Key | None] = {s: None for s in starts}
    dist = {s: 0 for s in starts}
    queue = deque(starts)
    while queue:
        k = queue.popleft()
        if k not in starts and k in codes and _is_target(k, codes[k], target):
            chain: list[str] = []
            at: Key | None = k
            while at is not None:
                chain.append(getattr(codes.get(at), "co_qualname", at[2]))
                at = seen[at]
            extra = 1 if target["kind"] == "constant" else 0
            return dist[k] + extra, [*reversed(chain), *([target["name"]] if extra else [])]
        for nxt in edges.get(k, ()):
            step = 0 if nxt[2] in INLINE else 1  # a comprehension runs inside its function: no hop
            if nxt not in dist or dist[k] + step < dist[nxt]:
                seen[nxt], dist[nxt] = k, dist[k] + step
                queue.appendleft(nxt) if step == 0 else queue.append(nxt)
    return None
