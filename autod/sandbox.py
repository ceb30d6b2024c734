"""The check sandbox: what a check may see and touch, as a bubblewrap command line, and whether bwrap
works on this machine (probed once).

A check is the operator's command, but it runs the repository's code (tests, conftest.py, build
scripts), which a plan or a stranger may have written. Under bwrap it gets: a read-only root; the
workspace writable except `.git` (read-only: a check must not plant hooks or `core.fsmonitor` that
autod's own git would run) and the state dir (hidden); a private /tmp; empty directories over the
places secrets live (/root, /home, /run, /etc/autod, the credentials dir, the key file, autod's state
and log dirs); a fresh /dev and /proc in its own PID namespace that dies with it; no network unless
the check opts in; and an environment built from an allow-list (see `check_env`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from autod.config import CheckConfig, Settings

SandboxMode = Literal["auto", "bwrap", "off"]
PROBE_TIMEOUT_S = 10.0

# Secrets a read-only root would still show. A workspace (or a program a check runs) below one of
# these is bound back in; everything else there is an empty, read-only directory.
HIDDEN_DIRS = ("/root", "/home", "/run", "/etc/autod")
HOME_IN_SANDBOX = "/tmp/home"  # inside the private /tmp: writable, and gone with the check

# The environment a check gets, besides its own `env:`. Nothing else of the daemon's passes:
# AUTOD_* (the LLM key among them), CREDENTIALS_DIRECTORY, NOTIFY_SOCKET, WATCHDOG_*, proxies...
ENV_ALLOW = frozenset(
    {
        "PATH",
        "LANG",
        "LANGUAGE",
        "TERM",
        "TZ",
        "USER",
        "LOGNAME",
        "CI",
        "NO_COLOR",
        "FORCE_COLOR",
        "COLUMNS",
        "SOURCE_DATE_EPOCH",
        # Python knobs that change output or speed, never what code is loaded (so not PYTHONPATH,
        # PYTHONHOME, PYTHONSTARTUP, PYTHONUSERBASE, PYTHONINSPECT).
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONUNBUFFERED",
        "PYTHONIOENCODING",
        "PYTHONUTF8",
        "PYTHONHASHSEED",
        "PYTHONFAULTHANDLER",
    }
)
ENV_ALLOW_PREFIXES = ("LC_",)
# Never in a check's environment, even from its own `env:` (config validation refuses them there).
ENV_DENY = frozenset(
    {
        "CREDENTIALS_DIRECTORY",
        "NOTIFY_SOCKET",
        "INVOCATION_ID",
        "JOURNAL_STREAM",
        "LISTEN_FDS",
        "LISTEN_PID",
        "LISTEN_FDNAMES",
        "RUNTIME_DIRECTORY",
        "STATE_DIRECTORY",
        "LOGS_DIRECTORY",
        "CACHE_DIRECTORY",
        "CONFIGURATION_DIRECTORY",
        "MAINPID",
    }
)
ENV_DENY_PREFIXES = ("AUTOD_", "WATCHDOG_")


def env_name_denied(name: str) -> bool:
    """Whether a variable may never reach a check (autod's own, systemd's service plumbing)."""
    return name in ENV_DENY or name.startswith(ENV_DENY_PREFIXES)


def check_env(
    base: Mapping[str, str],
    *,
    own: Mapping[str, str] = {},
    secrets: Iterable[str] = (),
    path_first: Path | None = None,
    virtual_env: Path | None = None,
    home: str,
    tmpdir: str,
) -> dict[str, str]:
    """The environment of one check run: the allow-list from `base`, a private HOME and TMPDIR,
    the workspace's venv first on PATH, then the check's own `env:` (`own`).

    Denied names and any value that contains a configured secret are dropped wherever they come from.
    """
    env = {k: v for k, v in base.items() if k in ENV_ALLOW or k.startswith(ENV_ALLOW_PREFIXES)}
    env.setdefault("PATH", os.defpath)
    if path_first is not None:
        env["PATH"] = f"{path_first}{os.pathsep}{env['PATH']}"
    if virtual_env is not None:
        env["VIRTUAL_ENV"] = str(virtual_env)
    env["HOME"] = home
    env["TMPDIR"] = tmpdir
    env.update(own)
    keys = [s for s in secrets if s]
    return {
        k: v for k, v in env.items() if not env_name_denied(k) and not any(s in v for s in keys)
    }


# ---------------------------------------------------------------------------------------------
# Policy: the paths a run hides and binds, from the settings


@dataclass(frozen=True)
class Policy:
    """Where a check runs and what of the host it must not see. Built once per run from Settings."""

    mode: SandboxMode = "auto"
    state_dir: Path | None = None
    hidden: tuple[Path, ...] = ()  # beyond HIDDEN_DIRS: credentials dir, key file, config, logs
    secrets: tuple[str, ...] = field(default=(), repr=False)

    @classmethod
    def for_settings(cls, settings: Settings | None, workspace: Path) -> Policy:
        if settings is None:  # a bare run_check (tests, tools): the default state dir is still hidden
            return cls(state_dir=workspace / ".autod", hidden=_env_hidden())
        hidden = list(_env_hidden())
        if settings.llm.api_key_file is not None:
            hidden.append(settings.llm.api_key_file)
        cfg = settings.config_file
        if cfg is not None and not _under(cfg, settings.workspace):
            hidden.append(cfg)  # it may hold a key; inside the workspace the check sees it anyway
        log_dir = settings.log_file.parent
        hidden.append(log_dir if "autod" in log_dir.name else settings.log_file)
        return cls(
            mode=settings.checks_sandbox,
            state_dir=settings.state_path,
            hidden=tuple(hidden),
            secrets=tuple(settings.secrets()),
        )

    def mode_for(self, check: CheckConfig) -> SandboxMode:
        return check.sandbox or self.mode


def _env_hidden() -> tuple[Path, ...]:
    cred = os.environ.get("CREDENTIALS_DIRECTORY")
    return (Path(cred),) if cred else ()


def _under(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


# ---------------------------------------------------------------------------------------------
# The bwrap command line


def _real(p: Path | str) -> Path:
    return Path(os.path.realpath(p))


class _Mounts:
    """bwrap's mount operations, in order. A path is hidden only where it is still visible, and a
    path is bound back only where something hid it, so the command line stays short."""

    def __init__(self) -> None:
        # (kind, destination, source); kind: ro | rw | tmpfs | null
        self.ops: list[tuple[str, Path, Path]] = [("ro", Path("/"), Path("/"))]

    def covering(self, path: Path) -> str:
        best, depth = "ro", -1
        for kind, dest, _ in self.ops:
            if _under(path, dest) and len(dest.parts) > depth:
                best, depth = kind, len(dest.parts)
        return best

    def hidden(self, path: Path) -> bool:
        return self.covering(path) in ("tmpfs", "null")

    def tmpfs(self, path: Path) -> None:
        self.ops.append(("tmpfs", path, path))

    def hide(self, path: Path) -> None:
        if path.exists() and not self.hidden(path):
            self.ops.append(("tmpfs" if path.is_dir() else "null", path, path))

    def bind(self, dest: Path, *, writable: bool, source: Path | None = None) -> None:
        src = source or dest
        if src.exists():
            self.ops.append(("rw" if writable else "ro", dest, src))

    def argv(self) -> list[str]:
        out: list[str] = []
        for kind, dest, src in self.ops[1:]:
            if kind == "tmpfs":
                out += ["--perms", "0755", "--tmpfs", str(dest)]
            elif kind == "null":
                out += ["--ro-bind", "/dev/null", str(dest)]
            else:
                out += ["--bind" if kind == "rw" else "--ro-bind", str(src), str(dest)]
        # The empty directories become read-only once everything bound below them is in place
        # (bwrap creates the mount points in them); /tmp stays the check's scratch space.
        for kind, dest, _ in self.ops[1:]:
            if kind == "tmpfs" and dest != Path("/tmp"):
                out += ["--remount-ro", str(dest)]
        return out


def bwrap_argv(
    bwrap: str,
    command: Sequence[str],
    *,
    workspace: Path,
    env: Mapping[str, str],
    policy: Policy,
    network: bool = False,
    expose: Sequence[Path] = (),
    writable: Sequence[Path] = (),
    mount_at: Path | None = None,
    bind_back: Sequence[str] = (),
) -> list[str]:
    """The full argv that runs `command` in `workspace` under bubblewrap.

    `expose`: host paths the command needs that may lie in a hidden place (its interpreter under
    /root/.pyenv, say): bound back read-only at the same path, with the content of their real path.
    `writable`: autod-owned directories outside the workspace bound writable at the same path (a
    coverage plugin's results, for instance).
    `mount_at`: run on a copy (autod.isolation's mirror, `workspace` here) mounted at this path, the
    real workspace's: the check sees the copy where the tree is, and `bind_back` (paths relative to
    it: `.git`, venvs) from the real tree, read-only.
    """
    ws = _real(workspace) if mount_at is None else _real(mount_at)
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
    m = _Mounts()
    m.tmpfs(Path("/tmp"))
    if Path("/var/tmp").is_dir() and not Path("/var/tmp").is_symlink():
        m.tmpfs(Path("/var/tmp"))
    for d in HIDDEN_DIRS:
        m.hide(_real(d))
    for p in policy.hidden:
        m.hide(_real(p))
    for p in expose:
        dest = Path(os.path.abspath(p))
        if m.hidden(dest) and not _under(dest, ws):
            m.bind(dest, writable=False, source=_real(dest))
    if mount_at is None:
        m.bind(ws, writable=True)
    else:
        m.bind(ws, writable=True, source=_real(workspace))
        for rel in bind_back:  # bwrap reads a bind's source on the host, not under the mirror
            if rel != ".git" and ".." not in Path(rel).parts:
                m.bind(ws / rel, writable=False)
    git = ws / ".git"
    if git.exists():
        m.bind(git, writable=False)
    # Again, now that the bind above exposed them: those inside the workspace. Never the workspace
    # itself or a directory above it (a log dir that happens to be the checkout, say).
    for p in (*([policy.state_dir] if policy.state_dir is not None else []), *policy.hidden):
        if not _under(ws, _real(p)):
            m.hide(_real(p))
    for p in writable:
        m.bind(_real(p), writable=True)
    argv += m.argv()
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
        detail = (r.stderr.decode("utf-8", "replace").strip().splitlines() or [f"exit {r.returncode}"])[-1]
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

    log = structlog.get_logger("autod.sandbox")
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
