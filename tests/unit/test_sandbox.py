"""The sandbox policy as data: bwrap's command line, the check environment's allow-list, the
`checks.sandbox` config key, and what `status` / `config check` say when bwrap is missing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from autod.checks import sandbox
from autod.checks.sandbox import Policy, bwrap_argv, check_env
from autod.config.settings import ConfigError, load_config


def argv_for(ws: Path, policy: Policy | None = None, **kw) -> list[str]:
    env = {"PATH": "/usr/bin", "HOME": "/tmp/home"}
    return bwrap_argv("/usr/bin/bwrap", ["pytest", "-q"], workspace=ws, env=env,
                      policy=policy or Policy(state_dir=ws / ".autod"), **kw)


def index_of(argv: list[str], *seq: str) -> int:
    for i in range(len(argv) - len(seq) + 1):
        if argv[i : i + len(seq)] == list(seq):
            return i
    raise AssertionError(f"{seq} not in {argv}")


def test_the_command_line_holds_every_wall(tmp_path):
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    (ws / ".autod").mkdir()
    argv = argv_for(ws)
    for flag in ("--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
                 "--unshare-net", "--die-with-parent", "--new-session", "--clearenv"):
        assert flag in argv
    assert index_of(argv, "--ro-bind", "/", "/") < index_of(argv, "--tmpfs", "/tmp")
    assert "--dev" in argv and "--proc" in argv
    ws_bind = index_of(argv, "--bind", str(ws), str(ws))
    # after the private /tmp (the workspace lives in it here), .git read-only and the state dir
    # hidden after the workspace is bound, or they would be writable/visible again
    assert index_of(argv, "--tmpfs", "/tmp") < ws_bind
    assert ws_bind < index_of(argv, "--ro-bind", str(ws / ".git"), str(ws / ".git"))
    assert ws_bind < index_of(argv, "--tmpfs", str(ws / ".autod"))
    assert index_of(argv, "--chdir", str(ws)) < argv.index("--")
    assert argv[-3:] == ["--", "pytest", "-q"]
    for hidden in ("/root", "/home", "/run"):
        if os.path.isdir(hidden) and not os.path.islink(hidden):
            i = index_of(argv, "--tmpfs", hidden)
            assert i < index_of(argv, "--remount-ro", hidden)


def test_network_is_cut_unless_the_check_opts_in(tmp_path):
    assert "--unshare-net" in argv_for(tmp_path)
    assert "--unshare-net" not in argv_for(tmp_path, network=True)


def test_root_keeps_no_capability_in_the_sandbox(tmp_path):
    assert ("--cap-drop" in argv_for(tmp_path)) == (os.geteuid() == 0)


def test_a_workspace_below_a_hidden_dir_is_bound_back_and_the_dir_stays_read_only():
    # argv only, nothing runs: /usr/share stands in for /home, /usr/share/doc for a repo in it
    hidden, ws = Path("/usr/share"), Path("/usr/share/doc")
    argv = bwrap_argv("/usr/bin/bwrap", ["true"], workspace=ws, env={},
                      policy=Policy(state_dir=ws / ".autod", hidden=(hidden,)))
    tmpfs = index_of(argv, "--tmpfs", str(hidden))
    bind = index_of(argv, "--bind", str(ws), str(ws))
    assert tmpfs < bind < index_of(argv, "--remount-ro", str(hidden))


def test_hidden_files_and_dirs_outside_tmp_become_empty(tmp_path, monkeypatch):
    key = Path("/etc/hostname")  # any file outside /tmp stands in for api_key_file
    policy = Policy(state_dir=tmp_path / "s", hidden=(key, Path("/var/log")))
    argv = argv_for(tmp_path, policy)
    assert index_of(argv, "--ro-bind", "/dev/null", str(key.resolve()))
    assert index_of(argv, "--tmpfs", "/var/log") < index_of(argv, "--remount-ro", "/var/log")


def test_only_runtimes_inside_hidden_places_are_bound_back(tmp_path):
    pyenv = Path("/root/.pyenv-autod-test/bin/python3")  # need not exist: argv only
    visible = Path("/usr/bin/python3")
    argv = argv_for(tmp_path, expose=[visible])
    assert str(visible) not in argv  # /usr is visible already
    argv = argv_for(tmp_path, expose=[pyenv])
    assert str(pyenv) not in argv  # a path that does not exist is never bound
    real = Path(sys.executable).resolve()
    argv = argv_for(tmp_path, expose=[real])
    hidden = any(str(real).startswith(d + "/") for d in sandbox.HIDDEN_DIRS)
    assert (str(real) in argv) == hidden


def test_output_dir_is_bound_writable_last(tmp_path):
    out = tmp_path / "cov"
    out.mkdir()
    argv = argv_for(tmp_path / "ws", writable=[out])
    assert index_of(argv, "--bind", str(out), str(out)) > index_of(argv, "--tmpfs", "/tmp")


def test_the_environment_is_an_allow_list():
    base = {
        "PATH": "/usr/bin", "LANG": "C.UTF-8", "LC_TIME": "C", "TERM": "xterm", "TZ": "UTC",
        "USER": "autod", "CI": "1", "PYTHONUNBUFFERED": "1", "VIRTUAL_ENV": "/opt/autod/venv",
        "AUTOD_LLM__API_KEY": "sk-1", "CREDENTIALS_DIRECTORY": "/run/credentials/x",
        "NOTIFY_SOCKET": "/run/systemd/notify", "WATCHDOG_USEC": "1", "INVOCATION_ID": "i",
        "PYTHONPATH": "/evil", "SSH_AUTH_SOCK": "/run/user/0/ssh", "HTTPS_PROXY": "http://p",
        "HOME": "/root",
    }
    env = check_env(base, own={"FOO": "bar"}, home="/tmp/home", tmpdir="/tmp",
                    path_first=Path("/ws/.venv/bin"), virtual_env=Path("/ws/.venv"))
    assert env == {
        "PATH": "/ws/.venv/bin:/usr/bin", "LANG": "C.UTF-8", "LC_TIME": "C", "TERM": "xterm",
        "TZ": "UTC", "USER": "autod", "CI": "1", "PYTHONUNBUFFERED": "1",
        "VIRTUAL_ENV": "/ws/.venv", "HOME": "/tmp/home", "TMPDIR": "/tmp", "FOO": "bar",
    }
    # the daemon's own venv never leaks in as VIRTUAL_ENV
    assert "VIRTUAL_ENV" not in check_env(base, home="/h", tmpdir="/t")


def test_denied_names_and_secret_values_never_pass_even_from_the_checks_own_env():
    env = check_env({"PATH": "/usr/bin", "LANG": "sk-secret-value"},
                    own={"AUTOD_X": "1", "WATCHDOG_PID": "1", "TOKEN": "Bearer sk-secret-value"},
                    secrets=["sk-secret-value"], home="/h", tmpdir="/t")
    assert set(env) == {"PATH", "HOME", "TMPDIR"}


# -- config ------------------------------------------------------------------------------------


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "autod.yaml"
    p.write_text(text.replace("WS", str(tmp_path)))
    return p


def test_checks_sandbox_is_a_reserved_key_with_a_default(tmp_path):
    s = load_config(write(tmp_path, "workspace: WS\nchecks:\n  t: {run: pytest}\n"))
    assert s.checks_sandbox == "auto" and list(s.checks) == ["t"] and s.checks["t"].sandbox is None
    text = "workspace: WS\nchecks:\n  sandbox: off\n  t: {run: pytest, sandbox: bwrap}\n"
    s = load_config(write(tmp_path, text))
    assert s.checks_sandbox == "off" and list(s.checks) == ["t"]  # YAML's bare off is "off"
    assert sandbox.Policy.for_settings(s, s.workspace).mode_for(s.checks["t"]) == "bwrap"


def test_a_check_named_sandbox_is_refused_naming_file_line_and_field(tmp_path):
    path = write(tmp_path, "workspace: WS\nchecks:\n  t: {run: pytest}\n  sandbox: {run: make}\n")
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert f"{path}:4: checks.sandbox:" in str(e.value) and "no check may be named 'sandbox'" in str(e.value)
    with pytest.raises(ConfigError, match=r":3: checks.sandbox: .*auto, bwrap or off"):
        load_config(write(tmp_path, "workspace: WS\nchecks:\n  sandbox: docker\n"))


def test_the_environment_overrides_checks_sandbox(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOD_CHECKS__SANDBOX", "off")
    s = load_config(write(tmp_path, "workspace: WS\nchecks:\n  t: {run: pytest}\n"))
    assert s.checks_sandbox == "off" and list(s.checks) == ["t"]


def test_a_checks_env_may_not_name_autods_own_variables(tmp_path):
    text = "workspace: WS\nchecks:\n  t: {run: pytest, env: {AUTOD_LLM__API_KEY: x}}\n"
    with pytest.raises(ConfigError, match=r":3: checks.t.env: .*AUTOD_LLM__API_KEY"):
        load_config(write(tmp_path, text))


def test_the_policy_hides_the_key_file_credentials_config_and_logs(tmp_path, monkeypatch):
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", "/run/credentials/autod.service")
    etc = tmp_path / "etc"
    etc.mkdir()
    (tmp_path / "ws").mkdir()
    cfg = etc / "autod.yaml"
    cfg.write_text(f"workspace: {tmp_path / 'ws'}\nllm: {{api_key_file: {etc / 'key'}}}\n"
                   f"logging: {{file: {tmp_path / 'log' / 'autod' / 'autod.jsonl'}}}\n")
    s = load_config(cfg)
    hidden = set(Policy.for_settings(s, s.workspace).hidden)
    assert {Path("/run/credentials/autod.service"), etc / "key", cfg, tmp_path / "log" / "autod"} <= hidden


# -- when bwrap is missing ---------------------------------------------------------------------


@pytest.mark.slow
def test_config_check_and_status_say_loudly_when_bwrap_is_missing(tmp_path):
    cfg = write(tmp_path, "workspace: WS\nchecks:\n  t: {run: pytest}\n")
    env = {**os.environ, "PATH": str(Path(sys.executable).parent)}  # python, but no bwrap
    run = [sys.executable, "-m", "autod.cli.main"]
    r = subprocess.run([*run, "config", "check", "-c", str(cfg)], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and "sandbox: UNAVAILABLE (bwrap not found" in r.stdout
    assert "run UNSANDBOXED: t" in r.stdout
    r = subprocess.run([*run, "status", "-c", str(cfg), "--json"], capture_output=True, text=True, env=env)
    import json

    st = json.loads(r.stdout)["sandbox"]
    assert st["works"] is False and st["unsandboxed_checks"] == ["t"] and "bwrap not found" in st["why"]
    env["AUTOD_CHECKS__SANDBOX"] = "bwrap"
    r = subprocess.run([*run, "config", "check", "-c", str(cfg)], capture_output=True, text=True, env=env)
    assert r.returncode == 78 and f"{cfg}: checks.sandbox: bwrap is required but bwrap not found" in r.stderr


def test_a_hidden_path_that_is_the_workspace_or_above_it_never_hides_the_workspace(tmp_path):
    ws = tmp_path / "autod"  # e.g. logging.file: autod.jsonl in a checkout named autod
    ws.mkdir()
    argv = argv_for(ws, Policy(state_dir=ws, hidden=(ws, tmp_path)))
    bind = index_of(argv, "--bind", str(ws), str(ws))
    assert all(argv[i + 1] != str(ws) for i in range(bind, len(argv) - 1) if argv[i] == "--tmpfs")


def test_bwraps_own_setup_failure_is_a_check_that_did_not_start_not_a_verdict() -> None:
    from autod.checks.run import _start_failure

    python = Path("/usr/bin/python3")
    setup = ("bwrap: Can't remount readonly on /newroot/srv/app/.autod: Unable to remount destination "
             '"/newroot/srv/app/.autod" with correct flags: Invalid argument\n')
    why = _start_failure(setup, 1, "bwrap", python)
    assert why is not None and why.startswith("the sandbox could not start the check: bwrap: Can't remount")
    assert _start_failure("bwrap: execvp /usr/bin/python3: No such file or directory\n", 1, "bwrap", python)
    # the check's own output, and bwrap's words from a run that is not bwrap's, are verdicts
    assert _start_failure("F\n1 failed in 0.1s\n", 1, "bwrap", python) is None
    assert _start_failure(setup, 2, "bwrap", python) is None
    assert _start_failure(setup, 1, "none", python) is None


# -- the policy's paths, from the environment and the settings ---------------------------------


def test_a_bare_policy_hides_the_credentials_and_runtime_dirs_and_knows_the_homes(tmp_path, monkeypatch):
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", "/run/credentials/autod.service")
    monkeypatch.setenv("RUNTIME_DIRECTORY", "/run/autod:/run/autod-2")
    monkeypatch.setenv("HOME", "/srv/autod-home")
    monkeypatch.setattr(sandbox, "_interpreter", lambda: (Path("/srv/autod-home/py"), Path("/srv/autod-home"),
                                                          Path("/tmp"), Path("/opt/py")))
    p = Policy.for_settings(None, tmp_path)
    assert p.state_dir == tmp_path / ".autod"
    assert p.hidden == (Path("/run/credentials/autod.service"),)
    assert p.last == (Path("/run/autod"), Path("/run/autod-2"))
    assert Path("/srv/autod-home") in p.homes
    # autod's own interpreter is bound back, but never a home (or above one) or the private /tmp
    assert p.expose == (Path("/srv/autod-home/py"), Path("/opt/py"))
    monkeypatch.delenv("RUNTIME_DIRECTORY")
    assert Policy.for_settings(None, tmp_path).last == ()


def test_the_settings_policy_carries_mode_socket_homes_secrets_and_every_config_place(tmp_path, monkeypatch):
    from autod.control.socket import socket_path

    monkeypatch.delenv("RUNTIME_DIRECTORY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("AUTOD_CONFIG", str(tmp_path / "elsewhere.yaml"))
    monkeypatch.setenv("AUTOD_LLM__API_KEY", "sk-policy-secret-1234")
    (tmp_path / "ws").mkdir()
    cfg = tmp_path / "autod.yaml"
    cfg.write_text(f"workspace: {tmp_path / 'ws'}\nlogging: {{file: {tmp_path / 'log' / 'x.jsonl'}}}\n"
                   "checks:\n  sandbox: bwrap\n  t: {run: pytest}\n")
    s = load_config(cfg)
    p = Policy.for_settings(s, s.workspace)
    assert p.mode == "bwrap" and p.mode_for(s.checks["t"]) == "bwrap"  # required: never a quiet fallback
    assert socket_path(s) in p.last
    assert p.homes == sandbox._homes() and Path(os.path.realpath(tmp_path / "home")) in p.homes
    assert "sk-policy-secret-1234" in p.secrets
    hidden = set(p.hidden)
    assert {cfg, tmp_path / "elsewhere.yaml", tmp_path / "home" / ".config" / "autod"} <= hidden
    # a log file in a directory not named for autod hides the file, not its whole directory
    assert tmp_path / "log" / "x.jsonl" in hidden and tmp_path / "log" not in hidden


class _Pw:
    def __init__(self, pw_dir: str) -> None:
        self.pw_dir = pw_dir


@pytest.mark.parametrize(
    ("home", "pw_dir", "expected"),
    [
        ("/srv/a", "/srv/b", ["/srv/a", "/srv/b"]),
        ("/srv/a", "/srv/a", ["/srv/a"]),  # once
        (None, "/srv/b", ["/srv/b"]),
        ("/", "/srv/b", ["/srv/b"]),  # HOME=/ is no home: hiding it would hide the whole host
        ("relative", "/srv/b", ["/srv/b"]),
        ("/srv/a", KeyError, ["/srv/a"]),  # a uid without a passwd entry (a container's)
    ],
)
def test_homes_are_home_and_the_passwd_entry_absolute_once_and_never_the_root(monkeypatch, home, pw_dir,
                                                                               expected):
    import pwd

    if home is None:
        monkeypatch.delenv("HOME", raising=False)
    else:
        monkeypatch.setenv("HOME", home)

    def getpwuid(uid: int) -> _Pw:
        if pw_dir is KeyError:
            raise KeyError(uid)
        return _Pw(pw_dir)

    monkeypatch.setattr(pwd, "getpwuid", getpwuid)
    assert sandbox._homes() == tuple(Path(os.path.realpath(h)) for h in expected)


def test_the_private_tmp_dirs_are_fresh_tmpfs_and_runtime_dirs_never_hide_the_workspace(tmp_path):
    ws = tmp_path / "run" / "ws"
    ws.mkdir(parents=True)
    ops = sandbox.mount_table(ws, Policy(last=(ws, tmp_path / "run"))).ops
    for private in ("/tmp", "/var/tmp"):
        if os.path.isdir(private) and not os.path.islink(private):
            assert ("tmpfs", Path(private)) in [(op.kind, op.dest) for op in ops]
    bind = [op.dest for op in ops].index(ws)
    assert not [op for op in ops[bind:] if op.kind == "tmpfs" and sandbox.under(ws, op.dest)]


def test_a_mirror_without_git_in_the_real_tree_gets_the_copys_git_read_only(tmp_path):
    root = Path(os.path.realpath(tmp_path))
    ws, copy = root / "ws", root / "mirror"
    ws.mkdir()
    (copy / ".git").mkdir(parents=True)  # the placeholder autod made in the copy
    ops = [(op.kind, op.dest, op.source) for op in sandbox.mount_table(copy, Policy(), mount_at=ws).ops]
    assert [(k, s) for k, d, s in ops if d == ws / ".git"] == [("ro", copy / ".git")]


def test_bwrap_argv_shows_a_copy_at_the_workspace_with_the_real_trees_bind_backs_read_only(tmp_path):
    root = Path(os.path.realpath(tmp_path))
    ws, copy = root / "ws", root / "mirror"
    (ws / "web" / "node_modules").mkdir(parents=True)  # not a venv: only bind_back binds it
    copy.mkdir()
    argv = argv_for(copy, Policy(), mount_at=ws, bind_back=["web/node_modules"])
    deps = str(ws / "web" / "node_modules")
    assert index_of(argv, "--bind", str(copy), str(ws)) < index_of(argv, "--ro-bind", deps, deps)
    index_of(argv, "--chdir", str(ws))


def test_root_drops_every_capability_by_bwraps_own_word(tmp_path):
    argv = argv_for(tmp_path)
    if os.geteuid() == 0:
        assert argv[argv.index("--cap-drop") + 1] == "ALL"


# -- the probe: does bwrap work here? ----------------------------------------------------------


def test_the_probe_runs_once_per_process_unless_refreshed(monkeypatch):
    calls = []

    def fake() -> sandbox.Verdict:
        calls.append(1)
        return sandbox.Verdict(True, f"/usr/bin/bwrap-{len(calls)}")

    monkeypatch.setattr(sandbox, "_probe", fake)
    monkeypatch.setattr(sandbox, "_verdict", None)
    assert sandbox.probe() == sandbox.Verdict(True, "/usr/bin/bwrap-1")
    assert sandbox.probe() == sandbox.Verdict(True, "/usr/bin/bwrap-1") and len(calls) == 1
    assert sandbox.probe(refresh=True) == sandbox.Verdict(True, "/usr/bin/bwrap-2")
    assert sandbox.cached_verdict() == sandbox.Verdict(True, "/usr/bin/bwrap-2")


@pytest.mark.parametrize(
    ("outcome", "verdict"),
    [
        (None, (False, None, "bwrap not found on PATH: install the `bubblewrap` package")),
        ((0, b""), (True, "/opt/bin/bwrap", None)),
        ((1, b"bwrap: setting up uid map: Permission denied\n"),
         (False, "/opt/bin/bwrap", "bwrap does not work here: bwrap: setting up uid map: Permission denied")),
        ((1, b"first line\nbwrap: No permissions to make a namespace\n\n"),
         (False, "/opt/bin/bwrap", "bwrap does not work here: bwrap: No permissions to make a namespace")),
        ((2, b""), (False, "/opt/bin/bwrap", "bwrap does not work here: exit 2")),
        ((1, b"bwrap: \xff bad\n"), (False, "/opt/bin/bwrap", "bwrap does not work here: bwrap: \ufffd bad")),
        ((1, b"x" * 400), (False, "/opt/bin/bwrap", "bwrap does not work here: " + "x" * 300)),
        (subprocess.TimeoutExpired(["bwrap"], 10),
         (False, "/opt/bin/bwrap", "bwrap did not finish `true` within 10s")),
        (PermissionError(13, "Permission denied"),
         (False, "/opt/bin/bwrap", "bwrap cannot be run: PermissionError: Permission denied")),
    ],
)
def test_the_probe_runs_true_with_a_checks_flags_and_names_what_to_fix(monkeypatch, outcome, verdict):
    seen: dict[str, object] = {}

    def which(name: str) -> str | None:
        return {"bwrap": None if outcome is None else "/opt/bin/bwrap", "true": "/opt/bin/true"}.get(name)

    def run(argv, **kw):
        ws = Path(argv[argv.index("--chdir") + 1])
        seen.update(argv=argv, kw=kw, git=(ws / ".git").is_dir(), ws=ws)
        if isinstance(outcome, BaseException):
            raise outcome
        return subprocess.CompletedProcess(argv, outcome[0], b"", outcome[1])

    monkeypatch.setattr(sandbox.shutil, "which", which)
    monkeypatch.setattr(sandbox.subprocess, "run", run)
    assert sandbox._probe() == sandbox.Verdict(*verdict)
    if outcome is None:
        assert not seen
        return
    argv, ws = seen["argv"], seen["ws"]
    assert argv[0] == "/opt/bin/bwrap" and argv[-2:] == ["--", "/opt/bin/true"]
    assert seen["git"] and ws.name.startswith("autod-probe-") and not ws.exists()
    index_of(argv, "--ro-bind", str(ws / ".git"), str(ws / ".git"))  # each raises when missing
    index_of(argv, "--setenv", "HOME", sandbox.HOME_IN_SANDBOX)
    index_of(argv, "--setenv", "TMPDIR", "/tmp")
    assert "--unshare-net" in argv and "--clearenv" in argv
    assert seen["kw"] == {"capture_output": True, "timeout": sandbox.PROBE_TIMEOUT_S, "check": False,
                          "stdin": subprocess.DEVNULL}


def test_the_probe_finds_true_where_path_does_not(monkeypatch):
    seen = []
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: "/opt/bin/bwrap" if name == "bwrap" else None)

    def run(argv, **kw):
        seen.append(argv)
        return subprocess.CompletedProcess(argv, 0, b"", b"")

    monkeypatch.setattr(sandbox.subprocess, "run", run)
    assert sandbox._probe().works and seen[0][-1] == "/bin/true"


def test_the_probe_says_bwrap_works_here(real_bwrap):
    v = sandbox.probe(refresh=True)
    assert v.works and v.why is None and v.bwrap and Path(v.bwrap).name == "bwrap"


# -- what status, config check and the start-up log say ----------------------------------------

BROKEN = sandbox.Verdict(False, "/usr/bin/bwrap", "bwrap does not work here: no namespaces")
WORKS = sandbox.Verdict(True, "/usr/bin/bwrap")


@pytest.mark.parametrize(
    ("verdict", "mode", "unsandboxed", "refused"),
    [
        (WORKS, "auto", ["plain"], []),
        (BROKEN, "auto", ["auto", "dflt", "plain"], ["bwrap"]),  # auto falls back loudly; bwrap refuses
        (BROKEN, "bwrap", ["auto", "plain"], ["bwrap", "dflt"]),
        (BROKEN, "off", ["auto", "dflt", "plain"], ["bwrap"]),
    ],
)
def test_status_names_the_checks_that_run_unsandboxed_and_those_refused(
    tmp_path, monkeypatch, verdict, mode, unsandboxed, refused
):
    monkeypatch.setattr(sandbox, "probe", lambda: verdict)
    text = (f"workspace: WS\nchecks:\n  sandbox: {mode}\n  dflt: {{run: pytest}}\n"
            "  auto: {run: pytest, sandbox: auto}\n  plain: {run: pytest, sandbox: off}\n"
            "  bwrap: {run: pytest, sandbox: bwrap}\n")
    st = sandbox.status(load_config(write(tmp_path, text)))
    assert st == {"mode": mode, "bwrap": "/usr/bin/bwrap", "works": verdict.works, "why": verdict.why,
                  "unsandboxed_checks": unsandboxed, "refused_checks": refused}


@pytest.mark.parametrize(
    ("st", "line"),
    [
        ({"mode": "auto", "bwrap": "/b", "works": True, "why": None},
         "sandbox: bwrap (/b), checks.sandbox: auto"),
        ({"mode": "auto", "bwrap": "/b", "works": True, "why": None, "unsandboxed_checks": ["a", "b"]},
         "sandbox: bwrap (/b), checks.sandbox: auto; UNSANDBOXED by config (sandbox: off): a, b"),
        ({"mode": "bwrap", "bwrap": None, "works": False, "why": "gone", "unsandboxed_checks": ["a", "b"],
          "refused_checks": ["c", "d"]},
         "sandbox: UNAVAILABLE (gone), checks.sandbox: bwrap; these checks run UNSANDBOXED: a, b;"
         " these checks will not run (sandbox: bwrap): c, d"),
        ({"mode": "off", "bwrap": None, "works": False, "why": "gone", "refused_checks": None},
         "sandbox: UNAVAILABLE (gone), checks.sandbox: off"),
    ],
)
def test_describe_says_loudly_which_checks_run_without_the_sandbox(st, line):
    assert sandbox.describe(st) == line


@pytest.mark.parametrize(
    ("works", "unsandboxed", "refused", "event", "level"),
    [
        (False, ["a"], [], "sandbox.unavailable", "warning"),
        (False, [], ["b"], "sandbox.unavailable", "warning"),
        (False, [], [], "sandbox.ready", "info"),  # nothing configured would use it
        (True, ["a"], [], "sandbox.disabled", "warning"),
        (True, [], [], "sandbox.ready", "info"),
    ],
)
def test_start_up_warns_once_when_any_check_runs_without_the_sandbox(
    works, unsandboxed, refused, event, level
):
    from structlog.testing import capture_logs

    st = {"mode": "auto", "bwrap": "/b", "works": works, "why": None if works else "gone",
          "unsandboxed_checks": unsandboxed, "refused_checks": refused}
    with capture_logs() as logs:
        sandbox.log_startup(st)
    (line,) = logs
    expected = {"event": event, "log_level": level, "mode": "auto"}
    if event == "sandbox.unavailable":
        expected.update(why="gone", unsandboxed_checks=unsandboxed, refused_checks=refused,
                        fix="install bubblewrap, or allow unprivileged user namespaces (docs/OPERATIONS.md)")
    elif event == "sandbox.disabled":
        expected.update(unsandboxed_checks=unsandboxed)
    else:
        expected.update(bwrap="/b")
    assert line == expected
