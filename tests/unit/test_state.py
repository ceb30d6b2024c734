"""The state db: cycles, interrupted cycles, proposals and their expiry, flags."""

from __future__ import annotations

import time

from autod.stores.state import State


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


def _proposal(s: State, pid: str, fp: str, *, mode: str = "auto-debug", check: str = "tests") -> None:
    import json

    s.cycle_started(f"cycle-{pid}", f"event-{pid}", mode, fp, "check_failed", "tests failed")
    s.cycle_finished(f"cycle-{pid}", "pending_approval", None, {})
    event = {"fingerprint": fp, "payload": {"check": check}}
    now = time.time()
    s.add_proposal({"id": pid, "cycle_id": f"cycle-{pid}", "mode": mode, "event": json.dumps(event),
                    "plan": "{}", "diff": "", "created_at": now, "expires_at": now + 100})


def _cycle_status(s: State, pid: str) -> str:
    return {r["id"]: r["status"] for r in s.history(50)}[f"cycle-{pid}"]


def test_a_newer_plan_for_the_same_failure_replaces_the_pending_proposal(tmp_path):
    s = State(tmp_path / "state.db")
    _proposal(s, "p1", "A")
    _proposal(s, "p2", "B")  # another failure keeps its own
    _proposal(s, "p3", "A")
    assert sorted(p["id"] for p in s.proposals("pending")) == ["p2", "p3"]
    assert s.proposal("p1")["status"] == "superseded" and "p3" in s.proposal("p1")["reason"]
    assert _cycle_status(s, "p1") == "superseded"  # history no longer says pending_approval
    s.close()


def test_proposals_are_withdrawn_when_their_failure_resolves_and_decisions_reach_history(tmp_path):
    s = State(tmp_path / "state.db")
    _proposal(s, "p1", "A")
    _proposal(s, "p2", "B", check="lint")
    _proposal(s, "p3", "C", check="lint")
    assert s.withdraw_proposals("check tests passed", check="tests") == ["p1"]
    assert s.withdraw_proposals("resolved", fingerprint="B") == ["p2"]
    assert _cycle_status(s, "p1") == "withdrawn" and _cycle_status(s, "p2") == "withdrawn"
    s.decide_proposal("p3", "rejected", "not our style")
    row = {r["id"]: r for r in s.history(50)}["cycle-p3"]
    assert row["status"] == "rejected" and "not our style" in row["reason"]
    s.close()


def test_quarantine_lifts_when_the_fingerprints_check_passes(tmp_path):
    s = State(tmp_path / "state.db")
    s.fingerprint_attempted("A", "tests failed", "rolled_back", None, "tests")
    s.quarantine("A")
    s.fingerprint_attempted("B", "lint failed", "rolled_back", None, "lint")
    s.quarantine("B")
    assert s.check_passed("tests") == ["A"]
    assert [q["fingerprint"] for q in s.quarantined()] == ["B"]
    assert s.fingerprint("A")["attempts"] == 0
    assert s.release_quarantine("B"[:1]) == ["B"] and s.quarantined() == []
    s.close()


def test_resolved_events_are_history_but_never_count_against_the_rate_limits(tmp_path):
    s = State(tmp_path / "state.db")
    s.event_resolved("e1", "A", "check_failed", "tests failed", "check tests passed")
    assert s.cycles_since(0) == 0 and s.last_cycle_started() is None and s.cycle_starts_since(0) == []
    (row,) = s.history(5)
    assert row["status"] == "resolved" and row["reason"] == "check tests passed"
    s.close()


def test_a_version_1_state_db_is_migrated_keeping_every_row(tmp_path):
    import sqlite3

    from autod.stores import state as st

    path = tmp_path / "state.db"
    db = sqlite3.connect(path)
    db.executescript(st._SCHEMA)  # what version 1 created
    db.execute("INSERT INTO cycles(id, event_id, mode, fingerprint, kind, summary, status, started_at)"
               " VALUES ('c1', 'e1', 'auto-debug', 'A', 'check_failed', 's', 'pending_approval', 1)")
    db.execute("INSERT INTO fingerprints(fingerprint, summary, attempts, quarantined_at, updated_at)"
               " VALUES ('A', 's', 3, 5, 5)")
    db.execute("INSERT INTO proposals(id, cycle_id, mode, event, plan, diff, created_at, expires_at, status,"
               " reason) VALUES ('p1', 'c1', 'auto-debug', '{\"fingerprint\": \"A\", \"payload\":"
               " {\"check\": \"tests\"}}', '{}', '', 1, 2, 'rejected', 'no')")
    db.execute("PRAGMA user_version=1")
    db.commit()
    db.close()
    s = State(path)
    assert s._tx("PRAGMA user_version").fetchone()[0] == st.SCHEMA_VERSION == 2
    p = s.proposal("p1")
    assert (p["fingerprint"], p["check_name"], p["status"]) == ("A", "tests", "rejected")
    (row,) = s.history(5)
    assert row["status"] == "rejected"  # v1 left it pending_approval after the decision
    assert s.quarantined()[0]["fingerprint"] == "A" and s.quarantined()[0]["check_name"] is None
    s.close()
    State(path).close()  # opening again migrates nothing twice


def _pending(s: State, pid: str, expires_in: float = 100) -> None:
    now = time.time()
    s.add_proposal({"id": pid, "cycle_id": "c", "mode": "auto-debug", "event": "{}", "plan": "{}",
                    "diff": "", "created_at": now, "expires_at": now + expires_in})


def test_of_concurrent_claims_on_one_proposal_exactly_one_wins_across_connections(tmp_path):
    import threading

    first = State(tmp_path / "state.db")
    _pending(first, "p1")
    others = [State(tmp_path / "state.db") for _ in range(5)]  # as separate processes would
    won: list[bool] = []
    go = threading.Barrier(6)

    def claim(s: State, status: str) -> None:
        go.wait()
        won.append(s.claim_proposal("p1", status, "by a test"))

    threads = [threading.Thread(target=claim, args=(s, "approved" if i % 2 else "rejected"))
               for i, s in enumerate([first, *others])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(won) == [False] * 5 + [True]
    row = first.proposal("p1")
    assert row is not None and row["status"] in ("approved", "rejected")
    for s in [first, *others]:
        s.close()


def test_an_expired_or_decided_proposal_cannot_be_claimed(tmp_path):
    s = State(tmp_path / "state.db")
    _pending(s, "old", expires_in=-1)
    _pending(s, "done")
    s.decide_proposal("done", "rejected", "no")
    assert not s.claim_proposal("old", "approved")
    assert not s.claim_proposal("done", "approved")
    assert s.proposal("done")["status"] == "rejected"  # type: ignore[index]
    s.close()


def test_a_cycle_record_is_stored_without_a_configured_secret_in_any_form(tmp_path):
    import base64

    from autod import logs

    key = "state-KEY-CANARY-31415926"
    logs.set_secrets([key])
    try:
        s = State(tmp_path / "state.db")
        s.cycle_started("c1", "e1", "auto-debug", "fp", "check_failed", "x")
        quoted = base64.b64encode(key.encode()).decode()
        s.cycle_finished("c1", "rolled_back", f"check said {key[::-1]}",
                         {"plan_summary": f"use {quoted}", "edits": [{"path": "a", "added": 1}]})
        s.close()
    finally:
        logs.set_secrets([])
    raw = (tmp_path / "state.db").read_bytes() + b"".join(
        p.read_bytes() for p in tmp_path.glob("state.db-*")
    )
    for form in (key, key[::-1], quoted):
        assert form.encode() not in raw
    s = State(tmp_path / "state.db")
    (row,) = s.history(1)
    assert row["edits"] == [{"path": "a", "added": 1}] and "***" in row["reason"]
    s.close()
