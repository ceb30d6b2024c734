"""The commands that read what the daemon did: status, history, show, logs, proposals, quarantine,
memory. Each asks the running daemon and falls back to the state dir when it is down."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from autod.cli.common import (
    _ask,
    _block,
    _die,
    _emit,
    _offline,
    _operator_settings,
    _out,
    _settings,
    _warnings,
)
from autod.cli.view import ago, quarantine_lines, status_lines
from autod.config.settings import Settings

FOLLOW_LINES = 10  # `autod logs -f` starts from the last lines, as `tail -f` does
READ_LINES = 50


def cmd_status(args: argparse.Namespace) -> int:
    from autod.control.commands import offline_status
    from autod.control.socket import DaemonDown

    settings = _operator_settings(args)
    try:
        data = _ask(settings, "status", ping=True, timeout=30)
    except DaemonDown:
        off = _offline(settings)
        data = {"running": False, "note": "the daemon is not running; figures read from the state dir"}
        if off is not None:
            state, queue = off
            data |= offline_status(state, queue)
            data["paused"] = bool(state.get_kv("paused", False))
        from autod.checks import sandbox

        data["sandbox"] = sandbox.status(settings)
    # which config and state dir this answer is about (the daemon's own, or what the CLI looked at)
    data.setdefault("config_file", str(settings.config_file) if settings.config_file else None)
    data.setdefault("state_dir", str(settings.state_path))
    if args.json:
        from autod.safety.boundary import config_inside_workspace

        _emit(data | {"warnings": [w for w in (config_inside_workspace(settings),) if w]})
        return 0
    _warnings(settings)
    for line in status_lines(data):
        _out(line)
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    settings = _settings(args)
    off = _offline(settings)
    rows = off[0].history(args.n) if off else []
    if args.json:
        _emit(rows)
        return 0
    if not rows:
        _out("no cycles yet")
    for c in rows:
        files = ",".join(e["path"] for e in c["edits"]) or "-"
        dur = sum(c["durations_ms"].values()) if c["durations_ms"] else 0
        rb = c.get("rollback") or {}
        undone = f" restored={','.join(rb['restored']) or '-'}" if rb else ""
        undone += f" LEFT={','.join(rb['left'])}" if rb.get("left") else ""
        dl = c.get("delivery") or {}
        undone += f" branch={dl['branch']}" if dl.get("branch") else ""
        undone += f" patch={dl['patch']}" if dl.get("patch") else ""
        tried = [str(x.get("outcome")) for x in c.get("candidates") or []]
        undone += f" candidates={','.join(tried)}" if len(tried) > 1 else ""
        _out(
            f"{ago(c['started_at'])} {c['id']} {c['mode']:<10} {c['status'] or 'running':<18} "
            f"{dur:>6}ms files={files}{undone} {c['summary'][:60]}"
        )
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from autod.transcripts.show import NotFound, gather, render

    try:
        doc = gather(_settings(args), args.cycle)
    except NotFound as exc:
        return _die(str(exc), 1)
    if args.json:
        _emit(doc)
    else:
        render(doc, _out, prompts=args.prompts)
    return 0


def cmd_logs(args: argparse.Namespace) -> int:
    from autod.cli.logview import LogFilter, parse_since, run_logs

    settings = _settings(args)
    if args.n is None:  # like tail: -f starts from the last few lines, a plain read shows more
        args.n = FOLLOW_LINES if args.follow else READ_LINES
    try:
        since = parse_since(args.since) if args.since else None
    except ValueError as exc:
        return _die(f"--since: {exc}", 2)
    flt = LogFilter(cycle=args.cycle, phase=args.phase, level=args.level, mode=args.mode, since=since)
    try:
        return run_logs(
            settings.log_file, follow=args.follow, as_json=args.json, flt=flt, n=args.n, out=sys.stdout
        )
    except KeyboardInterrupt:
        return 0


def cmd_proposals(args: argparse.Namespace) -> int:
    from autod.control.commands import offline_status
    from autod.control.socket import DaemonDown

    settings = _settings(args)
    try:
        rows = _ask(settings, "proposals")["proposals"]
    except DaemonDown:
        off = _offline(settings)
        rows = offline_status(*off)["proposals"] if off else []
    if args.json:
        _emit(rows)
        return 0
    if not rows:
        _out("no pending proposals")
    for p in rows:
        _out(f"proposal {p['id']} ({p['mode']}, expires {ago(p['expires_at'])}): {p['summary']}")
        _out(f"  for: {p['event'][:120]}")
        for line in p["diff"].split("\n"):  # not splitlines(): U+2028 or NEL must not start a line
            _out("  " + line)
    return 0


def cmd_quarantine(args: argparse.Namespace) -> int:
    from autod.control.commands import quarantine_clear
    from autod.control.socket import DaemonDown

    settings = _settings(args)
    clear = args.quarantine_cmd == "clear"
    if clear and not (args.fingerprint or args.all):
        return _die("quarantine clear: name a fingerprint, or --all", 2)
    try:
        if clear:
            resp = _ask(settings, "quarantine_clear", fingerprint=args.fingerprint, all=args.all)
        else:
            resp = _ask(settings, "quarantine")
    except DaemonDown:  # the state db directly: the next start sees it
        off = _offline(settings)
        if off is None:
            resp = {"ok": True, "quarantined": [], "cleared": []}
        elif clear:
            resp = quarantine_clear(off[0], args.fingerprint, args.all)
        else:
            resp = {"ok": True, "quarantined": off[0].quarantined()}
    if not resp.get("ok"):
        return _die(resp.get("error", "failed"), 1)
    if args.json:
        _emit(resp.get("cleared") if clear else resp["quarantined"])
        return 0
    for line in quarantine_lines(resp, clear):
        _out(line)
    return 0


def cmd_memory(args: argparse.Namespace) -> int:
    from autod.control.socket import DaemonDown

    settings = _settings(args)
    cmd = f"memory_{args.memory_cmd}"
    kw: dict[str, Any] = {}
    if args.memory_cmd == "search":
        kw = {"query": args.query, "tier": args.tier, "k": args.k}
    elif args.memory_cmd == "prune":
        kw = {"dry_run": args.dry_run}
    try:
        resp = _ask(settings, cmd, label="pruning" if args.memory_cmd == "prune" else None, **kw)
    except DaemonDown:
        resp = asyncio.run(_memory_offline(settings, args.memory_cmd, kw))
    if not resp.get("ok"):
        return _die(resp.get("error", "failed"), 1)
    if args.json:
        _emit({k: v for k, v in resp.items() if k != "ok"})
        return 0
    from autod.memory import Recalled, Tier
    from autod.memory.report import format_hits, format_stats

    if args.memory_cmd == "stats":
        _block(format_stats(resp["stats"]))
    elif args.memory_cmd == "search":
        rows = resp["hits"]
        hits = [Recalled(h["id"], Tier(h["tier"]), h["text"], h["score"], h["metadata"]) for h in rows]
        _block(format_hits(hits))
    else:
        verb = "would remove" if resp.get("dry_run") else "removed"
        _out(f"{verb}: " + ", ".join(f"{t} {n}" for t, n in resp["removed"].items()))
    return 0


async def _memory_offline(settings: Settings, sub: str, kw: dict[str, Any]) -> dict[str, Any]:
    from autod.memory import Tier
    from autod.memory.identity import identity
    from autod.memory.report import hits_to_json
    from autod.memory.store import ChromaMemory, MemoryLocked, StoreTimeout, StoreUnavailable

    who = await asyncio.to_thread(identity, settings.state_path, settings.workspace, create=sub == "prune")
    try:
        mem = await ChromaMemory.open(settings.memory, settings.state_path, read_only=sub != "prune", who=who,
                                      token=settings.memory_token())
    except (StoreUnavailable, StoreTimeout, MemoryLocked) as exc:
        return {"ok": False, "error": str(exc)}
    try:
        if sub == "stats":
            return {"ok": True, "stats": await mem.stats()}
        if sub == "search":
            tier = Tier(kw["tier"].lower()) if kw.get("tier") else None
            hits = await mem.search(kw["query"], tier=tier, k=kw["k"])
            return {"ok": True, "hits": hits_to_json(hits)}
        return {"ok": True, "removed": await mem.prune(dry_run=kw["dry_run"]), "dry_run": kw["dry_run"]}
    finally:
        await mem.close()
