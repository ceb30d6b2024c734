"""Sealed verdicts: a pytest session's record counts only under a seal made with a key the code under
test never saw.

The recorder (autod.checks.judge_plugin) runs inside the pytest process, beside the code under test,
so whatever it writes the code under test could rewrite with plain Python: rebind a standard-library
function the recorder calls when it writes (`json.dump`), or rewrite the results file at exit
(`atexit`). Either turned a test the code under test had skipped into "passed", and with pytest's exit
status 0 for a skip the candidate was judged fixed. Closing each such route by name would miss the
next one, so the record is sealed instead:

- For each check run autod issues `KEYS` random keys through a FIFO in the run's `out/` directory
  (`FIFO`), whose read end it keeps open. A key is delivered once: reading it from the pipe takes it,
  and nothing reads a pipe without taking what it reads.
- The recorder takes one key when it is imported, which is before pytest imports any conftest, test or
  code under test, and keeps it, with every function it will write with, in the module pytest
  registered and then removed from `sys.modules` (so `import autod_verdicts` gives a fresh module that
  never held that key).
- It writes its record once, as `results-<fingerprint>.json`: the body (its own JSON, made with
  builtin types' methods only) and an HMAC-SHA256 of it under its key.
- autod reads back the keys still in the pipe: every key that was taken must have a record whose seal
  verifies, and every `results-*.json` must verify, or the run is a failed run (`Unsealed.why`).

So to make a verdict say "passed" the code under test would need a key that was never in its reach by
plain Python: the key taken for its own session lives only in the recorder's memory, and one it takes
from the pipe itself seals a second record, which can only add outcomes, and a test's outcome is the
worst of all its records. Taking keys, deleting or corrupting records, swapping the FIFO for a file:
each makes the run a failed run, never a pass. What still reaches the key is what reaches into the
process (frames, `gc`, the plugin manager, `ctypes`, `/proc/self/mem`): the AST tripwire's domain
(autod.act.reach, docs/SECURITY.md).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autod.safety import safejson

__all__ = ["FIFO", "KEYS", "Keys", "fingerprint", "issue", "opened", "unsealed_why"]

FIFO = ".keys"  # in the run's out/ directory; `_AUTOD_JUDGE_KEYS` names it for the recorder
KEYS = 64  # pytest sessions of one check run that can seal a record (autod.checks.pertest hears as many)
KEY_BYTES = 32
RECORD = KEY_BYTES * 2 + 1  # a key in hex and a newline
FINGERPRINT = 16  # hex characters of sha256(key): a record's name for its key
_CHUNK = 1 << 16  # bytes a read of the pipe asks for (it holds 64 x 65)


def fingerprint(key: bytes) -> str:
    return hashlib.sha256(key).hexdigest()[:FINGERPRINT]


@dataclass
class Keys:
    """The keys of one check run: issued (fingerprint -> key), and the pipe's two ends autod holds."""

    path: Path
    issued: dict[str, bytes]
    read_fd: int
    write_fd: int
    left: set[str] = field(default_factory=set)  # what `unclaimed` read back

    def unclaimed(self) -> set[str]:
        """The fingerprints of the keys still in the pipe (blocking; reads it empty, once)."""
        data = b""
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(self.read_fd, _CHUNK):
                data += chunk
        self.left |= {fingerprint(k) for k in _keys(data)} & set(self.issued)
        return set(self.left)

    def close(self) -> None:
        for fd in (self.read_fd, self.write_fd):
            with contextlib.suppress(OSError):
                os.close(fd)


def issue(out: Path, count: int = KEYS) -> Keys:
    """Make the FIFO in `out` and put `count` fresh keys in it (blocking). `close` when the run is read."""
    path = out / FIFO
    os.mkfifo(path, 0o600)
    flags = os.O_NONBLOCK | os.O_CLOEXEC  # never waits; never inherited by a check's processes
    read_fd = os.open(path, os.O_RDONLY | flags)  # first: a FIFO opens for writing only with a reader
    try:
        write_fd = os.open(path, os.O_WRONLY | flags)
    except OSError:
        os.close(read_fd)
        raise
    keys = [secrets.token_bytes(KEY_BYTES) for _ in range(count)]
    data = b"".join(k.hex().encode() + b"\n" for k in keys)  # 64 x 65 bytes: well inside a pipe's buffer
    while data:
        data = data[os.write(write_fd, data):]
    return Keys(path, {fingerprint(k): k for k in keys}, read_fd, write_fd)


def opened(keys: Keys, data: bytes) -> tuple[str, dict[str, Any]] | None:
    """(fingerprint, body) of a record whose seal verifies under a key autod issued; None otherwise."""
    try:
        outer = safejson.loads(data)
    except ValueError:
        return None
    if not isinstance(outer, dict):
        return None
    fp, mac, body = outer.get("seal"), outer.get("mac"), outer.get("body")
    if not isinstance(fp, str) or not isinstance(mac, str) or not isinstance(body, str):
        return None
    key = keys.issued.get(fp)
    if key is None or not body.isascii():
        return None
    want = hmac.new(key, body.encode("ascii"), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(want, mac):
        return None
    try:
        doc = safejson.loads(body)
    except ValueError:
        return None
    return (fp, doc) if isinstance(doc, dict) else None


def unsealed_why(keys: Keys, names: list[str], sealed: dict[str, dict[str, Any]]) -> str:
    """Why the run's records cannot be trusted ("": they can): a record whose seal does not verify, a
    key taken whose session left no sealed record, or a FIFO that is no longer autod's."""
    if len(sealed) < len(names):
        return f"{len(names) - len(sealed)} result file(s) without a valid seal"
    try:
        st = os.lstat(keys.path)
    except OSError:
        return "the key pipe was removed"
    if not stat.S_ISFIFO(st.st_mode) or st.st_ino != os.fstat(keys.read_fd).st_ino:
        return "the key pipe was replaced"
    taken = set(keys.issued) - keys.unclaimed()
    missing = taken - set(sealed)
    if missing:
        return f"{len(missing)} pytest session(s) took a key and left no sealed record"
    return ""


def _keys(data: bytes) -> list[bytes]:
    """The whole key records in what was read back (a reader that took part of one leaves the rest
    misaligned: those keys count as taken)."""
    out = []
    while len(data) >= RECORD:
        rec, data = data[:RECORD], data[RECORD:]
        with contextlib.suppress(ValueError):
            if rec.endswith(b"\n"):
                out.append(bytes.fromhex(rec[:-1].decode("ascii")))
    return out
