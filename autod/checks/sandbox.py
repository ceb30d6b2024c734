"""The check sandbox: what a check may see and touch, as a bubblewrap command line, and whether bwrap
works on this machine (probed once).

A check is the operator's command, but it runs the repository's code (tests, conftest.py, build
scripts), which a plan or a stranger may have written. Under bwrap it gets: a read-only root; the
workspace writable except `.git` and the workspace's venvs (read-only: a check must not plant hooks,
`core.fsmonitor` or a *.pth that autod's git or the operator's next `python` would run; a workspace
without `.git` gets an empty read-only one); a private /tmp; empty directories over the places secrets
live (homes, /run, /etc/autod) and over everything autod owns (state dir, config, credentials, key
files, logs, runtime dir and control socket), hidden again after every bind; a fresh /dev and /proc in
its own PID namespace that dies with it; no network unless the check opts in; and an environment
built from an allow-list (see `check_env`). What is mounted comes from the config and autod's own
interpreter only, never from the workspace (`autod.checks.mounts`).
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from autod.checks.mounts import HIDDEN_DIRS, MountTable, exposable, real, under, workspace_venvs
from autod.checks.roots import autod_roots
from autod.confinement import (
    ENV_ALLOW,
    ENV_ALLOW_PREFIXES,
    ENV_DENY,
    ENV_DENY_PREFIXES,
    check_env,
    env_name_denied,
    steady_hashes,
)
from autod.linebreaks import lines_of

__all__ = [
    "ENV_ALLOW",
    "ENV_ALLOW_PREFIXES",
    "ENV_DENY",
    "ENV_DENY_PREFIXES",
    "HIDDEN_DIRS",
    "HOME_IN_SANDBOX",
    "Policy",
    "Verdict",
    "bwrap_argv",
    "check_env",
    "env_name_denied",
    "mount_table",
    "probe",
    "status",
    "steady_hashes",
]

if TYPE_CHECKING:
    from autod.config.settings import CheckConfig, Settings

SandboxMode = Literal["auto", "bwrap", "off"]
PROBE_TIMEOUT_S = 10.0

HOME_IN_SANDBOX = "/tmp/home"  # inside the private /tmp: writable, and gone with the check

# ---------------------------------------------------------------------------------------------
# Policy: the paths a run hides and binds, from the settings


@dataclass(frozen=True)
class Policy:
    """Where a check runs and what of the host it must not see. Built once per run from Settings."""

    mode: SandboxMode = "auto"
    state_dir: Path | None = None
    hidden: tuple[Path, ...] = ()  # autod's own files: config, credentials, key files, logs
    last: tuple[Path, ...] = ()  # the runtime dir and the control socket: hidden after everything
    homes: tuple[Path, ...] = ()  # beyond HIDDEN_DIRS: the daemon's own home
    expose: tuple[Path, ...] = ()  # checks.expose and autod's own interpreter, bound back read-only
    secrets: tuple[str, ...] = field(default=(), repr=False)

    @classmethod
    def for_settings(cls, settings: Settings | None, workspace: Path) -> Policy:
        homes = _homes()
        expose = [p for p in _interpreter() if exposable(p, [*map(Path, HIDDEN_DIRS), *homes])]
        if settings is None:  # a bare run_check (tests, tools): the default state dir is still hidden
            return cls(state_dir=workspace / ".autod", hidden=_env_hidden(), last=_runtime(None),
                       homes=homes, expose=tuple(expose))
        from autod.config.settings import SEARCH_PATHS

        hidden = [*_env_hidden(), *(Path(p) for p in SEARCH_PATHS), Path("~/.config/autod").expanduser()]
        for f in (settings.config_file, os.environ.get("AUTOD_CONFIG"), settings.llm.api_key_file,
                  settings.memory.auth_token_file):
            if f:
                hidden.append(Path(f))
        # every instance's state, logs, cache and runtime dir, this one's rotated logs (autod.checks.roots);
        # never the workspace, even from the fixer's scratch copy (a checkout named `autod` holding its
        # state dir is no root of autod's: hidden, it took the fixer's venv with it)
        hidden += autod_roots(settings.workspace, settings.state_path, settings.log_file)
        return cls(
            mode=settings.checks_sandbox,
            state_dir=settings.state_path,
            hidden=tuple(hidden),
            last=_runtime(settings),
            homes=homes,
            expose=tuple([*settings.checks_expose, *expose]),
            secrets=tuple(settings.secrets()),
        )

    def mode_for(self, check: CheckConfig) -> SandboxMode:
        return check.sandbox or self.mode


def _env_hidden() -> tuple[Path, ...]:
    cred = os.environ.get("CREDENTIALS_DIRECTORY")
    return (Path(cred),) if cred else ()


def _homes() -> tuple[Path, ...]:
    """The daemon's home directories besides /root and /home (a service user's may be anywhere)."""
    import pwd

    found = [os.environ.get("HOME")]
    with contextlib.suppress(KeyError):
        found.append(pwd.getpwuid(os.geteuid()).pw_dir)
    out = []
    for h in found:
        if h and os.path.isabs(h) and (p := real(h)) != Path("/") and p not in out:
            out.append(p)
    return tuple(out)


def _interpreter() -> tuple[Path, ...]:
    """autod's own interpreter: its venv and the install it was made from (stdlib, libpython). A
    workspace venv made from the same base interpreter then works in the sandbox with no config."""
    out: list[Path] = []
    for p in (sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix):
        r = real(p)
        if r not in out:
            out.append(r)
    return tuple(out)


def _runtime(settings: Settings | None) -> tuple[Path, ...]:
    """systemd's runtime directory and the control socket (wherever the settings put it)."""
    out = [Path(d) for d in os.environ.get("RUNTIME_DIRECTORY", "").split(":") if d]
    if settings is not None:
        out.append(settings.control_socket)
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# The bwrap command line


def mount_table(
    workspace: Path,
    policy: Policy,
    *,
    expose: Sequence[Path] = (),
    writable: Sequence[Path] = (),
    mount_at: Path | None = None,
    bind_back: Sequence[str] = (),
    readonly: Sequence[Path] = (),
) -> MountTable:
    """What a check in `workspace` sees (autod.checks.mounts has the order and why). `expose`: host paths the
    configured command names (its program, absolute paths in its `run`), bound back read-only where
    they are hidden; `writable`: autod-owned scratch directories outside the workspace; `readonly`:
    autod-owned directories outside it that the check may read but never change (the judge's files).

    `mount_at`: `workspace` is a copy (autod.isolation's mirror) shown at this path, the real
    workspace's, with `bind_back` (paths relative to it: venvs) and `.git` from the real tree,
    read-only."""
    src = real(workspace)  # what the check sees where the workspace is: the tree itself, or its copy
    ws = real(mount_at) if mount_at is not None else src
    never = [*map(Path, HIDDEN_DIRS), *policy.homes]
    own = [real(p) for p in (*([policy.state_dir] if policy.state_dir else []), *policy.hidden)]
    m = MountTable()
    for d in ("/tmp", "/var/tmp"):
        if Path(d).is_dir() and not Path(d).is_symlink():
            m.tmpfs(Path(d))
    for d in never:  # a workspace below one is bound back below; one inside the workspace is its own
        if not under(real(d), ws):
            m.hide(real(d))
    for p in own:
        m.hide(p)
    for p in (*policy.expose, *expose):
        dest = Path(os.path.abspath(p))
        if m.hidden(dest) and not under(dest, ws) and exposable(dest, never) and not _credential(dest):
            m.bind(dest, writable=False, source=real(dest))
    m.bind(ws, writable=True, source=src)
    for rel in bind_back:  # bwrap reads a bind's source on the host: the real tree's, not the copy's
        if rel != ".git" and ".." not in Path(rel).parts:
            m.bind(ws / rel, writable=False)
    for git in dict.fromkeys((ws / ".git", src / ".git")):  # the real tree's, else the placeholder
        if git.exists() and not git.is_symlink():  # a workspace without one gets a placeholder first
            m.bind(ws / ".git", writable=False, source=git)
            break
    for venv in workspace_venvs(ws):
        m.bind(venv, writable=False)
    for p in writable:
        m.bind(real(p), writable=True)
    for p in readonly:
        m.bind(real(p), writable=False)
    # Again, whatever a bind above uncovered: autod's own files, then the runtime dir and socket last.
    # Never the workspace itself or a directory above it (a log dir that happens to be the checkout).
    for p in own:
        if not under(ws, p):
            m.hide(p)
    for p in policy.last:
        if not under(ws, real(p)):
            m.hide(real(p))
    return m


@functools.lru_cache(maxsize=1024)
def _credential(path: Path) -> bool:
    """Never bound back, whoever names it: a path through a credential file or directory (~/.aws...)."""
    from autod.safety.boundary import glob_match
    from autod.safety.protected import CREDENTIAL_GLOBS

    rel = path.as_posix().lstrip("/")
    return any(glob_match(g, rel) for g in CREDENTIAL_GLOBS)


def bwrap_argv(
    bwrap: str,
    command: Sequence[str],
    *,
    workspace: Path,
    env: Mapping[str, str],
    policy: Policy | None = None,
    network: bool = False,
    expose: Sequence[Path] = (),
    writable: Sequence[Path] = (),
    mount_at: Path | None = None,
    bind_back: Sequence[str] = (),
    mounts: MountTable | None = None,
) -> list[str]:
    """The full argv that runs `command` in `workspace` under bubblewrap: `mounts`, or the
    `mount_table` of the policy, exposures, writable directories and `mount_at`/`bind_back`."""
    ws = real(workspace) if mount_at is None else real(mount_at)
    argv = [
        bwrap,
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        *([] if network else ["--unshare-net"]),
        "--die-with-parent",
        "--new-session",
    ]
    if os.geteuid() == 0:
        argv += ["--cap-drop", "ALL"]  # root keeps no capability in the sandbox (no user namespace)
    argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    if mounts is None:
        mounts = mount_table(workspace, policy or Policy(), expose=expose, writable=writable,
                             mount_at=mount_at, bind_back=bind_back)
    argv += mounts.argv()
    argv += ["--dir", HOME_IN_SANDBOX, "--chdir", str(ws), "--clearenv"]
    for k, v in env.items():
        argv += ["--setenv", k, v]
    return [*argv, "--", *command]


# ---------------------------------------------------------------------------------------------
# Does bwrap work here? Probed once per process, with a deadline.


@dataclass(frozen=True)
class Verdict:
    works: bool
    bwrap: str | None
    why: str | None = None  # when it does not work: what to fix


_verdict: Verdict | None = None
_verdict_lock = threading.Lock()


def probe(*, refresh: bool = False) -> Verdict:
    """Run `true` under the same flags a check gets (blocking; cached for the process)."""
    global _verdict
    with _verdict_lock:
        if _verdict is None or refresh:
            _verdict = _probe()
        return _verdict


def cached_verdict() -> Verdict | None:
    return _verdict


def _probe() -> Verdict:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return Verdict(False, None, "bwrap not found on PATH: install the `bubblewrap` package")
    true = shutil.which("true") or "/bin/true"
    with tempfile.TemporaryDirectory(prefix="autod-probe-") as tmp:
        ws = Path(tmp)
        (ws / ".git").mkdir()
        argv = bwrap_argv(
            bwrap,
            [true],
            workspace=ws,
            env=check_env(os.environ, home=HOME_IN_SANDBOX, tmpdir="/tmp"),
            policy=Policy(state_dir=ws / ".autod"),
        )
        try:
            r = subprocess.run(
                argv, capture_output=True, timeout=PROBE_TIMEOUT_S, check=False, stdin=subprocess.DEVNULL
            )
        except subprocess.TimeoutExpired:
            return Verdict(False, bwrap, f"bwrap did not finish `true` within {PROBE_TIMEOUT_S:g}s")
        except OSError as exc:
            return Verdict(False, bwrap, f"bwrap cannot be run: {type(exc).__name__}: {exc.strerror}")
    if r.returncode != 0:
        detail = (lines_of(r.stderr.decode("utf-8", "replace").strip()) or [f"exit {r.returncode}"])[-1]
        return Verdict(False, bwrap, f"bwrap does not work here: {detail[:300]}")
    return Verdict(True, bwrap)


def status(settings: Settings) -> dict[str, object]:
    """What `autod status` and `config check` say about the sandbox (probes bwrap if not yet done)."""
    v = probe()
    per = {n: c.sandbox or settings.checks_sandbox for n, c in settings.checks.items()}
    return {
        "mode": settings.checks_sandbox,
        "bwrap": v.bwrap,
        "works": v.works,
        "why": v.why,
        "unsandboxed_checks": sorted(
            n for n, m in per.items() if m == "off" or (m == "auto" and not v.works)
        ),
        "refused_checks": sorted(n for n, m in per.items() if m == "bwrap" and not v.works),
    }


def describe(st: Mapping[str, object]) -> str:
    """One line for a human: the sandbox in force, and loudly when checks run without it."""
    mode = st["mode"]
    unsandboxed = list(st.get("unsandboxed_checks") or [])  # type: ignore[call-overload]
    refused = list(st.get("refused_checks") or [])  # type: ignore[call-overload]
    if st["works"]:
        line = f"sandbox: bwrap ({st['bwrap']}), checks.sandbox: {mode}"
        if unsandboxed:
            line += f"; UNSANDBOXED by config (sandbox: off): {', '.join(unsandboxed)}"
        return line
    line = f"sandbox: UNAVAILABLE ({st['why']}), checks.sandbox: {mode}"
    if unsandboxed:
        line += f"; these checks run UNSANDBOXED: {', '.join(unsandboxed)}"
    if refused:
        line += f"; these checks will not run (sandbox: bwrap): {', '.join(refused)}"
    return line


def log_startup(st: Mapping[str, object]) -> None:
    """At start-up: a warning, loud and once, when any check will run without the sandbox."""
    import structlog

    log = structlog.get_logger("autod.checks.sandbox")
    if not st["works"] and (st["unsandboxed_checks"] or st["refused_checks"]):
        log.warning(
            "sandbox.unavailable",
            why=st["why"],
            mode=st["mode"],
            unsandboxed_checks=st["unsandboxed_checks"],
            refused_checks=st["refused_checks"],
            fix="install bubblewrap, or allow unprivileged user namespaces (docs/OPERATIONS.md)",
        )
    elif st["unsandboxed_checks"]:
        log.warning("sandbox.disabled", mode=st["mode"], unsandboxed_checks=st["unsandboxed_checks"])
    else:
        log.info("sandbox.ready", bwrap=st["bwrap"], mode=st["mode"])
