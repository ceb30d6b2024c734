"""The index's memory is bounded by what its summaries hold, not by the source's bytes or file count.

Ordinary code summarises to about twice its size, but many one-line definitions to 15-35 times: a
host probe estimated ~4 GB held for 64 MB of such source, within the index's source cap and past the
service's MemoryMax. `modules.weight` estimates a summary's bytes; an index stops at its summary budget
and the cache kept across cycles at its own."""

from __future__ import annotations

import ast
import random
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from autod.localize import index
from autod.localize.modules import parse_module, weight
from autod.safety.boundary import Boundary

STDLIB = Path(ast.__file__).parent


def _constants(rng: random.Random) -> str:
    return "".join(f"A{k} = B{rng.randrange(99)}.c{k}\n" for k in range(rng.randrange(500, 1500)))


def _one_liners(rng: random.Random) -> str:
    return "".join(f"def g{k}(): a{k % 7}()\n" for k in range(rng.randrange(500, 1500)))


def _callers(rng: random.Random) -> str:
    calls = rng.randrange(5, 40)
    return "".join(f"def f{k}(x):\n" + "".join(f"    x.m{i}.n{k}(y{i})\n" for i in range(calls))
                   for k in range(rng.randrange(40, 120)))


def _nested_classes(rng: random.Random) -> str:
    out = []
    for d in range(rng.randrange(10, 60)):
        out += ["    " * d + f"class C{d}(B{d}, m.M):", "    " * (d + 1) + "x = " + " + ".join(
            f"a.b{i}" for i in range(rng.randrange(1, 40)))]
    return "\n".join(out) + "\n"


def _imports(rng: random.Random) -> str:
    return "".join(f"from pkg{k}.sub import name{k} as n{k}\nimport mod{k}\n"
                   for k in range(rng.randrange(200, 800)))


def _locals(rng: random.Random) -> str:
    return "".join(f"def h{k}():\n    x = Foo{k}()\n    y = mod.f\n    return x.run(y) & x\n"
                   for k in range(rng.randrange(100, 500)))


SHAPES: dict[str, Callable[[random.Random], str]] = {
    f.__name__[1:]: f for f in (_constants, _one_liners, _callers, _nested_classes, _imports, _locals)
}
REAL = ["argparse.py", "typing.py", "json/decoder.py", "inspect.py", "email/_header_value_parser.py",
        "asyncio/base_events.py", "tarfile.py"]


def _deep_size(root: object) -> int:
    """The bytes of `root`'s object graph (each object once): what the summary keeps alive, without the
    allocator's noise (tracemalloc also counted the interpreter's intern table growing mid-parse)."""
    seen: set[int] = set()
    total, stack = 0, [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        if isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, tuple | list | set | frozenset):
            stack.extend(obj)
        elif hasattr(obj, "__dict__"):
            stack.append(vars(obj))
    return total


def _held(text: str) -> tuple[int, int]:
    """(what the parsed summary holds, its estimate)."""
    mod = parse_module("pkg/m.py", text, ("pkg.m", "m"))
    return _deep_size(mod), weight(mod)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_estimate_is_within_a_factor_of_two_of_what_a_generated_module_holds(shape: str, seed: int):
    held, estimate = _held(SHAPES[shape](random.Random(seed)))
    assert held / 2 <= estimate <= held * 2, (shape, held, estimate)


@pytest.mark.slow
@pytest.mark.parametrize("name", REAL)
def test_the_estimate_is_within_a_factor_of_two_of_what_real_code_holds(name: str):
    held, estimate = _held((STDLIB / name).read_text(encoding="utf-8"))
    assert held / 2 <= estimate <= held * 2, (name, held, estimate)


def _workspace(root: Path, files: int) -> Path:
    """`files` modules of 1,000 one-line functions each (~22 kB of source, ~0.7 MB of summary)."""
    root.mkdir(parents=True)
    for i in range(files):
        (root / f"m{i:02d}.py").write_text("".join(f"def g{i}_{k}(): a{k % 7}()\n" for k in range(1000)))
    return root


def test_an_index_stops_at_its_summary_budget_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setattr(index, "_cache", type(index._cache)())
    ws = _workspace(tmp_path / "ws", 12)
    boundary = Boundary(ws, tmp_path / "state", [])
    whole = index.build_index(boundary)
    assert whole.complete and len(whole.modules) == 12
    weights = [weight(whole.modules[f"m{i:02d}.py"]) for i in range(12)]
    source = sum((ws / f"m{i:02d}.py").stat().st_size for i in range(12))
    assert sum(weights) > 10 * source  # the shape the budget is for
    budget = sum(weights[:5]) + weights[5] // 2
    cut = index.build_index(boundary, max_summary=budget)
    assert not cut.complete and "summaries past" in cut.why_incomplete
    assert sorted(cut.modules) == [f"m{i:02d}.py" for i in range(5)]
    assert sum(weight(m) for m in cut.modules.values()) <= budget
    # the files a failure names come first, and are what a cut index keeps
    first = index.build_index(boundary, first=["m11.py", "m10.py"], max_summary=weights[11] + weights[10])
    assert sorted(first.modules) == ["m10.py", "m11.py"]


def test_the_cache_keeps_within_its_bytes_dropping_the_least_recently_used(tmp_path, monkeypatch):
    monkeypatch.setattr(index, "_cache", type(index._cache)())
    monkeypatch.setattr(index, "_cache_bytes", 0)
    ws = _workspace(tmp_path / "ws", 10)
    boundary = Boundary(ws, tmp_path / "state", [])
    one = weight(index.build_index(boundary, first=["m00.py"], max_files=1).modules["m00.py"])
    monkeypatch.setattr(index, "_cache", type(index._cache)())
    monkeypatch.setattr(index, "_cache_bytes", 0)
    monkeypatch.setattr(index, "CACHE_BYTES", int(one * 2.5))  # below what one index may hold ...
    cap = int(one * 3.5)  # ... so the cache keeps as much as that, and no more
    built = index.build_index(boundary, max_summary=cap)
    assert sorted(built.modules) == ["m00.py", "m01.py", "m02.py"] and not built.complete
    kept = [rel for _, rel in index._cache]
    assert kept == ["m01.py", "m02.py", "m03.py"]  # the fourth, read and over the cap, pushed out the first
    assert index._cache_bytes == sum(v[3] for v in index._cache.values()) <= cap
    index.build_index(boundary, first=["m09.py"], max_files=1, max_summary=cap)
    assert [rel for _, rel in index._cache] == ["m02.py", "m03.py", "m09.py"]
    # a changed file replaces its entry: counted once
    (ws / "m09.py").write_text("def only(): pass\n")
    index.build_index(boundary, first=["m09.py"], max_files=1, max_summary=cap)
    assert index._cache_bytes == sum(v[3] for v in index._cache.values()) <= cap
    assert "only" in index._cache[(str(ws), "m09.py")][2].defs
