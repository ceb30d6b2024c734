"""`autod retry` and `autod trigger`: the operator moves waiting events (autod.runtime.waiting).

With the daemon up both go over the control socket; with it down they change the queue db, so the
next start sees them (as `pause` and `quarantine clear` do).
"""

from __future__ import annotations

import argparse
from typing import Any

from autod.cli.common import _ask, _die, _emit, _out, _settings
from autod.config.settings import Settings


def _queue(settings: Settings, *, create: bool) -> Any:
    from autod.stores.queue import EventQueue

    path = settings.state_path / "queue.db"
    if not path.exists() and not create:
        return None
    settings.state_path.mkdir(parents=True, exist_ok=True)
    return EventQueue(path)


def _shown(row: dict[str, Any]) -> str:
    return f"{row['id'][:12]} (tried {row['retries']}x): {row['summary'][:100]}"


def cmd_retry(args: argparse.Namespace) -> int:
    from autod.control.socket import DaemonDown
    from autod.runtime.waiting import retry_now

    if not args.all and not args.event:
        return _die("retry: name a waiting event (a prefix of its id, from `autod status`), or --all", 2)
    settings = _settings(args)
    running = True
    try:
        resp = _ask(settings, "retry", event=args.event, all=args.all)
    except DaemonDown:
        running = False
        queue = _queue(settings, create=False)
        if queue is None:
            resp = _nothing_waits(args.event, args.all)
        else:
            try:
                resp = retry_now(queue, args.event, args.all)
            finally:
                queue.close()
    if not resp.get("ok"):
        return _die(resp.get("error", "failed"), 1)
    if args.json:
        _emit({"running": running, "due": resp["due"]})
        return 0
    if not resp["due"]:
        _out("nothing waits for a retry")
    for row in resp["due"]:
        _out(f"{'retrying now' if running else 'due at the next start'}: {_shown(row)}")
    if resp["due"] and not running:
        _out("(the daemon is not running; they run when autod starts)")
    return 0


def _nothing_waits(event: str | None, everything: bool) -> dict[str, Any]:
    """No queue db yet: nothing waits."""
    if everything:
        return {"ok": True, "due": []}
    return {"ok": False, "error": f"no event {event} waits for a retry (autod status lists them)"}


def cmd_trigger(args: argparse.Namespace) -> int:
    from autod.control.commands import manual_event
    from autod.control.socket import DaemonDown

    settings = _settings(args)
    try:
        resp = _ask(settings, "trigger", mode=args.mode, path=args.path, message=args.message)
    except DaemonDown:
        if args.mode not in settings.modes.enabled():
            return _die(f"mode {args.mode} is not enabled in the config", 1)
        queue = _queue(settings, create=True)
        try:
            started = [] if args.path or args.message else _start_waiting_offline(settings, queue, args.mode)
            if started:
                for row in started:
                    _out(f"due at the next start: waiting event {_shown(row)} (not queued twice)")
                return 0
            event = manual_event(args.mode, args.path, args.message)
            queue.put(event)
        finally:
            queue.close()
        _out(f"queued {event.id} (the daemon is not running; it runs when autod starts)")
        return 0
    if not resp.get("ok"):
        return _die(resp.get("error", "failed"), 1)
    for row in resp.get("due") or []:
        _out(f"started the waiting event {_shown(row)} instead of queueing another")
    if resp.get("event_id"):
        _out(f"queued {resp['event_id']}")
    return 0


def _start_waiting_offline(settings: Settings, queue: Any, mode: str) -> list[dict[str, Any]]:
    from autod.daemon.wiring import build_modes
    from autod.runtime.waiting import start_waiting

    takes = next((m.handles for m in build_modes(settings) if m.name == mode), None)
    return start_waiting(queue, takes) if takes is not None else []
