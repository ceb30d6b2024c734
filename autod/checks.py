"""Run configured checks, and only those: the program resolved in the workspace's venv first, the
sandbox (`autod.sandbox`), a timeout that kills everything the check started, an output cap, and a
report of the workspace files the check changed."""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import stat
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from autod import reaper, sandbox, tally
from autod.config import CheckConfig
from autod.paths import NOT_SOURCE_DIRS
from autod.process import CannotStart, run_session

if TYPE_CHECKING:
    from autod.config import Settings

log = structlog.get_logger("autod.checks")

REAPER = str(Path(reaper.__file__).resolve())
VENV_DIRS = (".venv", "venv")
MAX_SNAPSHOT_ENTRIES = 50_000  # past this the change report is skipped rather than slow
SHEBANG_DEPTH = 4


@dataclass
class CheckResult:
    name: str
    exit_code: int
    output: str
    duration_ms: int
    timed_out: bool = False
    truncated: bool = False
    # Set when the check could not start at all (program not found, not executable, sandbox refused):
    # a configuration error for `status` and `config check`, never a failure for a debug cycle.
    error: str | None = None
    # Workspace files (relative paths) the run created, changed or deleted, caches and .git excepted.
    changed: list[str] = field(default_factory=list)
    # How it ran: "bwrap", "off" (configured), "unsandboxed" (auto, bwrap unavailable), "" (not run).
    sandbox: str = ""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def record(self) -> dict[str, object]:
        return {"name": self.name, "exit_code": self.exit_code, "duration_ms": self.duration_ms}


class CheckNotConfigured(KeyError):
    pass


class ProgramError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


# ---------------------------------------------------------------------------------------------
# Which program runs


def find_venv(root: Path) -> Path | None:
    """The workspace's own virtualenv (`.venv`, then `venv`), if it has one."""
    for name in VENV_DIRS:
        if (root / name / "bin").is_dir():
            return root / name
    return None


def resolve_program(name: str, *, cwd: Path, venv: Path | None, path: str) -> Path:
    """argv[0] as the host sees it: a path (relative to the workspace), or the first executable of
    that name in the workspace's venv, then on PATH. ProgramError 127 (missing) or 126 (not runnable)."""
    if "/" in name:
        p = Path(name) if os.path.isabs(name) else cwd / name
        if not p.exists():
            raise ProgramError(127, f"{name}: no such file")
        if not p.is_file() or not os.access(p, os.X_OK):
            raise ProgramError(126, f"{name}: not an executable file")
        return p
    dirs = [venv / "bin"] if venv is not None else []
    # Relative PATH entries ('.', '') are skipped: they would run a file of the workspace by accident.
    dirs += [Path(d) for d in path.split(os.pathsep) if d and os.path.isabs(d)]
    not_runnable = None
    for d in dirs:
        p = d / name
        if p.is_file():
            if os.access(p, os.X_OK):
                return p
            not_runnable = not_runnable or p
    if not_runnable is not None:
        raise ProgramError(126, f"{name}: {not_runnable} is not executable")
    where = f"{venv}/bin nor on PATH" if venv else "the workspace's .venv/bin or venv/bin, nor on PATH"
    raise ProgramError(127, f"{name}: not found in {where}")


def runtime_paths(program: Path, path: str) -> list[Path]:
    """What running `program` reads besides itself: its symlink chain, its interpreter (shebang,
    `env NAME`), each one's install prefix `lib` (Python's stdlib), and the venv a python belongs to.
    The sandbox binds back the ones that lie in a hidden place, e.g. a venv's python under
    /root/.pyenv, or a venv under /tmp."""
    out: list[Path] = []
    todo = [program]
    for _ in range(SHEBANG_DEPTH):
        if not todo:
            break
        p = todo.pop()
        chain = _link_chain(p)
        out += chain
        # A venv's python is a symlink to its base interpreter; what makes it the venv's is the
        # pyvenv.cfg beside its bin/ and the venv's site-packages: the whole venv, read-only.
        out += [q.parent.parent for q in chain if (q.parent.parent / "pyvenv.cfg").is_file()]
        real = chain[-1]
        if real.parent.name == "bin":
            prefix = real.parent.parent
            out += [prefix / lib for lib in ("lib", "lib64") if (prefix / lib).is_dir()]
        interp = _interpreter(real, path)
        if interp is not None:
            todo.append(interp)
    seen: set[Path] = set()
    return [p for p in out if not (p in seen or seen.add(p))]  # type: ignore[func-returns-value]


def _link_chain(p: Path) -> list[Path]:
    out = [Path(os.path.abspath(p))]
    cur = out[0]
    for _ in range(40):
        if not cur.is_symlink():
            break
        target = os.readlink(cur)
        cur = Path(os.path.normpath(cur.parent / target))
        out.append(cur)
    real = Path(os.path.realpath(p))
    if real not in out:
        out.append(real)
    return out


def _interpreter(p: Path, path: str) -> Path | None:
    try:
        with open(p, "rb") as f:
            head = f.read(256)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
    if not words:
        return None
    if Path(words[0]).name == "env" and len(words) > 1:
        name = next((w for w in words[1:] if not w.startswith("-")), None)
        found = shutil.which(name, path=path) if name else None
        return Path(found) if found else None
    return Path(words[0])


# ---------------------------------------------------------------------------------------------
# What a check changed


def snapshot(root: Path, skip: Sequence[Path] = ()) -> dict[str, tuple[int, int, int, int]] | None:
    """(mtime, size, inode, mode) of every file under root, caches, venvs and .git left out; None
    when the tree is too large to be worth it."""
    skipped = {os.path.realpath(p) for p in skip}
    out: dict[str, tuple[int, int, int, int]] = {}
    stack = [str(root)]
    base = len(str(root)) + 1
    while stack:
        d = stack.pop()
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue
        for e in entries:
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                if e.name not in NOT_SOURCE_DIRS and os.path.realpath(e.path) not in skipped:
                    stack.append(e.path)
                continue
            out[e.path[base:]] = (st.st_mtime_ns, st.st_size, st.st_ino, st.st_mode)
            if len(out) > MAX_SNAPSHOT_ENTRIES:
                return None
    return out


def changed_files(before: Mapping[str, object] | None, after: Mapping[str, object] | None) -> list[str]:
    if before is None or after is None:
        return []
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


# ---------------------------------------------------------------------------------------------
# Running one check


def _exposed(program: Path, args: Sequence[str], venv: Path | None, path: str) -> list[Path]:
    """What a check needs even where the sandbox hides its home, bound back read-only: the runtime
    of its program and of the workspace venv's python (what `python` on its PATH runs), and every
    file or directory its command line names by absolute path (`python /opt/ci/check.py`,
    `--rcfile=/etc/x`): the operator wrote those, so the check may read them."""
    roots = [program]
    if venv is not None and (venv / "bin" / "python").exists():
        roots.append(venv / "bin" / "python")
    named = []
    for arg in args:
        value = arg.split("=", 1)[1] if arg.startswith("-") and "=" in arg else arg
        if os.path.isabs(value) and os.path.exists(value):
            named.append(Path(value))
    roots += [p for p in named if p.is_file() and os.access(p, os.X_OK)]
    out: list[Path] = [p for p in named if p not in roots]
    for r in roots:
        out += runtime_paths(r, path)
    return out


def _not_started(name: str, code: int, why: str, mode: str = "") -> CheckResult:
    return CheckResult(name, code, why, 0, error=why, sandbox=mode)


def _start_failure(output: str, code: int, wrapper: str, program: Path) -> str | None:
    """bwrap's or the reaper's own message when the program could not be executed after all.

    Only the exact program matters: a check may run bwrap itself, whose messages are its output."""
    first = (output.lstrip().splitlines() or [""])[0]
    if wrapper == "bwrap" and code == 1 and first.startswith(f"bwrap: execvp {program}:"):
        return f"the sandbox could not start the check: {first[:300]}"
    if wrapper != "bwrap" and code in (126, 127) and first.startswith(reaper.EXEC_FAILED):
        return first[len("autod-reaper: ") :][:300]
    return None


async def _verdict() -> sandbox.Verdict:
    return sandbox.cached_verdict() or await asyncio.to_thread(sandbox.probe)


async def run_check(
    name: str,
    check: CheckConfig,
    cwd: Path,
    *,
    settings: Settings | None = None,
    extra_args: Sequence[str] = (),
    extra_env: Mapping[str, str] = {},
    output_dir: Path | None = None,
    mount_at: Path | None = None,
    bind_back: Sequence[str] = (),
) -> CheckResult:
    """Run one configured check in `cwd` (the workspace, or the fixer's scratch copy of it).

    `settings` gives the sandbox policy (mode, state dir, secrets); without it the defaults hold.
    `extra_args` are appended to the configured command; `extra_env` joins its `env:`; `output_dir`
    is an autod-owned directory outside the workspace the check may write (bound writable).
    `mount_at`: `cwd` is a copy of the workspace (autod.isolation) that the sandbox mounts at this
    path, the real workspace's, with `bind_back` from the real tree read-only; it needs bwrap (the
    result is a start error without it). Never raises for the command's own failure.
    """
    policy = sandbox.Policy.for_settings(settings, cwd if mount_at is None else mount_at)
    mode = policy.mode_for(check)
    try:
        argv = [*shlex.split(check.run), *extra_args]
    except ValueError as exc:
        return _not_started(name, 126, f"check {name!r}: cannot split `run`: {exc}")
    venv = find_venv(settings.workspace if settings is not None else cwd)
    host_path = os.environ.get("PATH", os.defpath)
    try:
        program = resolve_program(argv[0], cwd=cwd, venv=venv, path=host_path)
    except ProgramError as exc:
        return _not_started(name, exc.code, f"cannot start check {name!r}: {exc}")
    if mount_at is not None and _under_dir(program, cwd):
        # where the sandbox shows the copy
        program = Path(mount_at) / os.path.relpath(os.path.realpath(program), os.path.realpath(cwd))
    wrapper = "off"
    verdict = None
    if mode != "off":
        verdict = await _verdict()
        if verdict.works:
            wrapper = "bwrap"
        elif mode == "bwrap":
            why = f"check {name!r} needs the sandbox (sandbox: bwrap) but {verdict.why}"
            return _not_started(name, 126, why, "bwrap")
        else:
            wrapper = "unsandboxed"
    if mount_at is not None and wrapper != "bwrap":
        why = f"check {name!r} cannot run on a copy of the workspace without the bwrap sandbox"
        return _not_started(name, 126, why, wrapper)
    private = None if wrapper == "bwrap" else await asyncio.to_thread(_private_dirs)
    env = sandbox.check_env(
        os.environ,
        own={**check.env, **extra_env},
        secrets=policy.secrets,
        path_first=venv / "bin" if venv is not None else None,
        virtual_env=venv,
        home=sandbox.HOME_IN_SANDBOX if private is None else str(private / "home"),
        tmpdir="/tmp" if private is None else str(private / "tmp"),
    )
    command = [str(program), *argv[1:]]
    if wrapper == "bwrap":
        assert verdict is not None and verdict.bwrap is not None
        full = sandbox.bwrap_argv(
            verdict.bwrap,
            command,
            workspace=cwd,
            env=env,
            policy=policy,
            network=check.network,
            expose=_exposed(program, argv[1:], venv, env["PATH"]),
            writable=[output_dir] if output_dir is not None else [],
            mount_at=mount_at,
            bind_back=bind_back,
        )
    else:
        full = [sys.executable, "-I", "-S", REAPER, str(program), *command]
    skip = [p for p in (policy.state_dir, output_dir) if p is not None]
    before = await asyncio.to_thread(snapshot, cwd, skip)
    try:
        fin = await run_session(
            full, cwd=cwd, env=env, timeout_s=check.timeout_s, output_limit=check.output_limit_kb * 1024
        )
    except CannotStart as exc:
        return _not_started(name, 126, f"cannot start check {name!r}: {exc}", wrapper)
    finally:
        if private is not None:
            await asyncio.to_thread(shutil.rmtree, private, True)
    after = await asyncio.to_thread(snapshot, cwd, skip)
    tally.spend("checks", fin.duration_ms)
    output = fin.output.decode("utf-8", "replace")
    error = _start_failure(output, fin.exit_code, wrapper, program)
    if error is not None:
        code = 127 if "No such file" in error else 126
        why = f"check {name!r}: {error}"
        return CheckResult(name, code, output, fin.duration_ms, error=why, sandbox=wrapper)
    if fin.timed_out:
        output += f"\n[autod] check {name!r} timed out after {check.timeout_s:g}s and was killed"
    changed = changed_files(before, after)
    if changed and not check.fixer:
        # A check that fixes files by itself (ruff with `fix = true`) edits behind autod's journal.
        log.warning("check.changed_files", check=name, files=changed[:20], count=len(changed))
    return CheckResult(
        name=name,
        exit_code=fin.exit_code,
        output=output,
        duration_ms=fin.duration_ms,
        timed_out=fin.timed_out,
        truncated=fin.truncated,
        changed=changed,
        sandbox=wrapper,
    )


def _under_dir(path: Path, root: Path) -> bool:
    real, base = os.path.realpath(path), os.path.realpath(root)
    return real.startswith(base + os.sep)


def _private_dirs() -> Path:
    """A private HOME and TMPDIR for an unsandboxed run, removed after it."""
    root = Path(tempfile.mkdtemp(prefix="autod-check-"))
    (root / "home").mkdir()
    (root / "tmp").mkdir()
    return root
