"""Where a block of a code-form reply goes: the definition it rewrites (autod.planner.codeform reads
the reply's headers and blocks; this places each block among the definitions the prompt showed).

A whole-definition edit names a definition shown whole (`symbols`: path -> qualnames); a block with no
header is placed by the name it defines when exactly one shown definition has it; a block of several
shown definitions is one edit each; a class attribute assigned by its qualified name is that
attribute's assignment; search/replace sections under a file header are search edits. A block that
cannot be placed raises PlanInvalid with a reason the repair round can act on.
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Sequence

from autod import pyast
from autod.act.definition import name_of, normalise_symbol
from autod.errors import PlanInvalid
from autod.linebreaks import lines_of
from autod.plan import Edit

# the three marker lines of a search/replace section, each looked for from where the one before ended
_SEARCH_LINE = re.compile(r"^[ \t]*+<{5,9}+[ \t]*+SEARCH[^\n]*+\n", re.MULTILINE)
_DIVIDER_LINE = re.compile(r"^[ \t]*+={5,9}+[ \t]*+\n", re.MULTILINE)
_REPLACE_LINE = re.compile(r"^[ \t]*+>{5,9}+[ \t]*+REPLACE[^\n]*+$", re.MULTILINE)
Header = tuple[str, str | None, bool]  # path, symbol or None, new file


def edits_for(
    header: Header | None,
    body: str,
    has_markers: bool,
    shown: dict[str, tuple[str, ...]],
    known: list[str],
    editable: set[str] | None,
) -> list[Edit]:
    if editable is not None:  # a bare name is placed among the files the plan may edit
        known = [k for k in known if k in editable or k not in shown]
    if not has_markers:
        body = _unqualified(body, shown)
    split = None if has_markers else _split(body, shown, known, header[0] if header else None)
    if split is not None:
        return split
    if header is None:
        name = _defined_name(body)
        found = _owners(name, shown, known) if name else []
        if not found and name:  # `class C:` written around methods of C shown alone
            wrapped = [_owners(f"{name}.{m}", shown, known) for m in _methods(body)]
            if wrapped and all(len(w) == 1 for w in wrapped) and len({w[0][0] for w in wrapped}) == 1:
                return [Edit(path=w[0][0], symbol=w[0][1], replace=body) for w in wrapped]
        if len(found) != 1:
            where = f"`{name}` is defined in {len(found)} shown places" if name and found else (
                f"`{name}` is not a definition shown" if name else "it defines nothing")
            raise PlanInvalid(f"a code block with no header ({where}): put `### path · symbol` above it")
        path, qualname = found[0]
        return [Edit(path=path, symbol=qualname, replace=body)]
    path, symbol, new = header
    if has_markers:
        pairs = search_sections(body)
        return [Edit(path=path, search=_chomp(s), replace=_chomp(r)) for s, r in pairs]
    name = _defined_name(body)
    if symbol:
        symbol = _known_symbol(symbol, shown.get(path, ()))
        if name and name != symbol.rsplit(".", 1)[-1]:
            # the header names one definition, the block defines another: the code is what the model
            # wrote last and with care; a header copied from the prompt (or its example) is not
            found = _owners(name, shown, known)
            if len(found) == 1:
                return [Edit(path=found[0][0], symbol=found[0][1], replace=body)]
        return [Edit(path=path, symbol=symbol, replace=body)]
    owners = [q for q in shown.get(path, ()) if name and q.rsplit(".", 1)[-1] == name]
    if len(owners) == 1:
        return [Edit(path=path, symbol=owners[0], replace=body)]
    if name and path in known and not new:
        return [Edit(path=path, symbol=name, replace=body)]  # the act resolves a unique bare name
    if new or path not in known:
        return [Edit(path=path, search="", replace=body)]
    raise PlanInvalid(f"{path}: name the definition the block rewrites: `### {path} · symbol`")


def _split(
    body: str, shown: dict[str, tuple[str, ...]], known: list[str], path: str | None
) -> list[Edit] | None:
    """One edit per statement when a block holds several shown definitions and nothing else (a value
    and the function that reads it, two methods): each statement rewrites its own definition. Left
    whole, the block would replace the first and put a second copy of the others beside it. None for
    anything else (one statement, a statement that defines nothing shown, a name shown twice)."""
    code = textwrap.dedent(body)
    try:
        top = pyast.parse(code).body
    except (SyntaxError, ValueError):
        return None
    if len(top) < 2:
        return None
    lines = lines_of(code)
    out: list[Edit] = []
    seen: set[tuple[str, str]] = set()
    where = [path] if path is not None and path in shown else known
    for node in top:
        name = name_of(node)
        owners = _owners(name, shown, where) if name else []
        if len(owners) != 1 or owners[0] in seen:
            return None
        seen.add(owners[0])
        start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        segment = "\n".join(lines[start - 1 : node.end_lineno])
        out.append(Edit(path=owners[0][0], symbol=owners[0][1], replace=segment))
    return out


def _unqualified(body: str, shown: dict[str, tuple[str, ...]]) -> str:
    """A shown class attribute assigned by its qualified name (`Checker._in_fstring = False`, as the
    prompt named it) written as the class body has it (`_in_fstring = False`); any other block as it is."""
    code = textwrap.dedent(body)
    try:
        top = pyast.parse(code).body
    except (SyntaxError, ValueError):
        return body
    if len(top) != 1 or not isinstance(top[0], ast.Assign | ast.AnnAssign):
        return body
    node = top[0]
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    target = targets[0]
    if len(targets) != 1 or not isinstance(target, ast.Attribute) or target.lineno != node.lineno:
        return body
    qualname = ast.unparse(target)
    if not any(qualname in names for names in shown.values()):
        return body
    lines = lines_of(code, keepends=True)
    row = lines[target.lineno - 1].encode()
    lines[target.lineno - 1] = (row[: target.col_offset].decode() + target.attr
                                + row[target.end_col_offset :].decode())
    return "".join(lines)


def _defined_name(body: str) -> str | None:
    """The name the block's first statement defines (a def, a class, an assignment), if it parses;
    imports and docstrings before it are passed over."""
    try:
        tree = pyast.parse(textwrap.dedent(body))
    except (SyntaxError, ValueError):
        first = re.search(r"^\s*(?:async\s+def|def|class)\s+([A-Za-z_]\w*)", body, re.MULTILINE)
        return first.group(1) if first else None
    for node in tree.body:
        if not isinstance(node, ast.Import | ast.ImportFrom | ast.Expr):
            return name_of(node)
    return None


def _methods(body: str) -> list[str]:
    """The names of the functions a block's one class statement holds (none unless it is one)."""
    try:
        tree = pyast.parse(textwrap.dedent(body))
    except (SyntaxError, ValueError):
        return []
    top = [n for n in tree.body if not isinstance(n, ast.Import | ast.ImportFrom)]
    if len(top) != 1 or not isinstance(top[0], ast.ClassDef):
        return []
    return [n.name for n in top[0].body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def _owners(name: str, shown: dict[str, tuple[str, ...]], known: list[str]) -> list[tuple[str, str]]:
    return [(p, q) for p in known for q in shown.get(p, ()) if q == name or q.rsplit(".", 1)[-1] == name]


def known_path(path: str, known: list[str]) -> str:
    """A shown path the model shortened (`mod.py` for `src/pkg/mod.py`), when only one matches."""
    if path in known or not known:
        return path
    tails = [k for k in known if k.endswith("/" + path)]
    return tails[0] if len(tails) == 1 else path


def _known_symbol(symbol: str, qualnames: Sequence[str]) -> str:
    """`parse` for the shown `Parser.parse` when only one shown definition of the file has that name."""
    s = normalise_symbol(symbol)
    if s in qualnames:
        return s
    tails = [q for q in qualnames if q.rsplit(".", 1)[-1] == s.rsplit(".", 1)[-1]]
    return tails[0] if len(tails) == 1 else s


def search_sections(body: str) -> list[tuple[str, str]]:
    """The (search, replace) texts of each `<<<<<<< SEARCH` / `=======` / `>>>>>>> REPLACE` section: the
    first divider line after a search line, the first replace line after that, then the next section.

    One pass, each marker looked for once from where the last one ended. One regex with `(.*?)` between
    the markers read the same sections but scanned to the reply's end again from every search line
    that had no divider after it: 8,000 such lines took 19 s with the event loop stalled. A search
    line with no divider (or no replace line) after it has none after any later line either, so the
    search ends there."""
    pairs: list[tuple[str, str]] = []
    pos = 0
    while head := _SEARCH_LINE.search(body, pos):
        divider = _DIVIDER_LINE.search(body, head.end())
        end = _REPLACE_LINE.search(body, divider.end()) if divider else None
        if divider is None or end is None:
            break
        pairs.append((body[head.end() : divider.start()], body[divider.end() : end.start()]))
        pos = end.end()
    return pairs


def _chomp(s: str) -> str:
    return s[:-1] if s.endswith("\n") else s
