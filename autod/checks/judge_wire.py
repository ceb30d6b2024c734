"""How the recorder speaks to autod: the key it seals with (`_take_key`), its JSON and its HMAC, written
out with builtin types' methods only, and its channel (`_tell`).

Copied as `autod_wire.py` beside the recorder (autod.checks.judge_plugin), which imports it before any
of the project's code has run and keeps its four functions. It runs in the project's own Python
(standard library only, syntax old Pythons read), and it stays in `sys.modules`: its namespace is one
of the runner's parts the recorder compares (`_RUNNER_ROOTS`), so a function of it rebound is named.
"""

import hashlib
import os

_sha256 = hashlib.sha256
_len, _isinstance, _sorted, _ord, _str, _int = len, isinstance, sorted, ord, str, int
_dict, _list, _tuple, _set, _frozenset, _bytes = dict, list, tuple, set, frozenset, bytes
_open, _read, _close = os.open, os.read, os.close
_O_KEYS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0) | \
    getattr(os, "O_CLOEXEC", 0)


def _quote(s):
    s = _str.__str__(s)  # a plain `str` (of a subclass too), whose methods nobody can patch
    if s.isascii() and s.isprintable() and '"' not in s and "\\" not in s:
        return '"' + s + '"'  # nothing to escape
    out = []
    for ch in s:
        c = _ord(ch)
        if ch == '"' or ch == "\\" or c < 0x20 or c > 0x7E:
            if c > 0xFFFF:
                c -= 0x10000
                out.append(f"\\u{0xD800 + (c >> 10):04x}\\u{0xDC00 + (c & 0x3FF):04x}")
            else:
                out.append(f"\\u{c:04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _json(o):
    """JSON of the record's plain values, ASCII only (what `json.dumps` would say, without json)."""
    if o is True:
        return "true"
    if o is False:
        return "false"
    if o is None:
        return "null"
    if _isinstance(o, _int):
        return f"{o:d}"
    if _isinstance(o, _str):
        return _quote(o)
    if _isinstance(o, _dict):
        return "{" + ",".join([_quote(_str(k)) + ":" + _json(o[k]) for k in _sorted(o)]) + "}"
    if _isinstance(o, (_list, _tuple, _set, _frozenset)):
        return "[" + ",".join([_json(v) for v in o]) + "]"
    return _quote(_str(o))


def _mac(key, msg):
    """HMAC-SHA256 (RFC 2104), written out: `hmac` is a module the code under test could rebind."""
    block = key + b"\x00" * (64 - _len(key))
    inner = _sha256(_bytes([b ^ 0x36 for b in block]) + msg).digest()
    return _sha256(_bytes([b ^ 0x5C for b in block]) + inner).hexdigest()


def _take_key():
    """One key from autod's pipe (a FIFO read without blocking), or None: none left, no pipe."""
    path = os.environ.get("_AUTOD_JUDGE_KEYS")
    if not path:
        return None
    try:
        fd = _open(path, _O_KEYS)
    except OSError:
        return None
    try:
        data = _read(fd, 65)
    except OSError:
        return None
    finally:
        _close(fd)
    if _len(data) != 65 or data[64:] != b"\n":
        return None
    try:
        return _bytes.fromhex(data[:64].decode("ascii"))
    except ValueError:
        return None


def _channel():
    """The socket autod hears the recorder on, as (descriptor, inode), when `$_AUTOD_JUDGE_HEARD` names
    one this process holds; None in a pytest a test started with its descriptors closed."""
    fd, _, ino = (os.environ.get("_AUTOD_JUDGE_HEARD") or "").partition(":")
    try:
        st = os.fstat(_int(fd))
    except (ValueError, OSError):
        return None
    return (_int(fd), st.st_ino) if st.st_mode & 0o170000 == 0o140000 and _str(st.st_ino) == ino else None


_HEARD = _channel()


def _tell(kind, fp, *fields, _heard=_HEARD, _fstat=os.fstat, _write=os.write, _json=_json, _len=len,
          _exit=os._exit):
    """Tell autod what a recorder just heard (autod.checks.heard), under its record's fingerprint `fp`
    ("": a recorder with no key, which says nothing), before any more of the project's code runs. A
    message sent on that socket can be neither taken back nor run into by another writer, so a later
    edit of the recorder's state changes nothing autod heard. What it is told with is bound here, not
    looked up in a module. A channel that is no longer autod's socket, or a message it refuses, ends
    the process: a session that took a key and left no record is a failed run."""
    if _heard is None or not fp:
        return
    msg = _json([kind, fp, *fields]).encode("ascii")
    try:
        if _fstat(_heard[0]).st_ino != _heard[1] or _write(_heard[0], msg) != _len(msg):
            raise OSError
    except OSError:
        _exit(3)
