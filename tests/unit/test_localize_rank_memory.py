"""Memory ranks suspects: a definition a past fix of a similar failure changed moves up, bounded."""

from __future__ import annotations

from pathlib import Path

from autod.localize.index import build_index
from autod.localize.rank import MEMORY_FLOOR, rank
from autod.memory import Recalled, Tier
from autod.memory.recall import fixed_definitions
from autod.safety.boundary import Boundary

LIB = ("def first(x):\n    return x + 1\n\n\ndef second(x):\n    return x * 2\n\n\n"
       "def third(x):\n    return x\n")


def order(tmp_path: Path, **kw: object) -> list[str]:
    (tmp_path / "lib.py").write_text(LIB)
    index = build_index(Boundary(tmp_path, tmp_path / ".autod", []))
    spectrum = {("lib.py", "first"): 1.0, ("lib.py", "second"): 1.0}  # both run by the failing test alone
    changed = kw.pop("changed", {})
    pieces = rank(index, changed=changed, sites=[], tests=[], spectrum=spectrum, **kw)  # type: ignore[arg-type]
    return [str(p.symbol) for p in pieces]


def test_a_definition_a_past_fix_changed_moves_ahead_of_its_equal_and_a_stale_memory_adds_nothing(tmp_path):
    assert order(tmp_path)[:2] == ["first", "second"]
    assert order(tmp_path, remembered={("lib.py", "second"): 1.0})[:2] == ["second", "first"]
    # a definition no evidence names (not run by the failing tests) is not added by memory alone
    assert "third" not in order(tmp_path, remembered={("lib.py", "third"): 1.0})


def test_memory_never_moves_a_definition_ahead_of_what_changed_since_green(tmp_path):
    (tmp_path / "lib.py").write_text(LIB)
    got = order(tmp_path, changed={"lib.py": [(10, 10)]}, remembered={("lib.py", "second"): 1.0})
    assert got[:2] == ["third", "second"]
    index = build_index(Boundary(tmp_path, tmp_path / ".autod", []))
    pieces = rank(index, changed={}, sites=[], tests=[], spectrum={("lib.py", "second"): 1.0},
                  remembered={("lib.py", "second"): 5.0})
    assert pieces[0].key >= MEMORY_FLOOR and "past fix" in pieces[0].why


def test_the_definitions_past_fixes_changed_come_from_recalled_fixes_only():
    record = '{"definitions": [{"path": "lib.py", "symbol": "second", "old": "a", "new": "b"}]}'
    items = [Recalled("e1", Tier.N1, "x", 0.7, {"status": "fixed", "replay": record}),
             Recalled("e2", Tier.N1, "x", 0.9, {"status": "rolled_back", "replay": record}),
             Recalled("e3", Tier.N2, "x", 0.8, {"status": "fixed", "replay": "{broken"})]
    assert fixed_definitions(items) == {("lib.py", "second"): 0.7}
