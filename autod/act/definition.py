"""The whole-definition edit: a plan names a definition (`symbol`) and gives its complete new source.

A small model rewrites a function far more reliably than it copies a `search` text character for
character (Aider's edit benchmarks; autod's own traces: most refused plans were a miscopied search).
So the edit names the definition, autod finds its lines with `ast` (decorators included), and the new
source replaces them, re-indented to where the definition stands:

- `symbol` is a qualname as the prompt shows it (`func`, `Class.method`, `outer.inner`, `CONSTANT`);
  a bare name is taken when exactly one definition has it (a method of that name in two classes is
  ambiguous and refused, naming both). `path.py::`, `()` and spaces around it are tolerated.
- `replace` is the new definition: fenced or not, indented as in the class or at column 0 (it is
  dedented, then indented like the original). Without decorators it keeps the original's; with
  some, they replace them. A class given back around the method is unwrapped to the method, and a
  class given back with only some of its methods (all of them its own) rewrites those methods alone.
  Statements beside the definition (a new helper, a constant) go in with it.
- A `replace` that is not a definition of that name is read as the new *body* when the target is a
  function (the signature and decorators stay); when the plan also gave a `search`, as a search and
  replace inside the definition's lines only (so the search need not be unique in the file).

Python only; the result must still parse (the act rules check every edited Python file). Raises
PlanRejected with a reason a re-plan can act on.
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass

from autod import pyast
from autod.act import docstrings
from autod.act.quotes import requote
from autod.act.search import apply_edit
from autod.errors import PlanRejected
from autod.linebreaks import lines_of

__all__ = ["Span", "find_definition", "name_of", "normalise_symbol", "parse_new_source", "replace_definition"]

LONG_DEFINITION = 60  # lines; a rewrite of a longer one must keep at least half of them
# as long a fence as the prompt's (autod.planner.fences), closed by one as long at the text's end
_FENCE_OPEN = re.compile(r"^\s*+(`{3,}+)[\w+-]*+[ \t]*+\r?\n")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_Def = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


@dataclass(frozen=True)
class Span:
    """Where a definition stands: 1-based lines, decorators included, and its indent."""

    qualname: str
    start: int
    end: int
    body_start: int  # first line of the body (functions and classes), else start
    indent: str
    node: ast.AST


def normalise_symbol(symbol: str) -> str:
    """`calc.py::Calc.add()` -> `Calc.add`; what a model writes around a qualname is dropped."""
    s = symbol.strip().strip("`'\"")
    if "::" in s:
        s = s.rsplit("::", 1)[1]
    s = s.strip()
    if s.endswith("()"):
        s = s[:-2]
    for word in ("async def ", "def ", "class "):
        if s.startswith(word):
            s = s[len(word) :]
    return s.split("(", 1)[0].strip()


def _walk(body: list[ast.stmt], prefix: str = "") -> list[tuple[str, ast.stmt]]:
    """(qualname, statement) of every unit a whole-definition edit can name: functions and classes at
    any depth, plain-name assignments at module and class level, the module's `if`/`try` bodies."""
    out: list[tuple[str, ast.stmt]] = []
    for node in body:
        if isinstance(node, _Def):
            q = prefix + node.name
            out.append((q, node))
            out += _walk(node.body, q + ".")
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    out.append((prefix + t.id, node))
        elif isinstance(node, ast.If | ast.Try) and not prefix:
            for key in ("body", "orelse", "finalbody"):
                out += _walk(getattr(node, key, []), prefix)
            for h in getattr(node, "handlers", []):
                out += _walk(h.body, prefix)
    return out


def definition_texts(text: str, rel: str) -> dict[str, str]:
    """qualname -> source text (decorators included) of each unit `find_definition` can name; {} when
    the file does not parse. One walk, so what is remembered as a definition can be edited as one."""
    try:
        tree = pyast.parse(text, filename=rel)
    except SyntaxError:
        return {}
    lines = lines_of(text)
    out: dict[str, str] = {}
    for qual, node in _walk(tree.body):
        out.setdefault(qual, "\n".join(lines[_start(node) - 1 : node.end_lineno or node.lineno]))
    return out


def _start(node: ast.AST) -> int:
    decos = getattr(node, "decorator_list", None) or []
    return min([node.lineno, *(d.lineno for d in decos)])  # type: ignore[attr-defined]


def find_definition(rel: str, text: str, symbol: str) -> Span:
    """The span of `symbol` in the file's text. PlanRejected when absent or ambiguous."""
    name = normalise_symbol(symbol)
    if not name or not all(_NAME.fullmatch(p) for p in name.split(".")):
        raise PlanRejected(f"{rel}: symbol {symbol[:80]!r} is not a definition name like Class.method")
    try:
        tree = pyast.parse(text, filename=rel)
    except SyntaxError as exc:
        raise PlanRejected(f"{rel} does not parse (line {exc.lineno}): give a search/replace edit") from None
    defs = _walk(tree.body)
    exact = [(q, n) for q, n in defs if q == name]
    found = exact or [(q, n) for q, n in defs if q.endswith("." + name)]
    if not found:
        known = ", ".join(q for q, n in defs if isinstance(n, _Def))[:300]
        raise PlanRejected(f"{rel} has no definition {name!r} (it defines: {known or 'nothing'})")
    if len(found) > 1 and len({id(n) for _, n in found}) > 1:
        which = " and ".join(q for q, _ in found[:4])
        raise PlanRejected(
            f"{rel}: {name!r} is ambiguous ({which}): name it with its class, e.g. {found[0][0]}"
        )
    qual, node = found[0]
    lines = lines_of(text)
    start = _start(node)
    first = lines[start - 1] if start - 1 < len(lines) else ""
    indent = first[: len(first) - len(first.lstrip())]
    body = getattr(node, "body", None)
    body_start = _start(body[0]) if isinstance(node, _Def) and body else start
    return Span(qual, start, node.end_lineno or node.lineno, body_start, indent, node)


def replace_definition(rel: str, text: str, symbol: str, replace: str, search: str = "") -> str:
    """`text` with the definition `symbol` replaced by `replace` (see the module's doc)."""
    span = find_definition(rel, text, symbol)
    methods = _partial_class(span, _unfence(replace))
    if methods is not None:  # the class given back with only the methods it changes
        for name, code in methods:
            text = replace_definition(rel, text, f"{span.qualname}.{name}", code)
        return text
    newline = "\r\n" if "\r\n" in text else "\n"
    lines = lines_of(text, keepends=True)
    old = "".join(lines[span.start - 1 : span.end])
    new_code = _unfence(replace)
    snippet = _as_definition(rel, span, new_code, lines)
    if snippet is None and search.strip():
        # not a whole definition, but a search inside it: apply it within the definition's lines
        return _join(lines, span, apply_edit(rel, old, search, replace))
    if snippet is None:
        snippet = _as_body(rel, span, lines, new_code)
    _not_truncated(rel, span, snippet)
    block = textwrap.indent(snippet, span.indent, lambda ln: bool(ln.strip()))
    block = block.replace("\r\n", "\n").replace("\n", newline)
    if not block.endswith(newline):
        block += newline
    return _join(lines, span, block)


def _partial_class(span: Span, code: str) -> list[tuple[str, str]] | None:
    """(name, source) of each method when `code` is the target class given back as methods it already
    has and nothing else, its class line the same or bare: a small model writes the class line around the
    methods it fixed, and replacing the class with that would delete the rest of it (its other
    methods, attributes, decorators). None for anything else (a new method, another statement, new
    bases): that is a rewrite of the class."""
    if not isinstance(span.node, ast.ClassDef):
        return None
    try:
        tree, code = parse_new_source(code)
    except (SyntaxError, ValueError):
        return None
    cls = tree.body[0] if len(tree.body) == 1 else None
    if not isinstance(cls, ast.ClassDef) or cls.name != span.node.name or not _same_line(cls, span.node):
        return None
    fn = ast.FunctionDef | ast.AsyncFunctionDef
    old = {n.name for n in span.node.body if isinstance(n, fn)}
    members = [n for n in cls.body if docstrings.docstring(cls) is not n]
    new = [n for n in members if isinstance(n, fn)]
    names = [n.name for n in new]
    if not new or len(new) != len(members) or len(set(names)) != len(names) or not set(names) <= old:
        return None
    lines = lines_of(code)
    return [(n.name, textwrap.dedent("\n".join(lines[_start(n) - 1 : n.end_lineno]))) for n in new]


def _same_line(new: ast.ClassDef, old: ast.ClassDef) -> bool:
    """Bases, keywords and decorators each the same as the class's, or left out (`class A:` written
    around a method of `class A(Base):`)."""
    def same(a: list[ast.expr] | list[ast.keyword], b: list[ast.expr] | list[ast.keyword]) -> bool:
        return not a or [ast.dump(x) for x in a] == [ast.dump(x) for x in b]

    return (same(new.bases, old.bases) and same(new.keywords, old.keywords)
            and same(new.decorator_list, old.decorator_list))


def _not_truncated(rel: str, span: Span, snippet: str) -> None:
    """A long definition given back at less than half its length was most likely cut, not fixed (a
    prompt shows a long one as a window): refused rather than losing the rest of it."""
    old_n = span.end - span.start + 1
    new_n = len([ln for ln in lines_of(snippet) if ln.strip()])
    if old_n > LONG_DEFINITION and new_n * 2 < old_n:
        raise PlanRejected(
            f"{rel}: the new source of {span.qualname} has {new_n} lines for a definition of {old_n}:"
            " give it whole, or change the lines to fix with a search/replace edit"
        )


def _join(lines: list[str], span: Span, block: str) -> str:
    tail = "".join(lines[span.end :])
    head = "".join(lines[: span.start - 1])
    if block and not block.endswith(("\n", "\r")) and tail:
        block += "\n"
    return head + block + tail


def _unfence(code: str) -> str:
    """The code inside a fence that opens the text and closes it (blanks around it aside), without the
    line break and blanks before the closing fence; else the text. Read from both ends: a lazy body
    that looked for the closing fence after every character scanned each run of blanks again from each
    of its characters (2.8 s for 20,000 blanks)."""
    m = _FENCE_OPEN.match(code)
    close = len(code.rstrip()) - len(m.group(1)) if m else -1
    if m and close >= m.end() and code.startswith(m.group(1), close):
        code = code[m.end() : close].rstrip(" \t").removesuffix("\n").removesuffix("\r")
    return code.strip("\r\n")


def _target_name(span: Span) -> str:
    return span.qualname.rsplit(".", 1)[-1]


def parse_new_source(code: str) -> tuple[ast.Module, str]:
    """A plan's new source as the act rules read it, parsed: dedented, a body copied two levels in
    evened out, JSON-escaping artifacts undone, and a `def` line at column 0 with its body still
    indented for the class accepted. SyntaxError (of the last reading) when it does not parse."""
    dedented = _even_body(textwrap.dedent(code))
    dedented = requote(dedented) or dedented  # f'{d['k']}': a JSON-escaping artifact (autod.act.quotes)
    try:
        return pyast.parse(dedented), dedented
    except SyntaxError:
        # "def f():" at column 0 with its body still indented for the class: dedent the body alone
        first, _, rest = dedented.partition("\n")
        retry = first + "\n" + textwrap.indent(textwrap.dedent(rest), "    ")
        return pyast.parse(retry), retry


def _as_definition(rel: str, span: Span, code: str, old_lines: list[str]) -> str | None:
    """The new source as a dedented definition of the target (with any statements beside it), or None
    when it is not one. PlanRejected when it does not parse."""
    try:
        tree, dedented = parse_new_source(code)
    except SyntaxError as exc:
        raise PlanRejected(
            f"{rel}: the new source of {span.qualname} does not parse (line {exc.lineno}): give the"
            " complete definition, correctly indented"
        ) from None
    name = _target_name(span)
    target_kind = type(span.node)
    top = list(tree.body)
    match = [n for n in top if _same_kind(n, target_kind) and name_of(n) == name]
    if not match:
        cls = span.qualname.rsplit(".", 2)[-2] if "." in span.qualname else None
        wrapper = [n for n in top if isinstance(n, ast.ClassDef) and cls and n.name == cls]
        if wrapper:  # the class given back around the method: keep the method
            inner = [n for n in wrapper[0].body if _same_kind(n, target_kind) and name_of(n) == name]
            if inner:
                method = textwrap.dedent(_segment(dedented, inner[0]))
                # its own lines from here on: the wrapper's numbering does not apply to it
                node = pyast.parse(method).body[0]
                return _keep_decorators(span, method, node, old_lines)
        return None
    if len(match) > 1:
        raise PlanRejected(f"{rel}: the new source defines {span.qualname} more than once")
    return _keep_decorators(span, dedented, match[0], old_lines)


def _even_body(code: str) -> str:
    """`def f():` at column 0 with its body two levels in (copied from a class): the body one level in."""
    first, sep, rest = code.partition("\n")
    if not sep or not first.lstrip().startswith(("def ", "async def ", "class ", "@")) or first[:1].isspace():
        return code
    indents = [len(ln) - len(ln.lstrip()) for ln in lines_of(rest) if ln.strip()]
    if not indents or min(indents) <= 4:
        return code
    return first + "\n" + textwrap.indent(textwrap.dedent(rest), "    ", lambda ln: bool(ln.strip()))


def _same_kind(node: ast.AST, kind: type) -> bool:
    if kind in (ast.FunctionDef, ast.AsyncFunctionDef):
        return isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    if kind in (ast.Assign, ast.AnnAssign):
        return isinstance(node, ast.Assign | ast.AnnAssign)
    return isinstance(node, kind)


def name_of(node: ast.AST) -> str | None:
    """The name a statement defines: a def's or class's, an assignment's first plain name; else None."""
    if isinstance(node, _Def):
        return node.name
    if isinstance(node, ast.Assign):
        names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        return names[0] if names else None
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return node.target.id
    return None


def _segment(code: str, node: ast.AST) -> str:
    lines = lines_of(code)
    return "\n".join(lines[_start(node) - 1 : node.end_lineno])  # type: ignore[attr-defined]


def _keep_decorators(span: Span, code: str, new_node: ast.AST, old_lines: list[str]) -> str:
    """A new definition without decorators keeps the original's (a rewritten body, say), and one without
    a docstring keeps the original's docstring: a small model drops both while it fixes the body."""
    code = docstrings.keep(span.node, code, new_node, old_lines)
    if not getattr(span.node, "decorator_list", None) or getattr(new_node, "decorator_list", None):
        return code
    decorators = [
        ln.rstrip("\r\n")[len(span.indent) :] if ln.startswith(span.indent) else ln.strip()
        for ln in old_lines[span.start - 1 : span.node.lineno - 1]  # type: ignore[attr-defined]
    ]
    lines = lines_of(code)
    at = _start(new_node) - 1
    return "\n".join([*lines[:at], *decorators, *lines[at:]])


def _as_body(rel: str, span: Span, lines: list[str], code: str) -> str:
    """`code` as the new body of the target function (its decorators and signature kept)."""
    if not isinstance(span.node, ast.FunctionDef | ast.AsyncFunctionDef):
        raise PlanRejected(
            f"{rel}: `replace` must be the complete new source of {span.qualname} (its whole statement)"
        )
    body = textwrap.dedent(code)
    try:
        pyast.parse(body)
    except SyntaxError as exc:
        raise PlanRejected(
            f"{rel}: `replace` must be the complete new definition of {span.qualname} (a `def"
            f" {_target_name(span)}(...)` statement); as a body it does not parse (line {exc.lineno})"
        ) from None
    if span.body_start <= span.node.lineno:  # a one-line def: `def f(): return 1`
        raise PlanRejected(
            f"{rel}: `replace` must be the complete new definition of {span.qualname}, `def` line included"
        )
    header = [ln.rstrip("\r\n") for ln in lines[span.start - 1 : span.body_start - 1]]
    header = [h[len(span.indent) :] if h.startswith(span.indent) else h.lstrip() for h in header]
    first_body = lines[span.body_start - 1]
    step = first_body[: len(first_body) - len(first_body.lstrip())][len(span.indent) :] or "    "
    return "\n".join([*header, textwrap.indent(body, step, lambda ln: bool(ln.strip()))])
