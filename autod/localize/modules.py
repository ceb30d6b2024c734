"""One Python module as the index reads it: its definitions with their real spans, its imports, and
what each function uses (`parse_module`). The index (`autod.localize.index`) keeps one per file; a big
file is read by a child process (`autod.localize.aside`), which gives back this same summary."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from autod import pyast
from autod.linebreaks import lines_of
from autod.localize.uses import dotted, dunders, uses


@dataclass(frozen=True)
class Definition:
    """A whole definition with its real span (decorators and multi-line signatures included)."""

    path: str
    qualname: str  # "f", "C", "C.method", "C.Inner.attr", "CONST"
    kind: str  # function | class | constant | attribute
    start: int  # first line, decorators included
    end: int  # last line
    header_end: int  # last line of the signature (through its colon); for data: the last line
    doc: str = ""  # first line of the docstring
    refs: tuple[str, ...] = ()  # dotted names read or called, in order (free names only)
    calls: tuple[str, ...] = ()  # dotted names called, in order
    # (local, dotted callee) for `x = Foo(...)`; (local, "=dotted") for an alias `f = mod.func`
    local_types: tuple[tuple[str, str], ...] = ()
    bases: tuple[str, ...] = ()  # classes: dotted base names
    alias: str = ""  # data: `OMD = OrderedMultiDict` names another definition
    dunders: tuple[str, ...] = ()  # functions: special methods their operators call (`a & b`: __and__)
    call_lines: tuple[tuple[str, int], ...] = ()  # functions: (dotted name called, line), line order

    @property
    def name(self) -> str:
        return self.qualname.rsplit(".", 1)[-1]

    @property
    def cls(self) -> str | None:
        """The enclosing class's qualname, for methods, nested classes and class attributes."""
        return self.qualname.rpartition(".")[0] or None

    @property
    def lines(self) -> str:
        return f"{self.start}-{self.end}"


@dataclass
class Module:
    path: str
    names: tuple[str, ...]  # dotted names it can be imported as, best first
    package: str  # for relative imports
    imports: dict[str, str] = field(default_factory=dict)  # local name -> dotted target
    stars: tuple[str, ...] = ()  # modules star-imported
    defs: dict[str, Definition] = field(default_factory=dict)  # qualname -> definition
    n_lines: int = 0
    error: str | None = None  # why it could not be parsed

    def enclosing(self, line: int) -> Definition | None:
        """The innermost function, method or class whose span holds `line`."""
        best: Definition | None = None
        for d in self.defs.values():
            inside = d.kind in ("function", "class") and d.start <= line <= d.end
            if inside and (best is None or d.start >= best.start):
                best = d
        return best

    def data_at(self, line: int) -> Definition | None:
        for d in self.defs.values():
            if d.kind in ("constant", "attribute") and d.start <= line <= d.end:
                return d
        return None



# What CPython holds for a summary, in bytes (its object graph, sys.getsizeof, on 3.11; tests/unit/
# test_localize_weight.py): a definition's object and its fields, a name in one of its tuples, a (name,
# line) pair, an import. A summary is about twice its source for ordinary code and 15-35 times for
# many one-line definitions, so the index and its cache are bounded by this estimate, not by the
# source's bytes or the number of files.
DEF_BYTES = 560
NAME_BYTES = 57  # a str object's own size (plus its characters) and its slot in a tuple
PAIR_BYTES = 72
IMPORT_BYTES = 120  # a dict entry (and a name for its key or target: the parser interns the other)


def weight(mod: Module) -> int:
    """The bytes `mod` is estimated to hold (0.9-1.7x its object graph on generated and real modules)."""
    total = 400 + len(mod.path) + sum(NAME_BYTES + len(n) for n in mod.names)
    total += sum(IMPORT_BYTES + NAME_BYTES + len(k) + len(v) for k, v in mod.imports.items())
    for d in mod.defs.values():
        total += DEF_BYTES + 2 * len(d.qualname) + len(d.doc) + len(d.alias)
        total += sum(NAME_BYTES + len(n) for group in (d.refs, d.calls, d.bases, d.dunders) for n in group)
        total += PAIR_BYTES * (len(d.call_lines) + len(d.local_types))
    return total


def parse_module(rel: str, text: str, names: tuple[str, ...]) -> Module:
    is_pkg = rel.endswith("__init__.py")
    first = names[0] if names else ""
    package = first if is_pkg else first.rpartition(".")[0]
    mod = Module(rel, names, package, n_lines=text.count("\n") + 1)
    try:
        tree = pyast.parse(text, filename=rel)
    except (SyntaxError, ValueError) as exc:
        mod.error = f"{type(exc).__name__}: {getattr(exc, 'lineno', '?')}"
        return mod
    stars: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    mod.imports[a.asname] = a.name
                else:
                    mod.imports.setdefault(a.name.split(".")[0], a.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node.module, node.level, package)
            for a in node.names:
                if a.name == "*":
                    stars.append(base)
                else:
                    mod.imports[a.asname or a.name] = f"{base}.{a.name}" if base else a.name
    mod.stars = tuple(stars)
    _collect(mod, tree.body, prefix="", in_class=False)
    return mod


def _absolute(module: str | None, level: int, package: str) -> str:
    if not level:
        return module or ""
    parts = package.split(".") if package else []
    if level > 1:
        parts = parts[: len(parts) - (level - 1)] if level - 1 <= len(parts) else []
    base = ".".join(parts)
    return f"{base}.{module}" if module and base else (module or base)


def _start(node: ast.AST) -> int:
    decos = getattr(node, "decorator_list", None) or []
    return min([node.lineno, *(d.lineno for d in decos)])  # type: ignore[attr-defined]


def _header_end(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> int:
    """The signature's last line: the line before the body starts (or the def line of a one-liner)."""
    first = node.body[0]
    body_line = _start(first)
    return max(node.lineno, body_line - 1) if body_line > node.lineno else node.lineno


def _doc(node: ast.AST) -> str:
    try:
        doc = ast.get_docstring(node)  # type: ignore[arg-type]
    except TypeError:
        return ""
    return lines_of(doc.strip())[0][:200] if doc and doc.strip() else ""


def _collect(mod: Module, body: list[ast.stmt], prefix: str, in_class: bool) -> None:
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            q = prefix + node.name
            refs, calls, types, sites = uses(node)
            mod.defs[q] = Definition(
                mod.path, q, "function", _start(node), node.end_lineno or node.lineno, _header_end(node),
                _doc(node), refs, calls, types, dunders=dunders(node), call_lines=sites,
            )
        elif isinstance(node, ast.ClassDef):
            q = prefix + node.name
            bases = tuple(b for b in (dotted(x) for x in node.bases) if b)
            refs = tuple(b for b in (dotted(x) for x in node.decorator_list) if b)
            mod.defs[q] = Definition(
                mod.path, q, "class", _start(node), node.end_lineno or node.lineno, _header_end(node),
                _doc(node), refs + bases, (), (), bases,
            )
            _collect(mod, node.body, q + ".", in_class=True)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = node.value
            refs, calls, _, _ = uses(value) if value is not None else ((), (), (), ())
            for t in targets:
                for name in _target_names(t):
                    q = prefix + name
                    if q in mod.defs and mod.defs[q].kind in ("function", "class"):
                        continue  # `f = decorate(f)` after the def: the def is what a reader wants
                    end = node.end_lineno or node.lineno
                    alias = dotted(value) if isinstance(value, ast.Name | ast.Attribute) else None
                    mod.defs[q] = Definition(
                        mod.path, q, "attribute" if in_class else "constant", node.lineno, end, end,
                        "", refs, calls, alias=alias or "",
                    )
        elif isinstance(node, ast.If | ast.Try) and not in_class:
            # module-level `if TYPE_CHECKING:` / `try: import x except ImportError:` blocks define names too
            for key in ("body", "orelse", "finalbody"):
                _collect(mod, getattr(node, key, []), prefix, in_class)
            for h in getattr(node, "handlers", []):
                _collect(mod, h.body, prefix, in_class)


def _target_names(t: ast.expr) -> list[str]:
    if isinstance(t, ast.Name):
        return [t.id]
    if isinstance(t, ast.Tuple | ast.List):
        return [n for e in t.elts for n in _target_names(e)]
    return []
