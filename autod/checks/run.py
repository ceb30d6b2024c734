"""Run configured checks, and only those: the program resolved in the workspace's venv first
(`autod.checks.programs`), the sandbox (`autod.checks.sandbox`), a timeout that kills everything the
check started, an output cap, and a report of the workspace files the check changed."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from autod import tally
from autod.checks import bytecode, heard, mounts, pertest, planted, reaper, sandbox
from autod.checks.changes import changed_files, runs_code, snapshot, sources_and_outputs
from autod.checks.process import CannotStart, run_session
from autod.checks.programs import (
    VENV_DIRS,
    ProgramError,
    exposures,
    find_venv,
    hidden_hop,
    hidden_named,
    module_run,
    resolve_program,
    runtime_paths,
    shadowed_module,
)
from autod.config.settings import CheckConfig
from autod.linebreaks import lines_of
from autod.walk import remove_tree

__all__ = [
    "VENV_DIRS",
    "CheckResult",
    "ProgramError",
    "find_venv",
    "resolve_program",
    "run_check",
    "runtime_paths",
]

if TYPE_CHECKING:
    from autod.config.settings import Settings

log = structlog.get_logger("autod.checks.run")

REAPER = str(Path(reaper.__file__).resolve())


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
    # Source files (relative paths) the run created, changed or deleted (autod.checks.sourcefiles): tracked by
    # git, or new files that look like the source beside them. A verification that ran it fails.
    changed: list[str] = field(default_factory=list)
    # Other files it wrote: ignored by git, or untracked output (coverage reports, logs). Harmless.
    outputs: list[str] = field(default_factory=list)
    # How it ran: "bwrap", "off" (configured), "unsandboxed" (auto, bwrap unavailable), "" (not run).
    sandbox: str = ""
    # What each test did, from autod's recorder (autod.checks.pertest); None: no pytest reported.
    tests: pertest.PerTestReport | None = None
    # Whether the check runs pytest itself (so a run without `tests` ended before pytest could report).
    expects_tests: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def record(self) -> dict[str, object]:
        out: dict[str, object] = {"name": self.name, "exit_code": self.exit_code,
                                  "duration_ms": self.duration_ms}
        if self.tests is not None:
            out["tests"] = self.tests.record()
        return out


# ---------------------------------------------------------------------------------------------
# Running one check


def hidden_program(name: str, program: Path, hop: tuple[Path, str]) -> str:
    """The refusal of a check whose program leads into a place the sandbox hides (exit 126)."""
    where, how = hop
    return (
        f"cannot start check {name!r}: {program} leads to {where} ({how}), which the sandbox hides;"
        " autod binds back only what the config names, never what workspace files point at: recreate"
        " the workspace's venv from an interpreter the sandbox shows (/usr/bin/python3, or autod's own"
        f" {sys.base_prefix}), or add that interpreter's install directory to checks.expose"
    )


def hidden_file(name: str, hop: tuple[Path, str]) -> str:
    """The refusal of a check whose command line names a file the sandbox does not show (exit 126)."""
    return (f"cannot start check {name!r}: {hop[0]}, named on its command line, is not mounted in the"
            f" sandbox: {hop[1]}; move it into the workspace or a directory checks see, or rename it")


def _not_started(name: str, code: int, why: str, mode: str = "") -> CheckResult:
    return CheckResult(name, code, why, 0, error=why, sandbox=mode)


# bubblewrap's own messages when it cannot build the sandbox (bubblewrap.c, utils.c: die_with_error);
# printed before the command runs, so they are never the check's verdict on the code
BWRAP_SETUP_FAILED = (
    "bwrap: Can't ",
    "bwrap: Failed to ",
    "bwrap: Unable to ",
    "bwrap: Creating new namespace failed",
    "bwrap: No permissions to create new namespace",
    "bwrap: setting up uid map",
    "bwrap: setting up gid map",
)


def _start_failure(output: str, code: int, wrapper: str, program: Path) -> str | None:
    """bwrap's or the reaper's own message when the program could not be executed after all.

    bwrap's setup messages come before the command runs (its execvp failure only for the exact program:
    a check may run other programs that fail to start); either way the code was not judged."""
    first = (lines_of(output.lstrip()) or [""])[0]
    if wrapper == "bwrap" and code == 1 and (
        first.startswith(f"bwrap: execvp {program}:") or first.startswith(BWRAP_SETUP_FAILED)
    ):
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
    view = cwd if mount_at is None else Path(mount_at)  # where the check sees its workspace
    policy = sandbox.Policy.for_settings(settings, view)
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
    # `python -m MODULE`: a pytest.py (or pytest/) in the current directory would stand in for the
    # runner and print any verdict; the directory itself stays on sys.path (the project imports from it)
    # (with autod's import guard loaded, no workspace file can stand in for an installed module: only a
    # Python started isolated, which loads no guard, needs this refusal)
    judged = pertest.loads_into(argv)
    module = module_run(argv) if not judged else None
    stand_in = await asyncio.to_thread(shadowed_module, module, cwd) if module else None
    if stand_in is not None:
        why = (f"cannot start check {name!r}: {stand_in} in the workspace would run instead of the "
               f"installed `{module}` (`python -m` imports from the current directory first); "
               f"remove or rename it")
        return _not_started(name, 126, why, wrapper)
    private = None if wrapper == "bwrap" else await asyncio.to_thread(_private_dirs)
    env = sandbox.check_env(
        os.environ,
        fixed=sandbox.steady_hashes(os.environ),
        own={**check.env, **extra_env},
        secrets=policy.secrets,
        path_first=venv / "bin" if venv is not None else None,
        virtual_env=venv,
        home=sandbox.HOME_IN_SANDBOX if private is None else str(private / "home"),
        tmpdir="/tmp" if private is None else str(private / "tmp"),
    )
    command = [str(program), *argv[1:]]
    dirs = await asyncio.to_thread(pertest.make_dirs) if judged else None
    if dirs is not None:
        env.update(dirs.env(view, env))
    try:
        fin, wrapper_error = await _run_judged(
            name, check, cwd, view, env, command, argv, program, policy, verdict, wrapper, settings, venv,
            output_dir=output_dir, mount_at=mount_at, bind_back=bind_back, private=private, dirs=dirs,
        )
        if wrapper_error is not None:
            return wrapper_error
        tests = await asyncio.to_thread(pertest.load, dirs) if dirs is not None else None
    finally:
        if dirs is not None:
            await asyncio.to_thread(pertest.remove_dirs, dirs)
    assert fin is not None
    return await _result(name, check, cwd, fin, wrapper, program, settings, mount_at, tests,
                         expects_tests=judged and _runs_pytest(argv))


async def _run_judged(
    name: str, check: CheckConfig, cwd: Path, view: Path, env: dict[str, str], command: list[str],
    argv: list[str], program: Path, policy: sandbox.Policy, verdict: sandbox.Verdict | None, wrapper: str,
    settings: Settings | None, venv: Path | None, *, output_dir: Path | None, mount_at: Path | None,
    bind_back: Sequence[str], private: Path | None, dirs: pertest.JudgeDirs | None,
) -> tuple[_Finished | None, CheckResult | None]:
    """Run the command (sandboxed or under the reaper); (finished run, None) or (None, start error)."""
    made: list[Path] = []
    with contextlib.ExitStack() as stack:
        if wrapper == "bwrap":
            assert verdict is not None and verdict.bwrap is not None
            # A workspace without .git gets an empty read-only one: no check can `git init` a repository.
            if not os.path.lexists(mounts.real(view) / ".git"):
                stack.enter_context(mounts.git_placeholder(mounts.real(cwd)))
            expose = exposures(program, argv[1:], workspace=view, path=env["PATH"])
            scratch = settings is not None and mounts.real(view) != mounts.real(settings.workspace)
            if scratch and venv is not None and not venv.is_symlink():
                expose.append(venv)  # the fixer's scratch copy runs with the real workspace's venv
            writable = [p for p in (output_dir, dirs.out if dirs else None) if p is not None]
            table = sandbox.mount_table(cwd, policy, expose=expose, writable=writable, mount_at=mount_at,
                                        bind_back=bind_back, readonly=[dirs.lib] if dirs else [])
            hop = hidden_hop(program, env["PATH"], table)
            if hop is not None:
                return None, _not_started(name, 126, hidden_program(name, program, hop), wrapper)
            if named := hidden_named(argv[1:], workspace=view, table=table):
                return None, _not_started(name, 126, hidden_file(name, named), wrapper)
            full = sandbox.bwrap_argv(
                verdict.bwrap, command, workspace=cwd, env=env, network=check.network, mounts=table,
                mount_at=mount_at,
            )
            if mount_at is not None:  # what bwrap makes in the copy to hide autod's files is not the check's
                shown, copy = mounts.real(view), mounts.real(cwd)
                made = await asyncio.to_thread(mounts.copy_mount_points, table, shown, copy)
        else:
            full = [sys.executable, "-I", "-S", REAPER, str(program), *command]
        skip = [p for p in (policy.state_dir, output_dir) if p is not None]
        before = await asyncio.to_thread(snapshot, cwd, skip)
        pycs = await asyncio.to_thread(bytecode.present, cwd, skip) if dirs is not None else None
        try:
            async with heard.listening(dirs.channel if dirs else None):
                fin = await run_session(full, cwd=cwd, env=env, timeout_s=check.timeout_s,
                                        output_limit=check.output_limit_kb * 1024,
                                        pass_fds=dirs.channel.pass_fds() if dirs else ())
        except CannotStart as exc:
            return None, _not_started(name, 126, f"cannot start check {name!r}: {exc}", wrapper)
        finally:
            if private is not None:
                await asyncio.to_thread(remove_tree, private)
            if made:
                await asyncio.to_thread(mounts.remove_mount_points, made)
    after = await asyncio.to_thread(snapshot, cwd, skip)
    await asyncio.to_thread(bytecode.remove_written, cwd, pycs, name, skip)  # the code under test's
    await asyncio.to_thread(planted.after_run, cwd, before, after, name, in_place=mount_at is None)
    return _Finished(fin, before, after), None


@dataclass
class _Finished:
    run: Any  # autod.checks.process's finished session
    before: dict[str, tuple[int, ...]] | None
    after: dict[str, tuple[int, ...]] | None


async def _result(
    name: str, check: CheckConfig, cwd: Path, done: _Finished, wrapper: str, program: Path,
    settings: Settings | None, mount_at: Path | None, tests: pertest.PerTestReport | None, *,
    expects_tests: bool,
) -> CheckResult:
    """The CheckResult of a finished run: start failures, timeouts and what it changed."""
    fin, before, after = done.run, done.before, done.after
    tally.spend("checks", fin.duration_ms)
    output = fin.output.decode("utf-8", "replace")
    error = _start_failure(output, fin.exit_code, wrapper, program)
    if error is not None:
        code = 127 if "No such file" in error else 126
        why = f"check {name!r}: {error}"
        return CheckResult(name, code, output, fin.duration_ms, error=why, sandbox=wrapper)
    if fin.timed_out:
        output += f"\n[autod] check {name!r} timed out after {check.timeout_s:g}s and was killed"
    changed, outputs = changed_files(before, after), []
    if changed and not check.fixer:
        # a copy of the workspace (mount_at) has the real tree's paths: ask the real tree's git
        made = planted.created(before, after)  # a candidate's: source unless ignored
        changed, outputs = await sources_and_outputs(name, mount_at or cwd, changed, made, check.outputs)
    runners = runs_code(changed + outputs, settings) if mount_at is None else []
    if runners:
        # The sandbox kept them in the workspace, but the operator's own tools will run them later.
        log.error("check.wrote_code_runners", check=name, files=runners[:20],
                  fix="review and remove them: they make tools run code outside the sandbox")
    return CheckResult(
        name=name,
        exit_code=fin.exit_code,
        output=output,
        duration_ms=fin.duration_ms,
        timed_out=fin.timed_out,
        truncated=fin.truncated,
        changed=changed,
        outputs=outputs,
        sandbox=wrapper,
        tests=tests,
        expects_tests=expects_tests,
    )


def _runs_pytest(argv: Sequence[str]) -> bool:
    """Whether the command is pytest itself (`pytest`, `py.test`, `python [-X ...] -m pytest`)."""
    from autod.localize.spectrum import is_pytest

    return is_pytest(shlex.join(argv))


def _under_dir(path: Path, root: Path) -> bool:
    real, base = os.path.realpath(path), os.path.realpath(root)
    return real.startswith(base + os.sep)


def _private_dirs() -> Path:
    """A private HOME and TMPDIR for an unsandboxed run, removed after it."""
    root = Path(tempfile.mkdtemp(prefix="autod-check-"))
    (root / "home").mkdir()
    (root / "tmp").mkdir()
    return root


def sandbox_problem(
    name: str, check: CheckConfig, settings: Settings, *, probe: bool = False
) -> tuple[str, bool] | None:
    """(why, is it an error) when this check's program, or the workspace venv's python its PATH puts
    first, leads into a place the sandbox hides; for `autod config check` and start-up. The program:
    an error (the check is refused); only the venv's python: a warning (the check runs, but a python
    it starts will not). None without a working bwrap (nor `probe`)."""
    verdict = sandbox.probe() if probe else sandbox.cached_verdict()
    policy = sandbox.Policy.for_settings(settings, settings.workspace)
    if verdict is None or not verdict.works or policy.mode_for(check) == "off":
        return None
    try:
        argv = shlex.split(check.run)
        venv = find_venv(settings.workspace)
        host_path = os.environ.get("PATH", os.defpath)
        program = resolve_program(argv[0], cwd=settings.workspace, venv=venv, path=host_path)
    except (ValueError, IndexError, ProgramError):
        return None  # reported as a program problem already
    path = f"{venv / 'bin'}{os.pathsep}{host_path}" if venv is not None else host_path
    expose = exposures(program, argv[1:], workspace=settings.workspace, path=path)
    table = sandbox.mount_table(settings.workspace, policy, expose=expose)
    hop = hidden_hop(program, path, table)
    if hop is not None:
        return hidden_program(name, program, hop), True
    if named := hidden_named(argv[1:], workspace=settings.workspace, table=table):
        return hidden_file(name, named), True
    python = venv / "bin" / "python" if venv is not None else None
    if python is not None and os.path.lexists(python) and (hop := hidden_hop(python, path, table)):
        return hidden_program(name, python, hop).replace("cannot start check", "check"), False
    return None
