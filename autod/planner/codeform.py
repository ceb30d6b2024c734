"""The code reply form: a plan written as header lines and fenced code blocks, not as JSON.

A small model writes code in a fenced block far more reliably than inside a JSON string (where every
newline and quote must be escaped): Aider reports it of small models, and the oracle beside autod's
real-library bench fixed with a fenced block what the same model and prompt missed as a JSON plan
(docs/PERFORMANCE.md). In this form (`llm.reply_form: code`, auto-debug) the model answers:

    One or two sentences: what the failing test shows and what the fix changes.

    ### src/pkg/mod.py · Parser.parse
    ```python
    def parse(self, text):
        ...
    ```

and this module reads that back into the same `Plan` the JSON form gives, for the same act rules:

- a header `### PATH · SYMBOL` (also `PATH::SYMBOL`, `File: PATH`, bold or backquoted, with what the
  prompt's own headers add after it, `(lines 3-9; ...)`, ignored) then a block: a whole-definition
  edit of SYMBOL in PATH;
- a header naming a file alone: a block of `<<<<<<< SEARCH` / `=======` / `>>>>>>> REPLACE` sections
  is search/replace edits; a block whose first statement defines a name shown in that file rewrites
  that definition; a path the prompt never showed (`(new file)`) is created with the block;
- a block with no header: its first definition's name, when exactly one shown definition has it;
- a block whose statements each define a different shown name (a value and the function reading it,
  as a suspect's prompt shows them): one edit per statement;
- the last block for a definition wins (a model that quotes the original before its fix);
- `NEED: path.py::Class.method, other` asks to see definitions first (the need round);
- no block at all is a plan with no edits (the model found no safe fix), its text the summary; a
  reply that is a JSON plan after all is read as one.

A block autod cannot place raises PlanInvalid with a reason the repair round can act on.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Mapping, Sequence

from autod.errors import PlanInvalid
from autod.linebreaks import lines_of
from autod.plan import Edit, Plan
from autod.planner import fences, marks
from autod.planner.parse import extract_json, parse_plan, strip_thinking
from autod.planner.placing import Header, edits_for, known_path, search_sections

__all__ = ["parse_code_reply", "quoted_code"]

MAX_SUMMARY = 4000
_NEED = re.compile(r"^[ \t>*_]*NEED[*_]*[ \t]*:[ \t]*(.+)$", re.MULTILINE)
_HEADER_LEAD = re.compile(r"^\s*(?:#{1,6}\s*|[-*]\s+)?(?:\*\*)?\s*(?:(?:file|path|edit|in)\s*:\s*)?", re.I)
_NEW_FILE = re.compile(r"\(\s*new(?:\s+file)?\s*\)", re.I)
_PATHLIKE = re.compile(r"^[\w./\\-]+\.[A-Za-z0-9]+$|^[\w.-]+(?:/[\w.-]+)+$")
_HEADER_LINES = 3  # non-blank lines above a block searched for its header


def quoted_code(messages: Sequence[Mapping[str, object]]) -> frozenset[str]:
    """What the prompt itself holds that a reply may copy back: its code blocks, normalised, and its
    `NEED:` lines (the instructions' example). The model's own earlier turns are not quotes: a repair
    round may rightly send the same code again under a header."""
    out: set[str] = set()
    for m in messages:
        content = m.get("content")
        if m.get("role") in ("system", "user") and isinstance(content, str):
            out.update(_norm(b.body) for b in fences.blocks(content))
            out.update(_need_key(n.group(1)) for n in _NEED.finditer(content))
    out.discard("")
    return frozenset(out)


def parse_code_reply(
    text: str,
    symbols: Mapping[str, Sequence[str]] | None = None,
    paths: Sequence[str] | None = None,
    *,
    quoted: frozenset[str] = frozenset(),
) -> Plan:
    """The Plan in a code-form reply. `symbols` (path -> qualnames the prompt showed whole) and
    `paths` (the files it showed for editing) place a block whose header is missing or loose.

    Quotes are not edits: a block equal to code of the prompt (`quoted`, from quoted_code) and a block
    for a file the prompt showed but the plan may not edit (a test: in `symbols`, not in `paths`) are
    dropped, as a small model copies its prompt back around its fix. (In the JSON form the schema's
    path enum keeps those files out; the act rules judge whatever is left, in either form.)"""
    if not isinstance(text, str) or not text.strip():
        raise PlanInvalid("the reply is empty")
    text = strip_thinking(text)
    shown = {p: tuple(q) for p, q in (symbols or {}).items()}
    known = sorted(set(paths or ()) | set(shown))
    editable = set(paths) if paths is not None else None
    spaced = frozenset(k for k in known if " " in k)
    quotes = 0
    unplaced: list[str] = []
    blocks = fences.blocks(text)  # a docstring's own fences do not end a block (autod.planner.fences)
    edits: list[Edit] = []
    placed: dict[tuple[str, str], int] = {}  # (path, symbol) -> index in edits: the last block wins
    prev_end = 0
    first_header: int | None = None
    pending: Header | None = None
    for m in blocks:
        lang, body = m.lang, m.body
        above = text[prev_end : m.start]
        prev_end = m.end
        header, at = _header(above, spaced)
        body, inner = _inner_header(body, spaced)
        header, pending = header or inner or pending, None
        if header is not None and first_header is None:
            first_header = m.start - len(above) + at
        if not body.strip():
            pending = header  # a block holding only its header ("the header line is: ..."): the next one's
            continue
        if _norm(body) in quoted:
            quotes += 1
            continue  # the prompt's own code (or a failed attempt's diff), copied back unchanged
        pairs = marks.hunks(body) if lang == "diff" or not marks.parses(body) else None
        if pairs is not None:
            path = known_path(header[0] if header else marks.diff_path(body) or "", known)
            if not path:
                unplaced.append("a diff that names no file: put `### path` above it")
            elif editable is not None and path in shown and path not in editable:
                quotes += 1  # the failing test, edited to agree: not the plan's to change
            else:
                edits.extend(Edit(path=path, search=s, replace=r) for s, r in pairs)
            continue
        body = marks.unmark(body)
        has_markers = bool(search_sections(body))
        if lang not in fences.CODE_LANGS and not has_markers and header is None:
            continue  # a shell line, a traceback, a diff the model quoted: not an edit
        if header is not None:
            header = (known_path(header[0], known), *header[1:])
            if editable is not None and header[0] in shown and header[0] not in editable:
                quotes += 1
                continue  # a file shown to read (the failing test), not to edit
        try:
            found = edits_for(header, body, has_markers, shown, known, editable)
        except PlanInvalid as exc:  # an example call, a stray snippet: fatal only if nothing else is usable
            unplaced.append(exc.reason)
            continue
        for edit in found:
            key = (edit.path, edit.symbol or "")
            if edit.whole_definition and key in placed:
                edits[placed[key]] = edit
                continue
            if edit.whole_definition:
                placed[key] = len(edits)
            edits.append(edit)
    cut = first_header if first_header is not None else (blocks[0].start if blocks else len(text))
    summary = _summary(_outside_blocks(text[:cut], blocks))
    if not summary and edits:
        summary = "rewrites " + ", ".join(_label(e) for e in edits)
    need = _need(text, quoted)
    if not edits and not need:
        if not quotes and _is_json(text):  # a JSON plan after all (an echo's dict literal is none)
            return parse_plan(text)
        if unplaced:
            raise PlanInvalid(unplaced[0])
        if quotes:
            summary = summary or f"{quotes} block(s) of the prompt copied back, no change"
    return Plan(summary=(summary or _summary(text) or "no fix proposed")[:MAX_SUMMARY], edits=edits,
                need=need[:32]).with_quotes(quotes)


def _is_json(text: str) -> bool:
    try:
        extract_json(text)
    except PlanInvalid:
        return False
    return True


def _header(above: str, spaced: frozenset[str] = frozenset()) -> tuple[Header | None, int]:
    """(path, symbol or None, new file) from the last few non-blank lines above a block, and where in
    `above` that line starts; (None, 0) when none of them names a file."""
    lines = lines_of(above, keepends=True)
    offsets, pos = [], 0
    for line in lines:
        offsets.append(pos)
        pos += len(line)
    seen = 0
    for i in range(len(lines) - 1, -1, -1):
        line = lines[i].strip()
        if not line:
            continue
        seen += 1
        if seen > _HEADER_LINES:
            break
        found = _read_header(line, spaced)
        if found is not None:
            return found, offsets[i]
    return None, 0


def _inner_header(body: str, spaced: frozenset[str] = frozenset()) -> tuple[str, Header | None]:
    """A header the model wrote inside its block (`### path · symbol`, `# path · symbol`, a second
    fence opener after it): taken out of the code, and returned as the block's header."""
    lines = body.split("\n")
    header: Header | None = None
    drop = 0
    for i, line in enumerate(lines[:3]):
        text = line.strip()
        if not text:
            continue
        if text.startswith("```"):
            drop = i + 1  # a fence opened again inside the block
            continue
        found = _read_header(text, spaced) if text.startswith("#") else None
        if found is None or (found[1] is None and not found[2]):
            break  # code (a comment naming only a file is left in place)
        header, drop = found, i + 1
    return ("\n".join(lines[drop:]), header) if drop else (body, None)


def _read_header(line: str, spaced: frozenset[str] = frozenset()) -> Header | None:
    """`spaced`: the shown paths with a space in them, the only ones a header may name with spaces."""
    new = bool(_NEW_FILE.search(line))
    rest = _HEADER_LEAD.sub("", _NEW_FILE.sub("", line), count=1)
    rest = re.sub(r"\s*\([^()]*\)\s*:?\s*$", "", rest).strip()  # "(lines 3-9; ...)" the prompt's header adds
    # markdown bold (`**`) around the header; `__` is left alone: it is a dunder's (`__init__.py`)
    rest = rest.replace("**", "").strip().rstrip(":").strip()
    sym: str | None = None
    for sep in ("·", "::", " - ", " — ", ", "):
        if sep in rest:
            rest, sym = (s.strip() for s in rest.split(sep, 1))
            break
    path = rest.strip("`'\" ")
    if path not in spaced and (" " in path or not _PATHLIKE.match(path)):
        return None
    if sym is not None:
        sym = re.split(r"\s", sym.strip("`'\" "), maxsplit=1)[0].strip("`'\":") or None
    return path.replace("\\", "/").removeprefix("./"), sym, new



def _outside_blocks(text: str, blocks: Sequence[fences.Block]) -> str:
    """`text` with the blocks that start in it blanked out."""
    out, pos = [], 0
    for b in blocks:
        if b.start >= len(text):
            break
        out.append(text[pos : b.start])
        pos = b.end
    out.append(text[pos:])
    return " ".join(out)


def _need(text: str, quoted: frozenset[str] = frozenset()) -> list[str]:
    out: list[str] = []
    for m in _NEED.finditer(text):
        if _need_key(m.group(1)) in quoted:
            continue  # the instructions' example line, copied back
        for name in re.split(r"[,\s]+", m.group(1)):
            name = name.strip("`'\"*[]().;")
            if name and name not in out and len(name) <= 300:
                out.append(name)
    return out


def _need_key(names: str) -> str:
    return "NEED:" + " ".join(names.split())


def _summary(text: str) -> str:
    text = _NEED.sub("", text)
    return " ".join(text.replace("`", "").split())


def _norm(code: str) -> str:
    """Code compared as a quote: dedented, trailing spaces and blank edges dropped."""
    lines = [line.rstrip() for line in textwrap.dedent(code.replace("\r\n", "\n")).split("\n")]
    return "\n".join(lines).strip("\n")


def _label(e: Edit) -> str:
    return f"{e.path} · {e.symbol}" if e.symbol else e.path
