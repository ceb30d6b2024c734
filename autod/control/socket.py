"""The control socket: one JSON request line in, one JSON response line out, mode 0600.

The socket lives in a private directory (the state dir, 0700, or systemd's RuntimeDirectory); a path
too long for AF_UNIX is bound and reached through the directory's descriptor, never through a
predictable name in /tmp, and the client refuses a socket another local user could have planted.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import stat
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import structlog

from autod import logs
from autod.checks import process
from autod.config.settings import Settings
from autod.control import peers

log = structlog.get_logger("autod.control.socket")

MAX_REQUEST = 1 << 20
_SUN_PATH_MAX = 107  # bytes of a path in sockaddr_un (108 with its NUL)
Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


def socket_path(settings: Settings) -> Path:
    """$RUNTIME_DIRECTORY/autod.sock under systemd, else <state_dir>/autod.sock; never a shared /tmp name.

    The unit's RuntimeDirectory= sets RUNTIME_DIRECTORY for the daemon, and the installed `autod`
    wrapper sets the same for the CLI, so both meet at /run/autod/autod.sock. A path longer than
    AF_UNIX allows is reached through the directory's file descriptor (`short_name`).
    """
    return settings.control_socket


class ControlPathError(Exception):
    """The control socket cannot be used safely; the message says what to change."""


@contextlib.contextmanager
def short_name(path: Path) -> Iterator[str]:
    """A name for `path` that fits AF_UNIX's 108 bytes: the path itself, or /proc/self/fd/N/<name>.

    N is an O_PATH descriptor of the socket's own (private) directory, so a deep state dir never
    needs a predictable name in a shared directory such as /tmp.
    """
    if len(os.fsencode(path)) <= _SUN_PATH_MAX:
        yield str(path)
        return
    flags = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path.parent, flags)
    except OSError as exc:
        why = f"cannot open the control socket's directory {path.parent}: {exc.strerror}"
        raise ControlPathError(why) from None
    try:
        if not os.path.isdir(f"/proc/self/fd/{fd}"):
            raise ControlPathError(
                f"the control socket path {path} is longer than AF_UNIX allows and /proc is not available"
                " to reach it by its directory: use a shorter state_dir, or run under systemd"
                " (RuntimeDirectory=)"
            )
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


def check_trusted(path: Path) -> None:
    """Refuse a socket another local user could have put there (ControlPathError naming why).

    The socket must be a socket owned by us, root, or its directory's owner; its directory must not
    be writable by group or others; and no directory above it may be writable by others unless it
    is sticky (so nobody else can rename the directory away and plant their own).
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ControlPathError(f"cannot inspect the control socket {path}: {exc.strerror}") from None
    parent = Path(os.path.realpath(path.parent))
    dst = os.stat(parent)
    me = os.geteuid()
    problem = None
    if not stat.S_ISSOCK(st.st_mode):
        problem = "it is not a socket"
    elif st.st_uid not in (me, 0, dst.st_uid):
        problem = f"it belongs to uid {st.st_uid}, not to you, root or the owner of its directory"
    elif dst.st_mode & 0o022:
        problem = f"its directory {parent} is writable by other users (mode {stat.S_IMODE(dst.st_mode):o})"
    else:
        for above in parent.parents:
            ast = os.stat(above)
            if ast.st_mode & 0o002 and not ast.st_mode & stat.S_ISVTX:
                problem = f"{above} is writable by every user"
                break
    if problem:
        raise ControlPathError(
            f"refusing the control socket {path}: {problem}; autod only talks to a socket in a private"
            " directory (the state dir, 0700, or systemd's RuntimeDirectory)"
        )


class ControlServer:
    def __init__(self, path: Path, handler: Handler) -> None:
        self.path = path
        self.handler = handler
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        """Listen on `path`. The socket is bound under a name of its own in the same directory and put
        at `path` (an atomic rename) only once it listens: a client that finds the path can connect
        (bound but not yet listening, it would be refused, and a CLI command given as the daemon starts
        would say it is down)."""
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        new = self.path.with_name(f".{self.path.name}.{os.getpid()}.new")
        for left in (self.path, new):  # a killed daemon's socket refuses: gone until this one listens
            with contextlib.suppress(FileNotFoundError):
                left.unlink()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            old = os.umask(0o177)  # the socket is born 0600: no window where others could connect
            try:
                with short_name(new) as name:
                    sock.bind(name)
            finally:
                os.umask(old)
            os.chmod(new, 0o600)
            self._server = await asyncio.start_unix_server(self._serve, sock=sock, limit=MAX_REQUEST)
            os.replace(new, self.path)
        except BaseException:
            sock.close()
            with contextlib.suppress(FileNotFoundError):
                new.unlink()
            raise

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with logs.survive("control.stop_failed"):
                await asyncio.wait_for(self._server.wait_closed(), 2)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            # Who is calling is decided before anything of the request is read or parsed; the line is
            # still taken off the socket so a refused client reads the answer, not a broken pipe.
            why = self._refused(writer)
            try:
                line = await asyncio.wait_for(reader.readline(), timeout=10)
            except ValueError:  # longer than the reader's limit: answer instead of killing the task
                line = None
            try:
                if why is not None:
                    response = {"ok": False, "error": f"refused: {why}"}
                elif line is None:
                    raise ValueError(f"longer than {MAX_REQUEST} bytes")
                else:
                    request = json.loads(line)
                    if not isinstance(request, dict) or not isinstance(request.get("cmd"), str):
                        raise ValueError("request must be an object with a 'cmd'")
                    response = await self.handler(request)
            except (ValueError, json.JSONDecodeError) as exc:
                response = {"ok": False, "error": f"bad request: {exc}"}
            except Exception as exc:
                log.exception("control.command_failed")
                response = {"ok": False, "error": f"internal error: {type(exc).__name__}"}
            writer.write(json.dumps(response, default=str).encode() + b"\n")
            await writer.drain()
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError), logs.survive("control.close_failed"):
                await writer.wait_closed()  # a peer that hung up first is the common case, not news

    @staticmethod
    def _refused(writer: asyncio.StreamWriter) -> str | None:
        """Why the peer may not talk to the daemon (autod.control.peers), logged; None when it may."""
        sock = writer.get_extra_info("socket")
        try:
            pid, uid, _ = peers.peer_credentials(sock)
        except (OSError, AttributeError, ValueError):
            why: str | None = "its credentials cannot be read"
            pid = uid = -1
        else:
            why = peers.refusal(pid, uid, sessions=process.running_sessions())
        if why is not None:
            log.warning("control.peer_refused", pid=pid, uid=uid, why=why)
        return why


class DaemonDown(Exception):
    pass


def request(settings: Settings, cmd: str, timeout: float = 600, **args: Any) -> dict[str, Any]:
    """Blocking client used by the CLI. Raises DaemonDown when nothing listens, ControlPathError when
    the socket is not one autod would have made (another user's, in a shared directory)."""
    path = socket_path(settings)
    try:
        check_trusted(path)
    except FileNotFoundError as exc:
        raise DaemonDown(str(path)) from exc
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        try:
            with short_name(path) as name:
                s.connect(name)
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            raise DaemonDown(str(path)) from exc
        s.sendall(json.dumps({"cmd": cmd, **args}).encode() + b"\n")
        buf = bytearray()
        while not buf.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    finally:
        s.close()
    if not buf:
        raise DaemonDown("the daemon closed the connection")
    return json.loads(buf)
