"""autod's import guard for a check's Python: the workspace comes after the standard library and the
installed packages, whatever the import path says.

Copied as `sitecustomize.py` into a read-only directory that autod puts first on a check's PYTHONPATH,
so every Python process the check starts runs it at start-up, before any code of the workspace or the
runner. It runs inside the project's own Python (not autod's): standard library only, and syntax old
Pythons read. It wraps the standard path finder (`importlib.machinery.PathFinder`, in place, so
that import hooks which call it directly are covered too) so that, for a top-level module, it:

1. looks first in the import path's entries outside the workspace (the standard library, the venv's
   site-packages, autod's directory) and takes what it finds there;
2. only then looks everywhere, as Python would.

So a file the workspace adds (`textwrap.py`, `pytest.py`, `_pytest/`, `pluggy.py`, any name the
runner or a library it loads imports, now or later) can never stand in for one of those, whichever
directory pytest or `python -m` put first on `sys.path`. And no module of the workspace is loaded from
bytecode (`_no_workspace_bytecode`): a `.pyc` there may be the candidate's own. Only the top-level
modules of a distribution pip installed from the workspace itself (its `direct_url.json` names a
`file://` path inside it) resolve as usual, so a project installed into its own venv without `-e`
still tests its checkout.

Distribution metadata under the workspace (`*.dist-info`, `*.egg-info`) is still readable (versions,
files), but declares no entry points: a `pytest11` plugin or a console script cannot be registered by
a file in the workspace.
"""

import os
import sys


def _install():
    ws, prefixes = _where()
    if not ws:
        return
    own = _built_here(ws) - set(getattr(sys, "stdlib_module_names", ()))

    import importlib.machinery

    base = importlib.machinery.PathFinder
    verdicts = {}

    def trusted(entry):
        """An import path entry outside the workspace, or the installed part of one inside it."""
        if not isinstance(entry, str):
            return False
        try:
            real = verdicts[entry]
        except KeyError:
            real = verdicts[entry] = _classify(entry, ws, prefixes)
        return real

    find_spec = base.find_spec  # bound: called alike whether a class or a static method
    find_distributions = getattr(base, "find_distributions", None)

    def guarded_find_spec(name, path=None, target=None):
        """The standard path finder, asked first about the trusted part of the import path."""
        if path is None and name not in own:
            spec = find_spec(name, [e for e in sys.path if trusted(e)], target)
            if spec is not None:
                return spec
        return _sourced(find_spec(name, path, target), name, trusted)

    def guarded_distributions(*args, **kwargs):
        for dist in find_distributions(*args, **kwargs):
            where = getattr(dist, "_path", None)
            if where is not None and not trusted(os.path.dirname(str(where))):
                dist = _without_entry_points(dist)
            yield dist

    # Patched on the class itself, not only in sys.meta_path: pytest's assertion rewriter (and other
    # import hooks) call PathFinder.find_spec directly.
    # the same kind of method as the one it replaces: callers keep `PathFinder.find_spec` as a class
    # attribute of their own (pytest's rewriter does), where a plain function would be bound to them
    _replace(base, "find_spec", guarded_find_spec)
    if find_distributions is not None:
        _replace(base, "find_distributions", guarded_distributions)
    _no_workspace_bytecode(trusted)


def _no_workspace_bytecode(trusted):
    """No module of the workspace is loaded from bytecode: Python compiles it from its source, and
    neither reads nor writes a cached `.pyc` for it (`__pycache__`), nor loads a `.pyc` that has no
    source. The check runs the code under test with the workspace writable, so a `.pyc` there may have
    been written by the candidate itself, in this run or an earlier one (a rolled-back candidate's
    files outside git's view stay): a test module's cache whose code passes, under the source's own
    hash. The venv's and the standard library's bytecode, which a check cannot write, is read as
    before."""
    try:
        import importlib._bootstrap_external as external
    except ImportError:
        return
    cache_from_source = external.cache_from_source

    def guarded_cache_from_source(path, *args, **kwargs):
        if not trusted(os.path.dirname(os.fspath(path))):
            raise NotImplementedError("autod: no bytecode of the workspace's modules during a check")
        return cache_from_source(path, *args, **kwargs)

    external.cache_from_source = guarded_cache_from_source
    sourceless = external.SourcelessFileLoader
    get_code = sourceless.get_code

    def guarded_get_code(self, fullname):
        path = self.get_filename(fullname)
        if not trusted(os.path.dirname(os.fspath(path))):
            raise ImportError("autod: " + str(path) + " is bytecode without source in the workspace; a"
                              " check does not load it", name=fullname, path=path)
        return get_code(self, fullname)

    sourceless.get_code = guarded_get_code


def _sourced(spec, name, trusted):
    """`spec`, unless it loads bytecode without source from the workspace (a `helper/__init__.pyc`
    shadows `helper.py`): then the source module it stands before, if there is one, else nothing."""
    import importlib.machinery
    import importlib.util

    if spec is None or not isinstance(spec.loader, importlib.machinery.SourcelessFileLoader):
        return spec
    origin = spec.origin or ""
    if trusted(os.path.dirname(origin)):
        return spec
    where = os.path.dirname(origin)
    if os.path.basename(origin).startswith("__init__."):
        where = os.path.dirname(where)
    source = os.path.join(where, name.rpartition(".")[2] + ".py")
    return importlib.util.spec_from_file_location(name, source) if os.path.isfile(source) else None


def _replace(cls, name, func):
    if isinstance(cls.__dict__.get(name), classmethod):
        setattr(cls, name, classmethod(lambda _cls, *a, **k: func(*a, **k)))
    else:
        setattr(cls, name, staticmethod(func))


def _built_here(ws):
    """Top-level module names of the installed distributions pip built from the workspace itself."""
    names = set()
    try:
        import json
        from importlib.metadata import distributions
        from urllib.parse import unquote, urlparse
    except ImportError:
        return names
    for dist in distributions():
        try:
            url = json.loads(dist.read_text("direct_url.json") or "{}").get("url", "")
            parsed = urlparse(url)
            if parsed.scheme != "file":
                continue
            real = os.path.realpath(unquote(parsed.path))
            if real != ws and not real.startswith(ws + os.sep):
                continue
            top = dist.read_text("top_level.txt")
            if top:
                names.update(n.strip() for n in top.split() if n.strip())
                continue
            for f in dist.files or ():
                parts = str(f).split("/")
                if len(parts) == 1 and parts[0].endswith(".py"):
                    names.add(parts[0][:-3])
                elif len(parts) > 1 and not parts[0].endswith((".dist-info", ".data")):
                    names.add(parts[0])
        except Exception:
            continue
    return names


def _where():
    """The workspace (real path, "" when autod did not say) and the interpreter's own prefixes."""
    ws = os.environ.get("_AUTOD_JUDGE_WS")
    prefixes = []
    for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, getattr(sys, "base_exec_prefix", sys.prefix)):
        real = os.path.realpath(p)
        if real not in prefixes:
            prefixes.append(real)
    return (os.path.realpath(ws) if ws else ""), prefixes


def _classify(entry, ws, prefixes):
    real = os.path.realpath(entry or os.getcwd())
    if real != ws and not real.startswith(ws + os.sep):
        return True
    for p in prefixes:
        if real == p or real.startswith(p + os.sep):
            return True
    parts = real.split(os.sep)
    return "site-packages" in parts or "dist-packages" in parts


def _without_entry_points(dist):
    try:
        from importlib.metadata import PathDistribution
    except ImportError:
        return dist

    class NoEntryPoints(PathDistribution):
        def read_text(self, filename):
            if filename == "entry_points.txt":
                return None
            return PathDistribution.read_text(self, filename)

    try:
        return NoEntryPoints(dist._path)
    except Exception:
        return dist


def _chain():
    """Run the sitecustomize this one stands before (the venv's or the system's), as Python would."""
    here = os.path.realpath(os.path.dirname(os.path.abspath(__file__)))
    ws, prefixes = _where()
    import importlib.machinery
    import importlib.util

    for entry in list(sys.path):
        if not isinstance(entry, str) or os.path.realpath(entry or os.getcwd()) == here:
            continue
        if ws and not _classify(entry, ws, prefixes):
            continue  # never the workspace's own sitecustomize
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", [entry])
        if spec is None or spec.loader is None:
            continue
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            sys.stderr.write("Error in sitecustomize; set PYTHONVERBOSE for traceback:\n" + repr(exc) + "\n")
        return


def _refuse_reach():
    """A candidate's check: its changed files may not reach into the runner (autod.checks.judge_reach)."""
    if not os.environ.get("_AUTOD_JUDGE_CHANGED"):
        return
    try:
        __import__("autod_reach")  # installs the hook as it is imported
    except Exception as exc:  # a Python without audit hooks (before 3.8): the runner comparison still holds
        sys.stderr.write("autod: the reach guard did not load: " + repr(exc) + "\n")
    sys.modules.pop("autod_reach", None)  # installed: not importable by name


if __name__ == "sitecustomize":
    _install()
    _refuse_reach()
    _chain()
