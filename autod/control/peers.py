"""Who may talk to the daemon's control socket: decided from the kernel's word (SO_PEERCRED), not the
socket's path.

The socket lives in a private directory the check sandbox hides; this is the second wall, for the
day something exposes it anyway (a Unix socket accepts connections through a read-only bind). A
peer is refused when
- its uid is neither the daemon's nor root's;
- its process is not visible from the daemon's PID namespace (SO_PEERCRED says pid 0);
- it lives in another PID namespace than the daemon (every bwrap check has its own);
- it descends from the daemon, or its session or process group is a running check's: whatever a
  check started, in the sandbox or (with `sandbox: off`) under the reaper, which re-parents
  double-forked and `setsid` children to itself.
The operator's CLI passes all four: same user (or root), the host's PID namespace, started from a
shell, not by the daemon. The mount namespace is deliberately not compared: under systemd the daemon
has one of its own (PrivateTmp=, ProtectSystem=) and the operator's CLI does not, while a bwrap
check is caught by its PID namespace and its ancestry anyway. Where a peer's namespace cannot be
read (another user namespace: the unit's PrivateUsers=), its ancestry still can.
"""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Collection

__all__ = ["peer_credentials", "refusal"]

_MAX_DEPTH = 4096


def peer_credentials(sock: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end of a connected AF_UNIX socket."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, gid = struct.unpack("3i", raw)
    return pid, uid, gid


def _stat(pid: int) -> tuple[int, int, int] | None:
    """(ppid, pgrp, session) from /proc/PID/stat, or None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    # the command name may hold spaces and parentheses; the fields after the last ')' are fixed
    fields = data[data.rindex(b")") + 2 :].split()
    try:
        return int(fields[1]), int(fields[2]), int(fields[3])
    except (IndexError, ValueError):
        return None


def _ns(pid: int | str, kind: str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/{kind}")
    except OSError:
        return None  # another user namespace's process (systemd's PrivateUsers=), or gone


def refusal(
    pid: int,
    uid: int,
    *,
    sessions: Collection[int] = (),
    me: int | None = None,
    euid: int | None = None,
) -> str | None:
    """Why this peer may not use the control socket, or None. `sessions`: the running checks' leaders."""
    me = os.getpid() if me is None else me
    euid = os.geteuid() if euid is None else euid
    if uid not in (euid, 0):
        return f"uid {uid} is neither the daemon's ({euid}) nor root"
    if pid <= 0:
        return "the peer is outside the daemon's PID namespace"
    if pid == me:
        return None  # the daemon itself (in-process callers)
    mine, theirs = _ns("self", "pid"), _ns(pid, "pid")
    if mine is not None and theirs is not None and mine != theirs:
        return "the peer runs in another PID namespace (a check's sandbox)"
    first = _stat(pid)
    if first is None:
        # Invisible to us (hidepid, ProtectProc=invisible) means another user's process, which a
        # check never is; our own user's process we must be able to see.
        return "cannot inspect the peer process" if uid == euid and os.path.isdir("/proc/self") else None
    _, pgrp, session = first
    if pgrp in sessions or session in sessions:
        return "the peer belongs to a running check's session"
    cur = pid
    for _ in range(_MAX_DEPTH):
        got = _stat(cur)
        if got is None:
            return None
        parent = got[0]
        if parent == me or parent in sessions:
            return "the peer was started by the daemon (a check or what it left behind)"
        if parent <= 1:
            return None
        cur = parent
    return "the peer's ancestry is too deep to inspect"
