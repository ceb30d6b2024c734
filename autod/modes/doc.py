"""auto-doc: keep docstrings and Markdown docs in step with code changes.

Scope guarantee, enforced here in code: in `.py` files only docstrings may change (the AST with
docstrings stripped must be identical before and after); other files only under the doc globs.
"""

from __future__ import annotations

import ast
import asyncio
import fnmatch
import io
import re
import tokenize
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from autod import fsnames, pyast
from autod.act.edits import FileChange, ScopeCheck
from autod.act.judges import Judges
from autod.config.settings import Limits
from autod.errors import NothingToDo, PlanRejected
from autod.events import Event, EventKind
from autod.linebreaks import lines_of
from autod.localize.usage import callers_text
from autod.memory import Recalled
from autod.modes import (
    Attempt,
    ModeEnv,
    Sections,
    Verification,
    chain,
    memory_budget,
    pack,
    recalled_text,
    render,
)
from autod.modes.plan import write_report_file
from autod.ownwrites import OwnWrites
from autod.plan import Plan
from autod.safety.boundary import Boundary

CONTEXT_TOKENS = 6000
_GOOGLE_SECTION = re.compile(
    r"^(\s*)(?:Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments)\s*:\s*$"
)
_NUMPY_SECTION = re.compile(r"^(\s*)(?:Parameters|Keyword Arguments)\s*$")
_GOOGLE_ITEM = re.compile(r"^(\*{0,2}\w+)\s*+(?:\([^)]*\))?\s*+:")  # possessive blanks: linear
_NUMPY_ITEM = re.compile(r"^(\*{0,2}\w+(?:\s*,\s*\*{0,2}\w+)*)\s*(?::.*)?$")
_SPHINX_PARAM = re.compile(r":param(?=\s)[^:]*?(?<=\s)\*{0,2}(\w+)\s*+:")  # the last name before `:`: linear


def _docstring_node(node: ast.AST) -> ast.Expr | None:
    body = getattr(node, "body", None)
    if (
        isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        return body[0]
    return None


def strip_docstrings(tree: ast.AST) -> str:
    """A dump of the AST with every docstring removed: equal dumps mean only docstrings differ."""
    for node in ast.walk(tree):
        if _docstring_node(node) is not None:
            node.body = node.body[1:] or [ast.Pass()]  # type: ignore[attr-defined]
    return ast.dump(tree, annotate_fields=True, include_attributes=False)


def _comments(source: str) -> list[str]:
    """Every comment, in order: `# noqa`, `# type: ignore` and pragmas steer tools, so they are code here."""
    try:
        return [
            t.string
            for t in tokenize.generate_tokens(io.StringIO(source).readline)
            if t.type == tokenize.COMMENT
        ]
    except (tokenize.TokenError, SyntaxError):
        return ["<untokenizable>", source]


def only_docstrings_changed(old: str, new: str) -> bool:
    """True when `new` differs from `old` in docstrings alone (code and comments identical)."""
    try:
        same_code = strip_docstrings(pyast.parse(old)) == strip_docstrings(pyast.parse(new))
    except SyntaxError:
        return False
    return same_code and _comments(old) == _comments(new)


def _text(doc: str | None) -> str | None:
    """A docstring as `inspect.cleandoc` leaves it, less trailing spaces and repeated blank lines."""
    if doc is None:
        return None
    return re.sub(r"\n{3,}", "\n\n", "\n".join(line.rstrip() for line in lines_of(doc)))


def docstring_texts(source: str) -> list[str | None]:
    """Every module/class/function docstring's text, in order (None: that node has none)."""
    try:
        tree = pyast.parse(source)
    except SyntaxError:
        return []
    return [
        _text(ast.get_docstring(node, clean=True))
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
    ]


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    a = fn.args
    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
    if a.vararg:
        names.append(a.vararg.arg)
    if a.kwarg:
        names.append(a.kwarg.arg)
    return [n for n in names if n not in ("self", "cls")]


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _google_params(lines: list[str], start: int, header_indent: int) -> set[str]:
    """Items of a Google `Args:` section: the lines at the first item's indentation."""
    names: set[str] = set()
    item_indent: int | None = None
    for line in lines[start:]:
        if not line.strip():
            continue
        indent = _indent(line)
        if indent <= header_indent:
            break
        if item_indent is None:
            item_indent = indent
        if indent == item_indent and (m := _GOOGLE_ITEM.match(line.strip())):
            names.add(m.group(1).lstrip("*"))
    return names


def _numpy_params(lines: list[str], start: int, header_indent: int) -> set[str]:
    """Items of a NumPy `Parameters` section (after its dashes): `name : type` at the header's indent."""
    names: set[str] = set()
    for i in range(start, len(lines)):
        line = lines[i]
        if not line.strip() or _indent(line) > header_indent:
            continue
        if _indent(line) < header_indent:
            break
        nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if nxt and set(nxt) == {"-"}:  # the next section's header
            break
        if m := _NUMPY_ITEM.match(line.strip()):
            names |= {n.strip().lstrip("*") for n in m.group(1).split(",")}
    return names


def documented_params(doc: str) -> set[str] | None:
    """Parameter names a docstring documents (Google/NumPy/Sphinx styles); None if it lists none."""
    lines = lines_of(doc.expandtabs())
    names: set[str] = set()
    found = False
    for i, line in enumerate(lines):
        nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if (m := _NUMPY_SECTION.match(line)) and nxt and set(nxt) == {"-"}:
            found = True
            names |= _numpy_params(lines, i + 2, len(m.group(1)))
        elif m := _GOOGLE_SECTION.match(line):
            found = True
            names |= _google_params(lines, i + 1, len(m.group(1)))
    sphinx = set(_SPHINX_PARAM.findall(doc))
    names |= sphinx
    return names if (found or sphinx) and names else None


def _public_defs(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef]:
    """Module-level functions and classes, and the methods of public classes (nested defs are private)."""
    out: list[ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef] = []
    todo: list[ast.stmt] = list(tree.body)
    while todo:
        node = todo.pop(0)
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        if node.name.startswith("_"):
            continue
        out.append(node)
        if isinstance(node, ast.ClassDef):
            todo.extend(node.body)
    return out


def findings(source: str, rel: str) -> list[dict[str, Any]]:
    """Public functions/classes whose docstring is missing or no longer matches the signature."""
    try:
        tree = pyast.parse(source)
    except SyntaxError:
        return []
    out: list[dict[str, Any]] = []
    for node in _public_defs(tree):
        doc = ast.get_docstring(node)
        if doc is None:
            out.append({"path": rel, "line": node.lineno, "name": node.name, "problem": "missing docstring"})
            continue
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            documented = documented_params(doc)
            if documented is not None:
                actual = set(_params(node))
                stale = sorted(documented - actual)
                missing = sorted(actual - documented)
                if stale or missing:
                    problem = "docstring does not match the signature"
                    if stale:
                        problem += f"; documents unknown {', '.join(stale)}"
                    if missing:
                        problem += f"; misses {', '.join(missing)}"
                    out.append({"path": rel, "line": node.lineno, "name": node.name, "problem": problem})
    return out


def _doc_files(workspace: Path, globs: list[str]) -> list[Path]:
    files: set[Path] = set()
    for g in globs:
        # Before Python 3.13 a pattern ending in `**` yields directories only: `docs/**` means its files.
        for p in workspace.glob(f"{g}/*" if g.endswith("**") else g):
            if (fsnames.utf8_only([str(p)], "doc globs")  # a name that is not UTF-8: outside what autod reads
                    and p.is_file() and p.suffix in (".md", ".rst", ".txt") and ".autod" not in p.parts):
                files.add(p)
    return sorted(files)[:200]


def doc_mentions(
    workspace: Path, globs: list[str], names: set[str], boundary: Boundary | None = None
) -> list[dict[str, Any]]:
    """Markdown docs that mention a changed public name or CLI option (read as the Boundary allows)."""
    reader = boundary or Boundary(workspace, workspace / ".autod", Limits().deny_globs)
    out = []
    for p in _doc_files(reader.workspace, globs):
        text = reader.read_text(p)
        if text is None:
            continue
        hits = sorted(n for n in names if re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", text))
        if hits:
            out.append({"path": p.relative_to(reader.workspace).as_posix(), "mentions": hits})
    return out


def _changed_names(source: str) -> set[str]:
    names: set[str] = set()
    try:
        tree = pyast.parse(source)
    except SyntaxError:
        return names
    for node in ast.walk(tree):
        if isinstance(
            node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
        ) and not node.name.startswith("_"):
            names.add(node.name)
    names |= set(re.findall(r"""["'](--[a-z][\w-]+)["']""", source))  # CLI options (argparse/click)
    return names


class DocMode:
    name = "auto-doc"
    kinds = frozenset({EventKind.FILES_CHANGED})
    writes_code = True
    reply_form = "json"  # a report or docstrings: the JSON plan and its schema
    stop: tuple[str, ...] = ()

    def handles(self, event: Event) -> bool:
        if event.kind == EventKind.MANUAL:
            return event.target_mode == self.name
        return event.kind in self.kinds

    def _scan(self, env: ModeEnv, paths: list[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
        boundary = env.boundary  # reads obey the same rules as writes
        ws = boundary.workspace
        found: list[dict[str, Any]] = []
        names: set[str] = set()
        sources: list[str] = []
        for raw in paths[:50]:
            p = ws / raw
            if p.suffix != ".py" or p.is_symlink():
                continue
            rel = boundary.readable(p)
            text = boundary.read_text(p) if rel is not None else None
            if rel is None or text is None:
                continue
            f = findings(text, rel)
            found += f
            names |= _changed_names(text)
            if f:
                sources.append(f"--- {rel} ---\n{text[:20000]}")
        globs = env.settings.modes.auto_doc.doc_globs
        mentions = doc_mentions(ws, globs, names, boundary) if names else []
        return found, mentions, "\n\n".join(sources)

    async def context(self, event: Event, env: ModeEnv, recalled: list[Recalled]) -> Sections:
        paths = list(event.payload.get("paths") or [])
        found, mentions, sources = await asyncio.to_thread(self._scan, env, paths)
        if not found and not mentions:
            raise NothingToDo("no public function or class lacks a docstring or has a stale one")
        listing = "\n".join(f"- {f['path']}:{f['line']} `{f['name']}`: {f['problem']}" for f in found)
        docs = "\n".join(f"- {m['path']} mentions {', '.join(m['mentions'])}" for m in mentions)
        report = (
            "## Needs documenting\n"
            + (listing or "- nothing in code")
            + "\n\n## Docs that mention changed names (review them)\n"
            + (docs or "- none")
        )
        # how the code to document is used: its callers, resolved through the index
        usage = await callers_text(
            env.settings, env.boundary, [(f["path"], f["line"]) for f in found], CONTEXT_TOKENS // 4
        )
        memory = recalled_text(recalled, budget_tokens=memory_budget(env.settings, CONTEXT_TOKENS))
        ctx = pack(
            [
                ("findings", listing),
                ("docs", docs),
                ("sources", sources),
                ("callers", usage.text),
                ("memory", memory),
            ],
            CONTEXT_TOKENS,
        )
        ctx.used = usage.entries if ctx.get("callers") else []
        ctx["report"] = report
        return ctx

    def messages(
        self, event: Event, context: dict[str, str], attempts: list[Attempt]
    ) -> list[dict[str, str]]:
        user = render(
            "doc_user",
            findings=context.get("findings") or "(none)",
            docs=context.get("docs") or "(none)",
            sources=context.get("sources") or "",
            callers=context.get("callers") or "(none found)",
            memory=context.get("memory") or "(none)",
            attempts="\n".join(a.summary + ": " + a.output[-500:] for a in attempts) or "(none)",
        )
        return [{"role": "system", "content": render("doc_system")}, {"role": "user", "content": user}]

    def scope(self, env: ModeEnv) -> ScopeCheck | None:
        globs = env.settings.modes.auto_doc.doc_globs

        def check(change: FileChange) -> None:
            if change.rel.endswith(".py"):
                old = (change.old or b"").decode("utf-8", "replace")
                if change.old is None or not only_docstrings_changed(
                    old, change.new.decode("utf-8", "replace")
                ):
                    raise PlanRejected(
                        f"auto-doc may change only docstrings in {change.rel}; the plan changes code"
                    )
                if docstring_texts(old) == docstring_texts(change.new.decode("utf-8", "replace")):
                    # indentation or blank lines inside a docstring: a cycle spent on nothing
                    raise PlanRejected(f"auto-doc's edit to {change.rel} changes no docstring's text")
                return
            if not any(
                fnmatch.fnmatch(change.rel, g) or fnmatch.fnmatch(change.rel, g.replace("**/", ""))
                for g in globs
            ):
                raise PlanRejected(f"auto-doc may edit only docs ({', '.join(globs)}), not {change.rel}")

        judges = Judges.for_settings(env.settings, self.name)
        return chain(judges.scope() if judges else None, check)

    async def verify(self, event: Event, plan: Plan, env: ModeEnv) -> Verification:
        """Keep the doc edits unless a check that passed before them fails now."""
        # Snapshot first: running the checks below updates the daemon's latest results.
        failing_before = {n for n, r in env.last_results.items() if not r.ok}
        names = [n for n, c in env.settings.checks.items() if not c.fixer]
        names = [n for n in plan.verify if n in names] or names
        results = [await env.run_check(n) for n in names]
        broken = [r.name for r in results if not r.ok and r.name not in failing_before]
        if broken:
            return Verification(
                "rolled_back", results, f"check {', '.join(broken)} failed after the doc edits"
            )
        still = [r.name for r in results if not r.ok]
        reason = f"check {', '.join(still)} was already failing before the doc edits" if still else ""
        return Verification("fixed", results, reason)

    async def write_report(self, event: Event, plan: Plan, env: ModeEnv, own: OwnWrites) -> Path:
        now = datetime.now(UTC)
        path = env.settings.state_path / "reports" / f"auto-doc-{now:%Y-%m-%d}.md"
        old = (
            path.read_text(encoding="utf-8")
            if path.exists()
            else f"# autod auto-doc findings {now:%Y-%m-%d}\n"
        )
        text = f"{old}\n### {now:%H:%M UTC} — {event.summary}\n\n{plan.report or ''}\n"
        await asyncio.to_thread(write_report_file, path, text.encode())
        return path
