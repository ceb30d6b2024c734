"""What a recorder tells autod as it hears it (autod.checks.heard): read whole while the check runs,
judged by the recorder's own rule, worsened only by its record, and more than autod reads is a failed
run."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import random
import sys
from collections.abc import Iterator

import pytest
from test_pertest import PHASE_OUTCOMES, doc, record

from autod.checks import heard, pertest
from autod.checks import judge_plugin as plugin
from autod.checks.pertest import JudgeDirs, load
from autod.checks.process import run_session

FP = "0123456789abcdef"
RANK = plugin._RANK


def msg(*fields: str) -> bytes:
    return json.dumps(list(fields)).encode()


@pytest.fixture
def dirs() -> Iterator[JudgeDirs]:
    made = pertest.make_dirs()
    try:
        yield made
    finally:
        pertest.remove_dirs(made)


def test_autod_judges_what_was_told_by_the_recorders_own_rule(monkeypatch):
    """Generated: every sequence of phase reports a test can leave, with its call seen raising or not.
    What autod makes of the messages the recorder sent is what the recorder itself records."""
    from _pytest.reports import TestReport

    told: list[bytes] = []
    monkeypatch.setattr(plugin, "_tell", lambda *fields: told.append(json.dumps(list(fields)).encode()))
    monkeypatch.setattr(plugin, "_FP", FP)
    phases = [(None, *PHASE_OUTCOMES[w]) for w in ("setup", "call", "teardown")]
    seqs = [dict(zip(("setup", "call", "teardown"), c, strict=True)) for c in itertools.product(*phases)]
    random.Random(5).shuffle(seqs)
    monkeypatch.setattr(plugin, "_state", {**plugin._state, "phases": {}, "runner": set(), "foreign": set(),
                                           "raised": {}})
    told.append(msg("hello", FP))
    for i, (seq, raised) in enumerate(itertools.product(seqs, (False, True))):
        nodeid = f"t::case{i}"
        if raised:
            plugin._state["raised"][nodeid] = True
            told.append(msg("raised", FP, nodeid))
        for when, said in seq.items():
            if said is None:
                continue
            report = TestReport(nodeid, ("t.py", i, "c"), {}, {"xpassed": "passed", "xfailed": "skipped"}
                                .get(said, said), None, when)
            if said in ("xpassed", "xfailed"):
                report.wasxfail = "known"
            plugin.pytest_runtest_logreport(report)
    got = heard.outcomes(told)
    assert got.sessions == {FP}
    assert got.tests[FP] == plugin._tests()
    assert len(got.tests[FP]) > 100 and "passed" in got.tests[FP].values()


def test_the_record_only_worsens_what_was_told():
    told = {"t::a": "failed", "t::b": "passed", "t::c": "skipped"}
    record = {"t::a": "passed", "t::b": "error", "t::c": "passed", "t::d": "passed", "t::e": "failed"}
    assert heard.judged(record, told) == {"t::a": "failed", "t::b": "error", "t::c": "skipped",
                                          "t::e": "failed"}
    # told to its end but never heard ending by its record: only a failure counts
    assert heard.judged({}, {"t::a": "passed", "t::b": "error"}) == {"t::b": "error"}


def test_a_message_anyone_forges_only_ever_worsens_a_session():
    """Generated: a session's true messages, then forged ones (any kind, any outcome, any test, other
    sessions, garbage) mixed in anywhere. Judged with the session's honest record, no test is better
    for them, and none that was not heard appears as anything but a failure."""
    rng = random.Random(9)
    outcomes = list(RANK)
    for _ in range(300):
        true = [msg("hello", FP)]
        for i in range(rng.randint(1, 5)):
            for when in ("setup", "call", "teardown"):
                if rng.random() < 0.9:
                    true.append(msg("phase", FP, f"t::{i}", when, rng.choice(outcomes)))
        forged = [rng.choice([
            msg("phase", rng.choice([FP, "f" * 16]), f"t::{rng.randint(0, 7)}",
                rng.choice(["setup", "call", "teardown"]), rng.choice(outcomes)),
            msg("raised", FP, f"t::{rng.randint(0, 7)}"),
            msg("hello", "e" * 16), b"\x00garbage", b"[" * 5000, msg("phase", FP), b""])
            for _ in range(rng.randint(1, 6))]
        mixed = true + forged
        rng.shuffle(mixed)
        honest = heard.outcomes(true).tests[FP]  # what the recorder records (the test above)
        before = heard.judged(honest, honest)
        after = heard.judged(honest, heard.outcomes(mixed).tests[FP])
        for nodeid, outcome in before.items():
            assert RANK[after[nodeid]] >= RANK[outcome], (nodeid, before, after)
        for nodeid, outcome in after.items():
            assert nodeid in before or outcome in ("failed", "error"), (nodeid, before, after)


def test_more_than_autod_reads_is_an_overflow_and_nothing_of_it_is_kept(monkeypatch):
    monkeypatch.setattr(heard, "MAX_BYTES", 1000)
    channel = heard.open_channel()
    try:
        os.write(channel.theirs.fileno(), b"x" * (heard.MAX_MESSAGE + 1))
        channel.drain()
        assert channel.overflowed and channel.messages == []
        fresh = heard.open_channel()
        for _ in range(30):
            os.write(fresh.theirs.fileno(), msg("phase", FP, "t::a" * 10, "call", "failed"))
        fresh.drain()
        assert fresh.overflowed and fresh.messages == []
        fresh.close()
    finally:
        channel.close()


def test_the_channel_is_read_while_the_check_runs_so_a_recorder_never_waits():
    """A real process writes far more than a socket holds; each message arrives whole and in order."""
    count = 20_000
    code = ("import json, os, sys\nfd = int(os.environ['_AUTOD_JUDGE_HEARD'].split(':')[0])\n"
            f"for i in range({count}):\n"
            "    os.write(fd, json.dumps(['phase', 'f' * 16, 't::%d' % i, 'call', 'passed']).encode())\n")

    async def main() -> heard.Channel:
        channel = heard.open_channel()
        env = {**os.environ, **channel.env()}
        async with heard.listening(channel):
            fin = await run_session([sys.executable, "-c", code], cwd=pertest.Path.cwd(), env=env,
                                    timeout_s=60, output_limit=1 << 16, pass_fds=channel.pass_fds())
        assert fin.exit_code == 0, fin.output
        return channel

    channel = asyncio.run(main())
    try:
        assert not channel.overflowed and len(channel.messages) == count
        assert [json.loads(m)[2] for m in channel.messages] == [f"t::{i}" for i in range(count)]
    finally:
        channel.close()


def test_a_session_with_a_channel_is_judged_by_what_it_told(dirs):
    """Its record says passed for a test it told failed, and for one it never told: neither passes.
    A session without a channel (no hello) is judged by its record, as before."""
    key = pertest_key(dirs)
    told_fp = record(dirs, doc({"t::a": "passed", "t::b": "passed", "t::c": "passed"}, pid=1), key)
    fp = told_fp.name[len("results-"):-len(".json")]
    for m in (msg("hello", fp), msg("phase", fp, "t::a", "setup", "passed"),
              msg("phase", fp, "t::a", "call", "failed"), msg("phase", fp, "t::a", "teardown", "passed"),
              *(msg("phase", fp, "t::c", w, "passed") for w in ("setup", "call", "teardown"))):
        os.write(dirs.channel.theirs.fileno(), m)
    record(dirs, doc({"t::x": "passed"}, pid=2))
    dirs.channel.drain()
    r = load(dirs)
    assert r is not None
    assert dict(r.outcomes) == {"t::a": "failed", "t::c": "passed", "t::x": "passed"}


def test_an_overflowed_channel_is_a_failed_run(dirs, monkeypatch):
    record(dirs, doc({"t::a": "passed"}))
    monkeypatch.setattr(heard, "MAX_BYTES", 10)
    os.write(dirs.channel.theirs.fileno(), msg("hello", FP))
    dirs.channel.drain()
    assert dirs.channel.overflowed and load(dirs) is None


def pertest_key(dirs: JudgeDirs) -> bytes:
    from test_pertest import take

    return take(dirs)


def test_a_message_is_read_whole_up_to_its_cap_and_a_drain_takes_what_it_is_asked(monkeypatch):
    monkeypatch.setattr(heard, "MAX_BYTES", heard.MAX_MESSAGE * 2)
    channel = heard.open_channel()
    try:
        for size in (heard.MAX_MESSAGE, heard.MAX_MESSAGE - 1, 2):
            os.write(channel.theirs.fileno(), b"y" * size)
        channel.drain(2)
        assert [len(m) for m in channel.messages] == [heard.MAX_MESSAGE, heard.MAX_MESSAGE - 1]
        channel.drain(0)
        assert len(channel.messages) == 2
        channel.drain(1)  # the total now just past MAX_BYTES: nothing kept, nothing more read
        assert channel.overflowed and channel.messages == []
        os.write(channel.theirs.fileno(), b"z")
        channel.drain()
        assert channel.ours.recv(10) == b"z"
    finally:
        channel.close()


def test_a_total_of_exactly_the_cap_is_kept(monkeypatch):
    monkeypatch.setattr(heard, "MAX_BYTES", 3 * heard.MIN_COUNTED + 100)
    channel = heard.open_channel()
    try:
        for size in (heard.MIN_COUNTED + 100, heard.MIN_COUNTED, 1):
            os.write(channel.theirs.fileno(), b"x" * size)
        channel.drain()
        assert not channel.overflowed and channel.size == 3 * heard.MIN_COUNTED + 100
    finally:
        channel.close()


def test_a_flood_of_tiny_messages_is_held_to_the_cap_by_their_count(monkeypatch):
    """Each message costs autod a parse and an object whatever its size: 3 million 1-byte messages
    took a check from 1 s to 79 s and autod to 218 MB. A message counts at least MIN_COUNTED bytes."""
    monkeypatch.setattr(heard, "MAX_BYTES", 100 * heard.MIN_COUNTED)
    channel = heard.open_channel()
    try:
        for _ in range(100):
            os.write(channel.theirs.fileno(), b"x")
        channel.drain()
        assert not channel.overflowed and len(channel.messages) == 100
        os.write(channel.theirs.fileno(), b"x")
        channel.drain()
        assert channel.overflowed and channel.messages == []
    finally:
        channel.close()


def test_a_malformed_message_is_passed_over_and_what_follows_it_still_counts():
    bad = [b"\xff\xfe", b"{}", b"[]", json.dumps(["phase", FP, ["t::a"], "call", "failed"]).encode(),
           json.dumps(["phase", FP, "t::a", "call", 4]).encode(), json.dumps(["hello", 7]).encode()]
    good = [msg("hello", FP), msg("phase", FP, "t::a", "call", "failed")]
    for messages in (bad + good, good[:1] + bad + good[1:]):
        got = heard.outcomes(messages)
        assert got.sessions == {FP} and got.tests == {FP: {"t::a": "failed"}}


def test_runner_changes_told_count_whatever_the_record_says_and_a_flood_of_them_is_foreign(monkeypatch):
    hook = "pytest_pyfunc_call runs _yes (src/calc.py:3)"
    told = [msg("hello", FP), msg("runner", FP, "_pytest.runner.call_and_report", ""),
            msg("runner", FP, hook, "foreign"),
            msg("runner", "f" * 16, "elsewhere", "foreign")]
    got = heard.outcomes(told)
    assert got.runner == {FP: {"_pytest.runner.call_and_report", hook}} and got.foreign == {FP: {hook}}
    monkeypatch.setattr(heard, "MAX_LABELS", 3)
    flood = [msg("hello", FP), *(msg("runner", FP, f"x{i}", "") for i in range(5))]
    got = heard.outcomes(flood)
    assert got.foreign[FP] == {heard.OVERFLOW} and len(got.runner[FP]) == 4


def test_a_sessions_told_runner_changes_reach_the_report_though_its_record_names_none(dirs):
    key = pertest_key(dirs)
    path = record(dirs, doc({"t::a": "passed"}, runner=[], runner_foreign=[]), key)
    fp = path.name[len("results-"):-len(".json")]
    phases = (msg("phase", fp, "t::a", w, "passed") for w in ("setup", "call", "teardown"))
    hook = "pytest_pyfunc_call runs _yes (src/calc.py:3)"
    for m in (msg("hello", fp), *phases, msg("runner", fp, hook, "foreign")):
        os.write(dirs.channel.theirs.fileno(), m)
    dirs.channel.drain()
    r = load(dirs)
    assert r is not None and r.outcomes == {"t::a": "passed"}
    assert r.runner == r.foreign == {hook}


def test_what_each_test_ran_is_heard_from_what_was_told_and_what_was_recorded(dirs):
    key = pertest_key(dirs)
    said = {"t::a": "r1", "t::b": ["x"], "t::c": "r3"}  # a value not a digest is passed over
    path = record(dirs, doc({"t::a": "passed", "t::b": "passed"}, ran=said), key)
    fp = path.name[len("results-"):-len(".json")]
    phases = [msg("phase", fp, t, w, "passed") for t in ("t::a", "t::b")
              for w in ("setup", "call", "teardown")]
    for m in (msg("hello", fp), *phases, msg("ran", fp, "t::a", "r2"), msg("ran", fp, "t::b", "r4"),
              msg("ran", "f" * 16, "t::a", "elsewhere")):
        os.write(dirs.channel.theirs.fileno(), m)
    dirs.channel.drain()
    r = load(dirs)
    assert r is not None
    assert dict(r.ran) == {"t::a": {"r1", "r2"}, "t::b": {"r4"}, "t::c": {"r3"}}
