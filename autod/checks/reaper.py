"""Run one command and take everything it started down with it: the session keeper of unsandboxed checks.

autod starts it as `python -I -S reaper.py PROGRAM ARGV0 [ARG...]` in a new session. It makes itself
a child subreaper (PR_SET_CHILD_SUBREAPER), so whatever the command leaves behind (a `setsid` daemon,
a double fork) is re-parented to it instead of to init and stays findable. When the command exits,
or autod sends SIGTERM (a timeout, a stop), or autod dies (PR_SET_PDEATHSIG), it kills every
descendant and then ends with the command's own status. Under bwrap the PID namespace does this.

Standard library only, and no autod import: it must start fast and apart from the daemon's code.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
TERM_GRACE_S = 1.0  # after SIGTERM, how long the command may take to exit before everything is killed
SWEEP_ROUNDS = 500
EXEC_FAILED = "autod-reaper: cannot execute"


class _Stop(Exception):
    pass


def _stop(signum: int, frame: object) -> None:
    raise _Stop


def descendants(root: int) -> list[int]:
    """Live (non-zombie) descendants of `root`, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # The command name may hold spaces and parentheses; the fields after the last ')' are fixed.
        fields = stat[stat.rindex(b")") + 2 :].split()
        if fields[0] in (b"Z", b"X"):
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    out: list[int] = []
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            out.append(child)
            stack.append(child)
    return out


def signal_all(sig: int) -> int:
    pids = descendants(os.getpid())
    for pid in pids:
        # gone meanwhile, or a setuid program we may not signal
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
    return len(pids)


def reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def sweep() -> None:
    """SIGKILL every descendant until none is left; orphans come back to us as the subreaper."""
    for _ in range(SWEEP_ROUNDS):
        reap()
        if not signal_all(signal.SIGKILL):
            reap()
            return
        time.sleep(0.002)


def wait_main(pid: int, deadline: float | None) -> int | None:
    """The command's wait status; None if the deadline passes first. Reaps orphans meanwhile."""
    while True:
        try:
            got, status = _wait_one(deadline)
        except ChildProcessError:
            return None
        if got == pid:
            return status
        if got == 0 and deadline is not None and time.monotonic() >= deadline:
            return None


def _wait_one(deadline: float | None) -> tuple[int, int]:
    if deadline is None:
        return os.waitpid(-1, 0)
    got, status = os.waitpid(-1, os.WNOHANG)
    if got == 0:
        time.sleep(0.01)
    return got, status


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print("usage: reaper.py PROGRAM ARGV0 [ARG...]", file=sys.stderr)
        return 2
    program, args = argv[1], argv[2:]
    libc = ctypes.CDLL(None, use_errno=True)
    parent = os.getppid()
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:
        return 1  # autod died before the death signal was armed
    stops = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    signal.pthread_sigmask(signal.SIG_BLOCK, stops)
    for s in stops:
        signal.signal(s, _stop)
    pid = os.fork()
    if pid == 0:
        for s in stops:
            signal.signal(s, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, stops)
        try:
            os.execv(program, args)
        except OSError as exc:
            os.write(2, f"{EXEC_FAILED} {program}: {exc.strerror}\n".encode())
            os._exit(126 if exc.errno in (errno.EACCES, errno.ENOEXEC, errno.EISDIR) else 127)
    status: int | None = None
    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, stops)
        status = wait_main(pid, None)
    except _Stop:
        for s in stops:
            signal.signal(s, signal.SIG_IGN)
        signal_all(signal.SIGTERM)
        status = wait_main(pid, time.monotonic() + TERM_GRACE_S)
    sweep()
    if status is None:
        return 137
    code = os.waitstatus_to_exitcode(status)
    if code < 0:  # end as the command did, so autod sees the same signal
        signal.signal(-code, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [-code])
        os.kill(os.getpid(), -code)
        return 128 - code
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
