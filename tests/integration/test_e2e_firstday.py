"""A new operator's first day through the real CLI and `autod run`: typos are errors, a bad file on disk
does not lock the operator out, `run --once` with nothing to run says so, and Ctrl-C exits as documented."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from daemon import FIX_PLAN, PYTHON, Autod, base_config, git, run_cli, write_config

pytestmark = pytest.mark.slow


def config_file(tmp_path: Path, repo: Path, *, checks: dict[str, Any] | None = None, **more: Any) -> Path:
    cfg = base_config(repo, **more)
    if checks is not None:
        cfg["checks"] = checks
    cfg["state_dir"] = str(tmp_path / "state")
    return write_config(tmp_path / "autod.yaml", cfg)


@pytest.mark.parametrize(
    ("variable", "says"),
    [
        ("AUTOD_LIMTS__MAX_CYCLES_PER_HOUR",
         "environment variable AUTOD_LIMTS__MAX_CYCLES_PER_HOUR: limts: unknown section"
         " (did you mean AUTOD_LIMITS__"),
        ("AUTOD_LIMITS_MAX_CYCLES_PER_HOUR",
         "environment variable AUTOD_LIMITS_MAX_CYCLES_PER_HOUR: sets nothing (a section and its key are"
         " joined by two underscores: AUTOD_LIMITS__MAX_CYCLES_PER_HOUR)"),
    ],
)
def test_a_misspelt_environment_override_is_an_error_naming_the_variable(tmp_path, calc_repo, variable, says):
    config = config_file(tmp_path, calc_repo)
    for cmd in (("config", "check"), ("run", "--once")):
        out = run_cli(*cmd, "-c", str(config), env={variable: "3"})
        assert out.returncode == 78, out.stderr
        assert says in out.stderr, out.stderr
    # an AUTOD_ name that is no override at all (a test knob, the instance name) is not refused
    out = run_cli("config", "check", "-c", str(config), env={"AUTOD_SOAK_FULL": "1", "AUTOD_INSTANCE": "x"})
    assert out.returncode == 0, out.stderr


def test_a_key_given_twice_and_an_indentation_slip_name_the_file_and_line_in_plain_words(tmp_path, calc_repo):
    config = config_file(tmp_path, calc_repo)
    good = config.read_text()
    config.write_text(good.replace("  min_interval_s: 0\n", "  min_interval_s: 0\n  min_interval_s: 5\n"))
    line = config.read_text().splitlines().index("  min_interval_s: 5") + 1
    out = run_cli("config", "check", "-c", str(config))
    assert out.returncode == 78
    said = f"{config}:{line}: limits.min_interval_s: given twice (first on line {line - 1})"
    assert said in out.stderr, out.stderr

    config.write_text(good.replace("  min_interval_s: 0\n", "  min_interval_s: 0\n max_retries: 1\n"))
    out = run_cli("config", "check", "-c", str(config))
    assert out.returncode == 78
    assert f"{config}:{line}: YAML syntax error: the indentation does not line up" in out.stderr, out.stderr
    assert "<block" not in out.stderr  # not PyYAML's parser states


def test_a_valid_config_check_is_a_short_summary_and_rules_lists_the_globs(tmp_path, calc_repo):
    config = config_file(tmp_path, calc_repo)
    out = run_cli("config", "check", "-c", str(config))
    assert out.returncode == 0, out.stderr
    assert f"{config}: ok (workspace {calc_repo}" in out.stdout
    assert len(out.stdout.splitlines()) <= 4 and "**/conftest.py" not in out.stdout, out.stdout
    out = run_cli("config", "check", "--rules", "-c", str(config))
    assert out.returncode == 0 and "judges (auto-debug" in out.stdout and "**/conftest.py" in out.stdout


def test_run_once_without_a_config_says_it_has_no_checks_to_run(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    out = run_cli("run", "--once", cwd=empty, env={"AUTOD_CONFIG": ""})
    assert out.returncode == 2, out.stderr
    assert "no config file found; the defaults have no checks: nothing would be run or verified" in out.stderr
    assert not (empty / ".autod").exists()  # it did not start a daemon that does nothing


def test_a_refused_reload_leaves_status_and_pause_working_with_a_warning(tmp_path, calc_repo):
    config = config_file(tmp_path, calc_repo)
    d = Autod(config, log_file=tmp_path / "state" / "logs" / "autod.jsonl").start()
    try:
        d.wait_for(lambda recs: [r for r in recs if r.get("event") == "daemon.started"], 60, "start")
        good = config.read_text()
        config.write_text(good.replace("  min_interval_s: 0\n", "  min_interval_s: 0\n max_retries: 1\n"))
        d.signal(signal.SIGHUP)
        d.wait_for(lambda recs: [r for r in recs if r.get("event") == "config.reload_refused"], 30, "refused")

        out = run_cli("status", "--json", "-c", str(config))
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout).get("running") is not False, out.stdout  # the daemon answered
        assert "warning: the config file on disk is invalid" in out.stderr, out.stderr
        assert "YAML syntax error" in out.stderr
        out = run_cli("pause", "-c", str(config))
        assert out.returncode == 0 and out.stdout.strip() == "paused", out.stdout + out.stderr
        assert json.loads(run_cli("status", "--json", "-c", str(config)).stdout)["paused"] is True
        assert run_cli("resume", "-c", str(config)).returncode == 0
        # the file mended: the next reload takes it
        config.write_text(good.replace("  min_interval_s: 0\n", "  min_interval_s: 1\n"))
        d.signal(signal.SIGHUP)
        d.wait_for(lambda recs: [r for r in recs if r.get("event") == "config.reloaded"], 30, "reloaded")
        assert "warning" not in run_cli("status", "-c", str(config)).stderr
        # Ctrl-C stops `autod run` as SIGTERM does: the cycle in flight is rolled back, exit 0
        d.signal(signal.SIGINT)
        assert d.stop() == 0
    finally:
        d.kill()


# The value check: fails while src/mod.py says "bad"; the first time it sees the fix it fails too
# (an environment that was not ready), from then on the fix passes. The fixer writes "ok".
VALUE_CHECK = """
import pathlib, sys
if "bad" in pathlib.Path("src/mod.py").read_text():
    print("src/mod.py:1: VALUE is bad")
    sys.exit(1)
seen = pathlib.Path(sys.argv[1])
runs = int(seen.read_text()) + 1 if seen.exists() else 1
seen.write_text(str(runs))
if runs == 1:
    print("the environment is not ready yet")
    sys.exit(1)
"""
VALUE_FIX = "import pathlib; p = pathlib.Path('src/mod.py'); p.write_text(p.read_text().replace('bad', 'ok'))"


def test_a_fixer_change_rolled_back_once_is_tried_again_by_the_next_cycle_and_kept(tmp_path, calc_repo):
    (calc_repo / "src" / "mod.py").write_text("VALUE = 'bad'\n")
    git(calc_repo, "add", "-A")
    git(calc_repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "mod")
    (tmp_path / "check_value.py").write_text(VALUE_CHECK)
    checks = {
        "value": {"run": f"{PYTHON} {tmp_path / 'check_value.py'} {tmp_path / 'runs'}", "when": ["start"],
                  "sandbox": "off"},
        "value-fix": {"run": f'{PYTHON} -c "{VALUE_FIX}"', "fixer": True, "sandbox": "off"},
    }
    config = config_file(
        tmp_path, calc_repo, checks=checks,
        modes={"auto-debug": {"enabled": True, "max_attempts_per_cycle": 1}},
        limits={"min_interval_s": 0, "retry_base_s": 1, "retry_max_s": 2},
    )
    d = Autod(config, log_file=tmp_path / "state" / "logs" / "autod.jsonl").start()
    try:
        first, second = d.wait_reflections(2, timeout=120)[:2]
        assert first["status"] == "rolled_back", first
        assert second["status"] == "fixed" and [e["path"] for e in second["edits"]] == ["src/mod.py"], second
        assert (calc_repo / "src" / "mod.py").read_text() == "VALUE = 'ok'\n"
        assert not any("nothing useful" in json.dumps(r) for r in d.records())
    finally:
        assert d.stop() == 0


def fresh_clone(dest: Path) -> Path:
    """A clone of this checkout's HEAD with the working tree's autod/, tests/ and config/ laid over it
    (`python -m autod...` run there imports the clone's autod, as a user's would)."""
    root = Path(__file__).resolve().parents[2]
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(root), str(dest)], check=True, timeout=120)
    for part in ("autod", "tests", "config"):
        shutil.copytree(root / part, dest / part, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    return dest


def test_a_busy_llm_server_is_said_to_be_busy_not_unreachable(tmp_path, calc_repo, scripted_llm):
    scripted_llm.behave(single_slot=True)
    config = config_file(tmp_path, calc_repo, checks={},
                         llm={"base_url": scripted_llm.base_url, "probe_timeout_s": 1})
    scripted_llm._slot.acquire()  # a completion for someone else holds the server's one slot
    try:
        out = run_cli("config", "check", "-c", str(config))
        assert out.returncode == 0, out.stderr
        assert "is busy (connected, but no answer within 1s)" in out.stderr, out.stderr
        assert "does not answer" not in out.stderr
        d = Autod(config, log_file=tmp_path / "state" / "logs" / "autod.jsonl").start()
        try:
            d.wait_for(lambda recs: [r for r in recs if r.get("event") == "llm.busy"], 60, "llm.busy")
            assert not [r for r in d.records() if r.get("event") == "llm.unreachable"]
        finally:
            assert d.stop() == 0
    finally:
        scripted_llm._slot.release()


def test_the_same_fix_from_a_manual_trigger_goes_to_the_one_branch_already_open(
    tmp_path, calc_repo, scripted_llm, real_bwrap
):
    # the right diff in the wrong words, then the same diff again
    scripted_llm.push_plan({**FIX_PLAN, "summary": "tidy the multiplication helper"})
    scripted_llm.push_plan(FIX_PLAN)
    config = config_file(
        tmp_path, calc_repo, llm={"base_url": scripted_llm.base_url},
        modes={"auto-debug": {"enabled": True, "delivery": "branch"}, "auto-plan": {"enabled": False}},
        delivery={"max_open": 5},
    )
    d = Autod(config, log_file=tmp_path / "state" / "logs" / "autod.jsonl").start()
    try:
        (first,) = d.wait_reflections(1)
        assert first["status"] == "fixed" and first["delivery"]["outcome"] == "delivered", first
        # the commit says what the diff did; the model's prose is kept, marked as its own words
        assert first["fix"] == "rewrites add() in src/calc.py; makes tests/test_calc.py::test_add pass"
        message = git(calc_repo, "log", "-1", "--format=%B", first["delivery"]["branch"])
        assert message.startswith("autod(auto-debug): rewrites add() in src/calc.py; makes"), message
        assert "its own words, not checked against the diff):\n    tidy the multiplication helper" in message
        out = run_cli("trigger", "auto-debug", "--message", "add must add, not subtract", "-c", str(config))
        assert out.returncode == 0, out.stderr
        second = d.wait_reflections(2)[1]
        assert second["status"] == "fixed", second
        assert second["delivery"]["branch"] == first["delivery"]["branch"], second["delivery"]
        assert second["delivery"]["commit"] == first["delivery"]["commit"]
        branches = git(calc_repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/autod/").split()
        assert branches == [first["delivery"]["branch"]], branches
        status = json.loads(run_cli("status", "--json", "-c", str(config)).stdout)
        assert status["delivery"]["open"] == 1, status["delivery"]
    finally:
        assert d.stop() == 0


def test_an_undone_fix_is_not_made_again_without_the_operators_yes(tmp_path, calc_repo, scripted_llm):
    scripted_llm.push_plan(FIX_PLAN)
    scripted_llm.push_plan(FIX_PLAN)  # the same fix, offered again by a later cycle
    config = config_file(tmp_path, calc_repo, llm={"base_url": scripted_llm.base_url})
    calc = calc_repo / "src" / "calc.py"
    d = Autod(config, log_file=tmp_path / "state" / "logs" / "autod.jsonl").start()
    try:
        (first,) = d.wait_reflections(1)
        assert first["status"] == "fixed" and "a + b" in calc.read_text(), first
        out = run_cli("undo", first["cycle_id"], "--reason", "not this way", "-c", str(config))
        assert out.returncode == 0, out.stderr
        assert "a - b" in calc.read_text()
        out = run_cli("trigger", "auto-debug", "--message", "add is wrong", "-c", str(config))
        assert out.returncode == 0, out.stderr
        later = d.wait_for(
            lambda recs: [r for r in recs if r.get("phase") == "reflect"
                          and r.get("status") in ("pending_approval", "fixed")][1:],
            90, "the next cycle",
        )[0]
        assert later["status"] == "pending_approval", later
        assert "re-applies the change taken back by `autod undo`" in later["reason"], later["reason"]
        assert first["cycle_id"] in later["reason"]
        assert "a - b" in calc.read_text()  # not written again
        proposals = json.loads(run_cli("proposals", "--json", "-c", str(config)).stdout)
        assert len(proposals) == 1, proposals
    finally:
        assert d.stop() == 0


def test_quarantine_clear_runs_the_still_failing_check_so_the_failure_is_worked_on_again(tmp_path, calc_repo):
    cfg = base_config(calc_repo, limits={"min_interval_s": 0, "max_attempts_per_fingerprint": 1})
    # a fixer that fixes nothing: each cycle is an attempt that changed nothing
    cfg["checks"]["noop-fix"] = {"run": f'{PYTHON} -c "pass"', "fixer": True}
    config = config_file(tmp_path, calc_repo, checks=cfg["checks"], limits=cfg["limits"])
    d = Autod(config, log_file=tmp_path / "state" / "logs" / "autod.jsonl").start()
    try:
        (first,) = d.wait_reflections(1)
        quarantined = d.wait_for(
            lambda _: json.loads(run_cli("quarantine", "--json", "-c", str(config)).stdout), 30, "quarantine"
        )
        assert [q["check_name"] for q in quarantined] == ["tests"], quarantined
        out = run_cli("quarantine", "clear", "--all", "-c", str(config))
        assert out.returncode == 0 and "running tests now" in out.stdout, out.stdout + out.stderr
        second = d.wait_reflections(2, timeout=90)[1]  # no save, no trigger: the clear alone
        assert second["cycle_id"] != first["cycle_id"] and second["summary"] == first["summary"], second
    finally:
        assert d.stop() == 0


def test_a_daemon_with_no_checks_says_at_start_that_nothing_will_be_checked(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    cfg = {"workspace": str(empty), "state_dir": str(tmp_path / "state")}
    log = tmp_path / "state" / "logs" / "autod.jsonl"
    d = Autod(write_config(tmp_path / "autod.yaml", cfg), log_file=log).start()
    try:
        said = d.wait_for(lambda recs: [r for r in recs if r.get("event") == "daemon.no_checks"], 60, "it")
        assert said[0]["level"] == "warning" and "no failure will come" in said[0]["detail"], said
    finally:
        assert d.stop() == 0


def newcomer_env(**more: str) -> dict[str, str]:
    """`. .venv/bin/activate` as the README does (the checks' python, pytest and ruff are found there),
    and no AUTOD_ variable of the test runner's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOD_")}
    env["PATH"] = f"{Path(PYTHON).parent}{os.pathsep}{env.get('PATH', '')}"
    return {**env, **more}


def test_run_in_an_empty_directory_writes_a_demo_and_fixes_its_lint_failure(tmp_path):
    if Path("/etc/autod/autod.yaml").exists():
        pytest.skip("/etc/autod/autod.yaml is installed here: autod run finds it, as it should")
    demo = tmp_path / "demo"
    demo.mkdir()
    log = demo / ".autod" / "logs" / "autod.jsonl"
    d = Autod(None, cwd=demo, log_file=log, env=newcomer_env(), stderr_dir=tmp_path).start()
    try:
        ready = d.wait_ready()
        assert ready["checks"] == {"tests": "passed", "lint": "failed"}, ready
        assert "lint queued for auto-debug" in ready["said"], ready
        (fixed,) = d.wait_reflections(1)
        assert fixed["status"] == "fixed", fixed
        assert [e["path"] for e in fixed["edits"]] == ["inventory.py"]
        said = d.wait_for(lambda recs: [r for r in recs if r.get("event") == "cycle.outcome"], 30, "outcome")
        assert said[0]["outcome"] == "fixed" and said[0]["said"].startswith("fixed: check lint failed"), said
        assert "import os" not in (demo / "inventory.py").read_text()
        assert "-import os" in git(demo, "diff")  # the demo was committed: the fix is the diff
    finally:
        assert d.stop() == 0
    told = d.stderr()
    for name in ("autod.yaml", "inventory.py", "test_inventory.py"):
        assert f"  {name} " in told, told[:2000]
    # the next `autod run` there finds ./autod.yaml and writes nothing
    out = run_cli("config", "check", cwd=demo, env=newcomer_env())
    assert out.returncode == 0 and out.stdout.startswith("autod.yaml: ok"), out.stdout + out.stderr


def test_run_in_an_empty_directory_without_the_demos_tools_writes_nothing_and_says_what_is_missing(tmp_path):
    if Path("/etc/autod/autod.yaml").exists():
        pytest.skip("/etc/autod/autod.yaml is installed here: autod run finds it, as it should")
    empty = tmp_path / "empty"
    empty.mkdir()
    bare = tmp_path / "bin"  # a PATH with git, but neither ruff nor a python that has pytest
    bare.mkdir()
    (bare / "git").symlink_to(shutil.which("git") or "/usr/bin/git")
    out = run_cli("run", cwd=empty, env={**newcomer_env(), "PATH": str(bare)})
    assert out.returncode == 2, out.stderr
    assert "would write a demo project here, but its checks need python, ruff" in out.stderr, out.stderr
    assert list(empty.iterdir()) == []


def test_the_readme_run_on_autods_own_checkout_passes_its_checks_then_fixes_a_lint_failure(tmp_path):
    clone = fresh_clone(tmp_path / "autod")
    # the shipped config as it is, its unit tests narrowed to one that reads the shipped config (the
    # sandbox hides the file from it: it read it once and failed, and every cycle with it): its fast unit
    # tests take ~12 s a run on two cores, and a fix runs them three times (bench/bench_firstday.py
    # times the whole of it on a fresh clone)
    tests = "tests/unit/test_config.py::test_the_example_config_is_valid"
    env = newcomer_env(AUTOD_CHECKS__TESTS__RUN=f"python -m pytest -q -n 0 -p no:cacheprovider {tests}")
    log = clone / ".autod" / "logs" / "autod.jsonl"
    d = Autod(None, cwd=clone, log_file=log, env=env, stderr_dir=tmp_path).start()
    try:
        ready = d.wait_ready(timeout=300)
        assert list(ready["checks"].items()) == [("lint", "passed"), ("tests", "passed")], ready
        assert "nothing to fix" in ready["said"], ready
        # a save that breaks lint: autod's own fixer check mends it, and the tests still pass
        tally = clone / "autod" / "tally.py"
        unused = tally.read_text().replace("import contextlib\n", "import contextlib\nimport json\n", 1)
        tally.write_text(unused)
        (fixed,) = d.wait_reflections(1, timeout=300)
        assert fixed["status"] == "fixed", fixed
        assert [c["name"] for c in fixed["checks"]] == ["lint", "tests"], fixed["checks"]
        assert "import json" not in tally.read_text()
        assert not json.loads(run_cli("quarantine", "--json", cwd=clone, env=env).stdout)
    finally:
        assert d.stop() == 0
