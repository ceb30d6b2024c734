"""Reading autod's per-test recorder back: sealed, merged, capped, and never blocked by what a test left.

Records are written here as the recorder writes them (its own JSON and HMAC, autod.checks.judge_plugin)
with keys taken from a real key pipe (autod.checks.seal), so the tests hold for what pytest sessions
actually leave."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import random
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from autod.checks import judge_plugin as plugin
from autod.checks import pertest, seal
from autod.checks.pertest import JudgeDirs, load, loads_into

os.environ.pop("_AUTOD_JUDGE_FIRST", None)  # what importing the recorder here set, for this process


@pytest.fixture
def dirs() -> Iterator[JudgeDirs]:
    made = pertest.make_dirs()
    try:
        yield made
    finally:
        pertest.remove_dirs(made)


def take(dirs: JudgeDirs) -> bytes:
    """A key from the pipe, as the recorder takes one."""
    fd = os.open(dirs.keys.path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        data = os.read(fd, seal.RECORD)
    finally:
        os.close(fd)
    return bytes.fromhex(data[:-1].decode())


def doc(tests: dict[str, str], collected: list[str] | None = None, errors: list[str] | None = None,
        **fields: object) -> dict:
    return {"tests": tests, "collected": collected if collected is not None else sorted(tests),
            "collect_errors": errors or [], "deselected": [], "exitstatus": 0, "complete": True,
            "worker": False, "session": True, "pid": 1, "first": True, **fields}


def record(dirs: JudgeDirs, body: dict, key: bytes | None = None) -> Path:
    """A session's record, sealed as the recorder seals it."""
    key = key if key is not None else take(dirs)
    text = plugin._json(body)
    fp = seal.fingerprint(key)
    path = dirs.out / f"results-{fp}.json"
    path.write_text(plugin._json({"seal": fp, "mac": plugin._mac(key, text.encode("ascii")), "body": text}))
    return path


def test_no_record_is_no_report(dirs):
    assert load(dirs) is None


def test_every_pytest_process_is_heard_and_the_worst_outcome_wins(dirs):
    record(dirs, doc({"t::a": "passed", "t::b": "failed"}, pid=11))
    record(dirs, doc({"t::a": "skipped", "t::c": "passed"}, errors=["x.py"], pid=12))
    r = load(dirs)
    assert r is not None
    assert dict(r.outcomes) == {"t::a": "skipped", "t::b": "failed", "t::c": "passed"}
    assert r.collected == {"t::a", "t::b", "t::c"} and r.collect_errors == ("x.py",)
    assert r.failing == {"t::b"} and r.passed == {"t::c"}


def test_any_byte_changed_in_a_sealed_record_makes_the_run_a_failed_run(dirs):
    path = record(dirs, doc({"t::a": "skipped", "t::b": "passed"}))
    good = path.read_bytes()
    assert load(dirs) is not None
    rng = random.Random(4)
    for i in [*rng.sample(range(len(good)), 60), good.index(b"skipped")]:
        for new in {rng.randrange(32, 127), ord("x")} - {good[i]}:
            path.write_bytes(good[:i] + bytes([new]) + good[i + 1:])
            assert load(dirs) is None, (i, chr(new), good[max(0, i - 20):i + 20])
    path.write_bytes(good)
    assert load(dirs) is not None


def test_a_record_sealed_with_a_key_autod_did_not_issue_is_a_failed_run(dirs):
    record(dirs, doc({"t::a": "skipped"}))
    record(dirs, doc({"t::a": "passed"}), key=os.urandom(32))
    assert load(dirs) is None


def test_a_key_taken_without_a_record_is_a_failed_run_and_keys_left_in_the_pipe_are_not(dirs):
    record(dirs, doc({"t::a": "passed"}))
    take(dirs)  # a session that took a key and wrote nothing (killed, `os._exit`, its record deleted)
    assert load(dirs) is None  # (the 62 keys still in the pipe, sessions that never started, are fine:
    # every other test here leaves them)


def test_the_pipe_replaced_or_removed_is_a_failed_run(dirs):
    record(dirs, doc({"t::a": "passed"}))
    kept = dirs.out / "kept"
    os.rename(dirs.keys.path, kept)
    dirs.keys.path.write_text(("ab" * 32 + "\n") * 64)  # a file of keys someone knows
    assert load(dirs) is None
    os.remove(dirs.keys.path)
    os.mkfifo(dirs.keys.path)  # a pipe of someone else's
    assert load(dirs) is None
    os.remove(dirs.keys.path)
    assert load(dirs) is None
    os.rename(kept, dirs.keys.path)
    assert load(dirs) is not None


def test_the_pipe_is_private_and_autods_ends_of_it_reach_no_check():
    made = pertest.make_dirs()
    try:
        assert made.keys.path.stat().st_mode & 0o777 == 0o600
        for fd in (made.keys.read_fd, made.keys.write_fd):
            assert not os.get_inheritable(fd)
            assert os.get_blocking(fd) is False  # reading back what is left never waits
    finally:
        pertest.remove_dirs(made)


def test_a_file_of_a_records_name_that_is_not_one_is_a_failed_run_not_a_wait(dirs):
    record(dirs, doc({"t::a": "failed"}))
    named = dirs.out / f"results-{'0' * 16}.json"
    fields = {"seal": "0" * 16, "mac": "00", "body": "{}"}
    shapes = {"junk": "not json", "unsealed": json.dumps(doc({"t::a": "passed"})), "a list": "[1]",
              **{f"a {f} not a string": json.dumps({**fields, f: [1]}) for f in fields}}
    for plant in ("fifo", "symlink", *shapes):
        if plant == "fifo":
            os.mkfifo(named)
        elif plant == "symlink":
            named.symlink_to(dirs.out.parent / "elsewhere.json")
        else:
            named.write_text(shapes[plant])
        assert load(dirs) is None, plant  # returns: a blocking open of the FIFO would hang here
        named.unlink()
    assert load(dirs) is not None


def test_results_over_the_cap_are_not_read(dirs, monkeypatch):
    monkeypatch.setattr(pertest, "MAX_RESULTS_BYTES", 200)
    record(dirs, doc({f"t::{i}": "passed" for i in range(50)}))
    assert load(dirs) is None


def test_a_process_is_heard_through_its_first_recorder_alone(dirs):
    record(dirs, doc({"t::a": "failed"}, pid=5))
    record(dirs, doc({"inner::x": "failed", "t::a": "passed"}, pid=5, first=False))  # pytester, or a copy
    record(dirs, doc({}, pid=6, worker=True))  # an xdist worker: accounted, says nothing
    record(dirs, doc({}, pid=7, session=False))  # `pytest --version`
    r = load(dirs)
    assert r is not None and dict(r.outcomes) == {"t::a": "failed"}


def test_two_records_that_say_they_are_a_process_s_first_are_a_failed_run(dirs):
    record(dirs, doc({"t::a": "failed"}, pid=5))
    record(dirs, doc({"t::a": "passed"}, pid=5))  # one of them lies: a copy that cleared the marker
    assert load(dirs) is None


def test_the_recorders_own_json_reads_back_as_what_it_wrote():
    rng = random.Random(8)
    alphabet = ['"', "\\", "\n", "\t", "\x00", "\x1f", "\x7f", "é", "\u2028", "\ud800", "\U0001f600", "a",
                " ", "/", "[", "::"]

    def value(depth: int) -> object:
        kind = rng.choice(["str", "int", "bool", "none"] + (["list", "dict"] if depth < 3 else []))
        if kind == "str":
            return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        if kind == "int":
            return rng.randint(-(2**40), 2**40)
        if kind == "bool":
            return rng.random() < 0.5
        if kind == "none":
            return None
        if kind == "list":
            return [value(depth + 1) for _ in range(rng.randint(0, 4))]
        return {str(value(3)): value(depth + 1) for _ in range(rng.randint(0, 4))}

    for _ in range(2000):
        v = value(0)
        text = plugin._json(v)
        assert text.isascii() and json.loads(text) == v, (v, text)
    for _ in range(200):
        key, msg = os.urandom(32), os.urandom(rng.randint(0, 300))
        assert plugin._mac(key, msg) == hmac.new(key, msg, hashlib.sha256).hexdigest()


@pytest.mark.parametrize(("argv", "loads"), [
    (["python", "-m", "pytest"], True),
    (["python3", "-X", "dev", "-m", "pytest"], True),
    (["python", "-Wdefault::ImportWarning", "-m", "pytest"], True),
    (["python", "-I", "-m", "pytest"], False),
    (["python3.11", "-E", "-m", "pytest"], False),
    (["python", "-bS", "x.py"], False),
    (["python", "-mIPython"], True),
    (["pytest", "-I"], True),
    (["python", "tools/check.py", "-I"], True),
    (["python", "--check-hash-based-pycs", "always", "-I"], True),
    (["python3", "-u"], True),
    (["make", "test"], True),
])
def test_a_python_started_isolated_loads_no_guard(argv, loads):
    assert loads_into(argv) is loads


def test_each_key_is_delivered_once_and_the_pipe_never_blocks_a_taker(dirs):
    keys = [take(dirs) for _ in range(seal.KEYS)]
    assert len(set(keys)) == seal.KEYS and {seal.fingerprint(k) for k in keys} == set(dirs.keys.issued)
    with pytest.raises(BlockingIOError):  # empty: the recorder gets no key, and does not wait for one
        take(dirs)


def test_a_pytest_whose_recorder_finds_no_key_cannot_exit_as_passed(dirs, tmp_path):
    """Something took every key before pytest loaded the recorder (a plugin of the project's own that
    pytest loads first): no record can speak for that session, so it ends with exit status 3, not 0."""
    import subprocess
    import sys

    (tmp_path / "test_ok.py").write_text("def test_ok():\n    assert True\n")
    env = {**os.environ, **dirs.env(tmp_path, {})}
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "test_ok.py"]
    run = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr  # a key taken: sealed, and pytest's own status
    assert len(list(dirs.out.glob("results-*.json"))) == 1
    while True:  # the pipe emptied by someone else
        try:
            take(dirs)
        except BlockingIOError:
            break
    again = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 3 and "no key" in again.stderr, again.stdout + again.stderr


def test_runner_changes_are_heard_from_every_process_s_first_recorder_workers_too(dirs):
    """A change to the runner counts wherever the tests ran: under xdist, a worker."""
    record(dirs, doc({"t::a": "passed"}, pid=5, runner=["_pytest.config.Config.rootdir"]))
    record(dirs, doc({}, pid=6, worker=True, runner=["_pytest.reports.TestReport.__init__"],
                     runner_foreign=["_pytest.reports.TestReport.__init__"]))
    record(dirs, doc({}, pid=5, first=False, runner=["inner.only"]))  # pytester's: not this process's
    record(dirs, doc({}, pid=7, runner="not a list", runner_foreign=[3, "x.y"]))
    r = load(dirs)
    assert r is not None
    assert r.runner == {"_pytest.config.Config.rootdir", "_pytest.reports.TestReport.__init__"}
    assert r.foreign == {"_pytest.reports.TestReport.__init__", "x.y"}


def test_the_recorder_names_every_runner_part_changed_and_nothing_else(monkeypatch):
    """Generated changes to the runner's namespaces (a function or class replaced, added or removed, a
    function's code swapped) are each named, by label; data, and the same object put back, are not; a
    new value from the workspace is foreign, pytest's own is not."""
    import _pytest.runner

    spaces, codes = plugin._runner_parts()

    def fresh() -> None:  # the recorder as if loaded now, knowing this file as the workspace's
        monkeypatch.setattr(plugin, "_state", {**plugin._state, "runner": set(), "foreign": set()})
        monkeypatch.setattr(plugin, "_SPACES", spaces)
        monkeypatch.setattr(plugin, "_CODES", codes)
        monkeypatch.setattr(plugin, "_WS", os.path.join(os.path.dirname(__file__), ""))

    fresh()
    plugin._runner_changed()
    assert plugin._state["runner"] == set()

    def here(*args, **kwargs):  # a function of this file: the workspace's, as far as the recorder knows
        return None

    rng = random.Random(3)
    targets = [(ns, prefix, key) for ns, copy, _ids, prefix in spaces if prefix.startswith("_pytest.")
               for key, v in copy.items() if plugin._judged(v) and key not in ("__dict__", "__weakref__")]
    for ns, prefix, key in rng.sample(targets, 40):
        holder = sys.modules.get(prefix) or _holder(prefix)
        how = rng.choice(["replace", "remove", "same"])
        if how == "replace":
            monkeypatch.setattr(holder, key, here)
        elif how == "remove":
            monkeypatch.delattr(holder, key)
        else:
            monkeypatch.setattr(holder, key, ns[key])
        plugin._runner_changed()
        label = f"{prefix}.{key}"
        aliases = {f"{other}.{key}" for *_rest, other in spaces if _holds(other, holder)}
        want = set() if how == "same" else aliases
        assert plugin._state["runner"] == want, (how, label)
        assert plugin._state["foreign"] == want, (how, label)
        monkeypatch.undo()
        fresh()
    # added: a new function in a runner module; data: not a part; code swapped in place
    monkeypatch.setattr(_pytest.runner, "isinstance", here, raising=False)
    monkeypatch.setattr(_pytest.runner, "_some_data", 3, raising=False)
    monkeypatch.setattr(_pytest.runner.check_interactive_exception, "__code__", here.__code__)
    plugin._runner_changed()
    assert plugin._state["runner"] == {"_pytest.runner.isinstance",
                                       "_pytest.runner.check_interactive_exception.__code__"}
    assert plugin._state["foreign"] == plugin._state["runner"]
    monkeypatch.undo()
    fresh()
    # pytest's own code put in: a change, not a foreign one
    monkeypatch.setattr(_pytest.runner, "show_test_item", _pytest.runner.check_interactive_exception)
    plugin._runner_changed()
    assert plugin._state["runner"] == {"_pytest.runner.show_test_item"} and not plugin._state["foreign"]


def _holds(prefix: str, holder: object) -> bool:
    """Whether a namespace's label names `holder` (a class is named by each of its module's names)."""
    try:
        return (sys.modules.get(prefix) or _holder(prefix)) is holder
    except (KeyError, AttributeError):
        return False


def _holder(prefix: str) -> object:
    """The class a class namespace's label names (`module.Class`)."""
    module, _, name = prefix.rpartition(".")
    return getattr(sys.modules[module], name)


def test_a_record_names_its_runner_changes_up_to_a_cap_and_counts_the_rest():
    few = {f"_pytest.m.f{i}" for i in range(5)}
    assert plugin._named(few) == sorted(few)
    many = {f"_pytest.m.f{i:03d}" for i in range(plugin._MAX_NAMED + 7)}
    named = plugin._named(many)
    assert named[:-1] == sorted(many)[:plugin._MAX_NAMED] and named[-1].startswith("7 more parts")
    assert plugin._named(many | {"_pytest.zzz"})[-1].startswith("8 more parts")  # one more: it shows


def test_a_report_pytest_did_not_make_is_a_foreign_change_and_its_test_is_not_heard(monkeypatch):
    from _pytest.reports import TestReport

    monkeypatch.setattr(plugin, "_state", {**plugin._state, "phases": {}, "runner": set(), "foreign": set()})

    class Sneaky(str):
        def __eq__(self, other):
            return True

        __hash__ = str.__hash__

    real = TestReport("t::a", ("t.py", 1, "a"), {}, "failed", None, "call")
    plugin.pytest_runtest_logreport(real)
    assert plugin._tests() == {"t::a": "failed"} and not plugin._state["runner"]
    forged = TestReport("t::b", ("t.py", 2, "b"), {}, "failed", None, "call")
    forged.outcome = Sneaky("failed")  # says "passed" to any comparison
    plugin.pytest_runtest_logreport(forged)
    assert "t::b" not in plugin._state["phases"]
    [label] = plugin._state["runner"]
    assert plugin._state["foreign"] == {label} and label.startswith("a test report's outcome of type")

    class Other(TestReport):
        pass

    plugin.pytest_runtest_logreport(Other("t::c", ("t.py", 3, "c"), {}, "passed", None, "call"))
    assert any(x.startswith("a test report of type") and x.endswith("Other")
               for x in plugin._state["foreign"])


PHASE_OUTCOMES = {"setup": ("passed", "skipped", "xfailed", "failed"), "call": ("passed", "xpassed", "failed",
                  "skipped", "xfailed"), "teardown": ("passed", "failed")}


def test_a_test_is_heard_passing_only_when_its_protocol_ran_to_its_end(monkeypatch):
    """Generated: every sequence of phase reports a test can leave (each phase reported or not, with
    each outcome it can have). Passed (or any outcome short of a failure) is recorded only when the
    test's call, or a skip in its setup, and its teardown were reported; a failure in any phase is
    recorded whatever came after it; a test ended in the middle (its call never reported) is not heard."""
    from _pytest.reports import TestReport

    rng = random.Random(11)
    seqs = []
    for setup in (None, *PHASE_OUTCOMES["setup"]):
        for call in (None, *PHASE_OUTCOMES["call"]):
            for teardown in (None, *PHASE_OUTCOMES["teardown"]):
                seqs.append({"setup": setup, "call": call, "teardown": teardown})
    rng.shuffle(seqs)
    for i, seq in enumerate(seqs):
        fresh = {"phases": {}, "runner": set(), "foreign": set()}
        monkeypatch.setattr(plugin, "_state", {**plugin._state, **fresh})
        nodeid = f"t::case{i}"
        for when, said in seq.items():
            if said is None:
                continue
            outcome = {"xpassed": "passed", "xfailed": "skipped"}.get(said, said)
            report = TestReport(nodeid, ("t.py", i, "c"), {}, outcome, None, when)
            if said in ("xpassed", "xfailed"):
                report.wasxfail = "known"
            plugin.pytest_runtest_logreport(report)
        got = plugin._tests().get(nodeid)
        said = [plugin._outcome(TestReport(nodeid, ("t.py", i, "c"), {}, "failed", None, w)) if o == "failed"
                else o for w, o in seq.items() if o is not None]
        failed = any(o in ("failed", "error") for o in said)
        began = seq["call"] is not None or seq["setup"] in ("skipped", "xfailed")
        ended = seq["teardown"] is not None and began
        if failed or ended:
            assert got == max(said, key=plugin._RANK.__getitem__), (seq, got)
        else:
            assert got is None, (seq, got)
        if got == "passed":
            assert seq["call"] == "passed" and seq["teardown"] == "passed", seq


def test_a_call_the_recorder_saw_raise_is_never_passed_whatever_its_report_says(monkeypatch):
    """What the recorder saw around a test's call (did it raise?) outranks the report made of it after:
    a call report that says passed for a call that raised is recorded failed and named as a foreign
    change of the runner; one that did not raise, or a report of another phase, is taken as it says."""
    from _pytest.reports import TestReport

    for raised in (True, False, None):
        for outcome, wasxfail in (("passed", False), ("passed", True), ("failed", False), ("skipped", True)):
            fresh = {"phases": {}, "runner": set(), "foreign": set(), "raised": {}}
            monkeypatch.setattr(plugin, "_state", {**plugin._state, **fresh})
            if raised is not None:
                plugin._state["raised"]["t::a"] = raised
            for when in ("setup", "call", "teardown"):
                said = outcome if when == "call" else "passed"
                report = TestReport("t::a", ("t.py", 1, "a"), {}, said, None, when)
                if wasxfail and when == "call":
                    report.wasxfail = "known"
                plugin.pytest_runtest_logreport(report)
            got = plugin._tests()["t::a"]
            taken = plugin._outcome(TestReport("t::a", ("t.py", 1, "a"), {}, outcome, None, "call"))
            if wasxfail:
                taken = {"passed": "xpassed", "skipped": "xfailed"}[outcome]
            if raised and taken in ("passed", "xpassed"):
                named = plugin._state["foreign"]
                assert got == "failed" and any("though its call raised" in x for x in named)
            else:
                assert got == taken and not plugin._state["foreign"], (raised, outcome, wasxfail, got)


def test_a_record_sealed_with_values_of_any_type_is_a_failed_run_or_read_past_never_an_error(dirs):
    """A key the code under test took seals whatever it writes: a process id or an outcome that is a
    list, a dict or a number is never hashed as if it were autod's."""
    for pid in ([1], {"a": 1}, None, "7", 1.5):
        made = pertest.make_dirs()
        try:
            record(made, doc({"t::a": "failed"}, pid=pid))
            assert load(made) is None, pid
        finally:
            pertest.remove_dirs(made)
    record(dirs, doc({"t::a": ["passed"], "t::b": {"x": 1}, "t::c": 5, "t::d": "passed"}))
    r = load(dirs)
    assert r is not None and dict(r.outcomes) == {"t::d": "passed"}
