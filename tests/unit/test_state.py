"""The state db: cycles, interrupted cycles, proposals and their expiry, flags."""

from __future__ import annotations

import time

from autod.state import State


def test_interrupted_cycles_are_marked_failed_at_start(tmp_path):
    s = State(tmp_path / "state.db")
    s.cycle_started("c1", "e1", "auto-debug", "fp", "check_failed", "x")
    s.cycle_started("c2", "e1", "auto-doc", "fp", "check_failed", "x")
    s.cycle_finished("c2", "fixed", None, {"edits": [{"path": "a", "added": 1, "removed": 0}]})
    s.close()
    s = State(tmp_path / "state.db")
    assert s.cycles_interrupted() == ["c1"]
    # the interrupted cycle did not handle e1: its mode runs again after the restart
    assert s.modes_done("e1") == {"auto-doc"}
    rows = {r["id"]: r for r in s.history(10)}
    assert rows["c1"]["status"] == "failed" and "interrupted" in rows["c1"]["reason"]
    assert rows["c2"]["edits"] == [{"path": "a", "added": 1, "removed": 0}]
    s.close()


def test_an_event_cut_short_three_times_counts_as_done_so_a_crash_cannot_loop(tmp_path):
    s = State(tmp_path / "state.db")
    for n in range(3):
        s.cycle_started(f"c{n}", "e1", "auto-debug", "fp", "check_failed", "x")
        assert s.cycles_interrupted() == [f"c{n}"]
        assert s.modes_done("e1") == (set() if n < 2 else {"auto-debug"})
    s.close()


def test_proposals_expire_and_resolve_by_unique_prefix(tmp_path):
    s = State(tmp_path / "state.db")
    now = time.time()
    for pid, exp in (("abc123", now + 100), ("abd999", now - 1)):
        s.add_proposal(
            {
                "id": pid,
                "cycle_id": "c",
                "mode": "auto-debug",
                "event": "{}",
                "plan": "{}",
                "diff": "",
                "created_at": now,
                "expires_at": exp,
            }
        )
    assert s.proposal("ab") is None  # ambiguous
    assert s.proposal("abc")["id"] == "abc123"
    assert s.expire_proposals(now) == ["abd999"]
    assert [p["id"] for p in s.proposals("pending")] == ["abc123"]
    s.close()


def test_flags_and_counters_persist(tmp_path):
    s = State(tmp_path / "state.db")
    s.set_kv("paused", True)
    assert s.add("edits:2026-01-01", 3) == 3 and s.add("edits:2026-01-01", 2) == 5
    s.close()
    s = State(tmp_path / "state.db")
    assert s.get_kv("paused") is True and s.get("edits:2026-01-01") == 5 and s.get("nope") == 0
    s.close()
