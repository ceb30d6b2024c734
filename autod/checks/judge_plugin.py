"""autod's per-test recorder: a pytest plugin that writes what each test did, for the judge, sealed.

Copied as `autod_verdicts.py` into a read-only directory first on a check's PYTHONPATH and loaded by
`PYTEST_PLUGINS=autod_verdicts`, so every pytest the check starts (directly, through `make`, a script,
or `python -m pytest`) loads it from autod, never from the workspace. It runs inside the project's own
Python: standard library and pytest only, and syntax old Pythons read.

The code under test runs in the same process, so the recorder depends on nothing it could change with
plain Python (autod.checks.seal has the why and the whole scheme):

- When pytest imports it (before any conftest, test or code under test), it takes one key from autod's
  key pipe (`$_AUTOD_JUDGE_KEYS`), reads `$_AUTOD_JUDGE_OUT`, and keeps every function it will write
  with: module attributes rebound later (`json.dump`, `os.replace`, a builtin) are not the ones it
  calls. It writes its own JSON, with builtin types' methods only.
- The moment pytest has registered it (before any conftest loads), it leaves `sys.modules`:
  `import autod_verdicts` gives a new module that never held this session's key.
- It writes one record, `results-<fingerprint>.json` in `$_AUTOD_JUDGE_OUT`: {"seal", "mac", "body"},
  the body {"tests": {nodeid: outcome}, "collected": [...], "collect_errors": [...], "deselected":
  [...], "exitstatus": N, "complete": true, "worker": bool, "session": bool, "pid": N, "first": bool}
  and its HMAC-SHA256 under the key. `first`: the process's first recorder (a later one is a pytest
  run inside it, as pytester runs them, or a copy the code under test imported). An outcome is the
  worst of a test's phases: passed < xpassed < xfailed < skipped < failed < error (a failing setup or
  teardown). A session that ends before its last hook (a crash, `os._exit`, a kill) writes nothing,
  and autod reads a key taken with no record as a failed run, never a pass. Under pytest-xdist the
  controller's record has the outcomes; a worker's says only that it was one. A pytest that never ran
  a session (`--version`) records that.
- A process's first recorder that found no key (something emptied the pipe before pytest loaded it)
  ends the session with exit status 3: no record can speak for it, and pytest must not say it passed.
"""

import hashlib
import os
import sys

_RANK = {"passed": 0, "xpassed": 1, "xfailed": 2, "skipped": 3, "failed": 4, "error": 5}
_state = {"tests": {}, "collected": set(), "errors": [], "deselected": [], "worker": False, "written": False}

# what the record is written with, taken now, before any of the project's code has run
_open, _read, _write, _close, _replace, _getpid = os.open, os.read, os.write, os.close, os.replace, os.getpid
_join = os.path.join
_sha256 = hashlib.sha256
_len, _isinstance, _sorted, _ord, _str, _int = len, isinstance, sorted, ord, str, int
_dict, _list, _tuple, _set, _frozenset, _bytes, _getattr, _hasattr = \
    dict, list, tuple, set, frozenset, bytes, getattr, hasattr
_O_WRITE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_O_KEYS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0) | \
    getattr(os, "O_CLOEXEC", 0)
_OUT = os.environ.get("_AUTOD_JUDGE_OUT")


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


# the first recorder of this process (another one is a pytest run inside it, as pytester runs, or a
# copy the code under test imported: autod hears only the first, and two that say so are a failed run);
# only the first takes a key
_FIRST = os.environ.get("_AUTOD_JUDGE_FIRST") != str(_getpid())
os.environ["_AUTOD_JUDGE_FIRST"] = str(_getpid())
_KEY = _take_key() if _FIRST else None


def _quote(s):
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


def _record(exitstatus, session):
    """Write this session's sealed record, once; nothing without a key or a directory to write in."""
    if _state["written"] or not _OUT or _KEY is None:
        return
    _state["written"] = True
    worker = _state["worker"]
    body = _json({
        "tests": {} if worker else _state["tests"],
        "collected": [] if worker else _sorted(_state["collected"]),
        "collect_errors": [] if worker else _state["errors"],
        "deselected": [] if worker else _state["deselected"],
        "exitstatus": _int(exitstatus),
        "complete": True,
        "worker": worker,
        "session": session,
        "pid": _getpid(),
        "first": _FIRST,
    })
    fp = _sha256(_KEY).hexdigest()[:16]
    doc = _json({"seal": fp, "mac": _mac(_KEY, body.encode("ascii")), "body": body}).encode("ascii")
    path = _join(_OUT, "results-" + fp + ".json")
    tmp = path + ".tmp"
    try:
        fd = _open(tmp, _O_WRITE, 0o600)
        try:
            while doc:
                doc = doc[_write(fd, doc):]
        finally:
            _close(fd)
        _replace(tmp, path)
    except OSError:
        pass  # no record: autod reads the key taken without one as a failed run


def _outcome(report):
    when = _getattr(report, "when", "call")
    wasxfail = _hasattr(report, "wasxfail")
    if report.outcome == "passed":
        return "xpassed" if wasxfail and when == "call" else "passed"
    if report.outcome == "skipped":
        return "xfailed" if wasxfail else "skipped"
    if report.outcome == "failed":
        return "failed" if when == "call" else "error"
    return None  # "rerun" and other plugins' outcomes: the final report decides


def pytest_plugin_registered(plugin, manager):
    # registered (this hook is called for this module the moment pytest registers it, before any
    # conftest loads): no longer importable by name, so `import autod_verdicts` in a conftest or the
    # code under test gives a fresh module, which never held this session's key
    if __name__ == "autod_verdicts" and sys.modules.get(__name__) is plugin:
        del sys.modules[__name__]


def pytest_configure(config):
    _state["worker"] = _hasattr(config, "workerinput")


def pytest_runtest_logreport(report):
    outcome = _outcome(report)
    if outcome is None:
        return
    tests = _state["tests"]
    now = tests.get(report.nodeid)
    if now is None or _RANK[outcome] > _RANK[now]:
        tests[report.nodeid] = outcome


def pytest_collectreport(report):
    if report.failed:
        _state["errors"].append(report.nodeid or "<session>")


def pytest_deselected(items):
    _state["deselected"].extend(_getattr(i, "nodeid", _str(i)) for i in items)


def pytest_collection_finish(session):
    _state["collected"].update(i.nodeid for i in session.items)


def pytest_sessionfinish(session, exitstatus):
    if _FIRST and _OUT and _KEY is None and not _state["worker"]:
        # no key to seal with: the pipe was empty (something took the keys first) or gone. Whatever
        # records there are do not speak for this session, so pytest must not say it passed either.
        sys.stderr.write("autod_verdicts: no key to seal this session's results with; failing it\n")
        session.exitstatus = 3
        return
    _record(exitstatus, True)


def pytest_unconfigure(config):
    _record(0, False)  # a pytest that ran no session (`--version`, a usage error) says so


try:  # pytest-xdist's controller learns each worker's collection through this hook
    import pytest

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(node, ids):
        _state["collected"].update(ids)

except Exception:  # an old pytest without hookimpl: the controller's collection is then unknown
    pass
