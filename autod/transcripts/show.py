"""`autod show CYCLE`: one cycle as an operator reads it - what failed, what went into the prompt,
what memory contributed (the items recalled, a fix replayed from it), every candidate the model drew
and what became of it (a refusal with the offending text), and every exchange with the server (with
`--prompts`, the messages it was sent). Reads the state db and the transcript directly, so it works
with the daemon up or down."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from autod.config.settings import Settings
from autod.linebreaks import lines_of
from autod.safety import safejson
from autod.transcripts import TranscriptStore

SHOWN_CHARS = 1500  # of a reply or an edit's text in the human view (--json has all of it)


class NotFound(Exception):
    pass


def gather(settings: Settings, cycle: str) -> dict[str, Any]:
    """{"cycle": the history row with its record, "transcript": entries}; NotFound naming why."""
    from autod.stores.state import State

    db = settings.state_path / "state.db"
    rows = State(db).cycle_record(cycle.strip().lower()) if db.exists() else []
    store = TranscriptStore(settings.state_path)
    if not rows:
        ids = store.find(cycle.strip().lower())
        if len(ids) != 1:
            raise NotFound(f"no cycle {cycle!r} in {db} (see `autod history`)")
        return {"cycle": {"id": ids[0]}, "transcript": store.read(ids[0])}
    if len(rows) > 1:
        ids = ", ".join(r["id"] for r in rows)
        raise NotFound(f"{cycle!r} names {len(rows)} cycles ({ids}): give more of the id")
    row = rows[0]
    return {"cycle": row, "transcript": store.read(row["id"])}


def render(doc: dict[str, Any], out: Callable[[str], None], *, prompts: bool = False) -> None:
    """The human view, line by line through `out` (which makes each line terminal-safe)."""
    c = doc["cycle"]
    rec = c.get("record") or {}
    when = _when(c.get("started_at"))
    out(f"cycle {c.get('id')}  {c.get('mode', '')}  {c.get('kind', '')}  {when}")
    if c.get("summary"):
        out(f"  failure: {c['summary'][:300]}")
    out(f"  status:  {c.get('status') or 'running'}" + (f" ({c['reason'][:500]})" if c.get("reason") else ""))
    if rec.get("edits"):
        out("  edits:   " + ", ".join(f"{e['path']} +{e['added']} -{e['removed']}" for e in rec["edits"]))
    for ctx in rec.get("context") or []:
        name = f" · {ctx['symbol']}" if ctx.get("symbol") else ""
        out(f"  context: {ctx.get('path')}{name} ({ctx.get('lines')}; {ctx.get('why')})")
    _memory(rec, out)
    entries = doc.get("transcript") or []
    if not entries:
        out("  (no transcript: the cycle asked no model, or transcripts are off)")
        return
    out("")
    for e in entries:
        kind = e.get("kind")
        if kind == "exchange":
            _exchange(e, out, prompts)
        elif kind == "candidate":
            _candidate(e, out)
        elif kind == "plan":
            plan = e.get("plan") or {}
            edits = plan.get("edits") or []
            where = ", ".join(
                str(x.get("path")) + (f"::{x['symbol']}" if x.get("symbol") else "") for x in edits
            )
            summary = str(plan.get("summary"))[:300]
            out(f"plan ({_view(e)}seed {e.get('seed')}, choice {e.get('choice')}): {summary}"
                + (f" -> {where}" if where else " (no edits)"))
        elif kind == "invalid":
            out(f"invalid reply (seed {e.get('seed')}): {e.get('reason')}")
        elif kind == "outcome":
            why = f" ({str(e.get('reason'))[:300]})" if e.get("reason") else ""
            out(f"outcome: {e.get('status')}{why}")
        elif kind == "note":
            out(f"note: {e.get('text')}")


def _memory(rec: dict[str, Any], out: Callable[[str], None]) -> None:
    """What memory contributed: the items recalled (into the prompts) and any fix replayed from it."""
    if rec.get("memory_used"):
        out(f"  memory:  recalled {', '.join(str(i) for i in rec['memory_used'])}")
    for c in rec.get("candidates") or []:
        if c.get("replay_of"):
            out(f"  memory:  replayed the fix of {c['replay_of']} as candidate {c.get('n')}: "
                f"{c.get('outcome')} (no model call)")


def _exchange(e: dict[str, Any], out: Callable[[str], None], prompts: bool) -> None:
    params = e.get("params") or {}
    shown = ", ".join(f"{k} {params[k]}" for k in ("seed", "temperature", "n", "max_tokens") if k in params)
    out(f"request to {e.get('endpoint')}: HTTP {e.get('status')} in {int(e.get('ms') or 0) / 1000:.1f}s"
        f" ({shown}; response_format {e.get('response_format')})")
    messages = e.get("messages") or []
    if prompts:
        for m in messages:
            out(f"  --- {m.get('role')} ---")
            for line in lines_of(str(m.get("content", ""))):
                out(f"  {line}")
    else:
        sizes = ", ".join(f"{m.get('role')} {len(str(m.get('content', ''))):,} chars" for m in messages)
        out(f"  prompt: {sizes} (--prompts prints it)")
    reply = str(e.get("reply") or "")
    try:
        doc = safejson.loads(reply)
        content = doc["choices"][0]["message"]["content"]
        reply = content if isinstance(content, str) else reply
    except (ValueError, KeyError, IndexError, TypeError):
        pass
    out("  reply:")
    for line in lines_of(_cut(reply)):
        out(f"    {line}")


def _view(e: dict[str, Any]) -> str:
    """Which prompt a plan came from ("focused:2 prompt, "): each numbers its own seeds; a replay
    came from memory."""
    if e.get("replay_of"):
        return f"replayed from memory {e['replay_of']}, "
    return f"{e['view']} prompt, " if e.get("view") else ""


def _candidate(e: dict[str, Any], out: Callable[[str], None]) -> None:
    head = (f"candidate {e.get('n')} (attempt {e.get('attempt')}, {_view(e)}seed {e.get('seed')},"
            f" temperature {e.get('temperature')}): {e.get('outcome')}")
    if e.get("reason"):
        head += f" - {e['reason']}"
    out(head)
    for x in e.get("edits") or []:  # a refused candidate's edits: the text autod could not use
        target = f"{x.get('path')}" + (f" :: {x['symbol']}" if x.get("symbol") else "")
        out(f"  edit {target}")
        if x.get("search"):
            out("    search:")
            for line in lines_of(_cut(str(x["search"]))):
                out(f"      {line}")
        out("    replace:")
        for line in lines_of(_cut(str(x.get("replace", "")))):
            out(f"      {line}")
    if e.get("diff"):
        for line in lines_of(_cut(str(e["diff"]))):
            out(f"  {line}")


def _cut(text: str) -> str:
    if len(text) <= SHOWN_CHARS:
        return text
    return text[:SHOWN_CHARS] + f"\n[... {len(text) - SHOWN_CHARS} more characters: --json]"


def _when(ts: Any) -> str:
    try:
        return datetime.fromtimestamp(float(ts), UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (TypeError, ValueError):
        return ""
