"""How `autod` commands print what they learnt, for a human: status, retries, quarantine, a spinner.

Every line goes out through cli._out (termsafe): these only build the text.
"""

from __future__ import annotations

import sys
import threading
import time
from datetime import UTC, datetime
from typing import Any

__all__ = ["Progress", "ago", "quarantine_lines", "status_lines"]


def ago(ts: float | None) -> str:
    if not ts:
        return "-"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S")


class Progress:
    """A spinner on stderr for long operations (only on a TTY)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._spin, daemon=True)

    def _spin(self) -> None:
        start = time.monotonic()
        frames = "|/-\\"
        i = 0
        while not self._stop.wait(0.2):
            sys.stderr.write(f"\r{frames[i % 4]} {self.label} ({time.monotonic() - start:.0f}s)")
            sys.stderr.flush()
            i += 1
        sys.stderr.write("\r" + " " * (len(self.label) + 16) + "\r")

    def __enter__(self) -> Progress:
        if sys.stderr.isatty():
            self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._t.is_alive():
            self._t.join()


def status_lines(data: dict[str, Any]) -> list[str]:
    """`autod status` for a human, one line per fact."""
    out = daemon_lines(data) if data.get("running") else down_lines(data)
    config = data.get("config_file") or "(none: defaults)"
    out.append(f"  config: {config}   state dir: {data.get('state_dir')}")
    q = data.get("queue")
    if q:
        out.append(f"  queue depth: {q.get('depth')}")
        out += retry_lines(q.get("retries") or [])
    if data.get("proposals"):
        out.append(f"  pending proposals: {len(data['proposals'])} (autod proposals)")
    for qd in data.get("quarantined", []) or []:
        out.append(f"  quarantined {qd['fingerprint']}: {qd['summary'][:100]} (autod quarantine clear)")
    for c in (data.get("last_cycles") or [])[:5]:
        status = c["status"] or "running"
        out.append(f"  {ago(c['started_at'])} {c['id']} {c['mode']:<10} {status:<16} {c['summary'][:70]}")
    return out


def draws_line(d: dict[str, Any]) -> str:
    """The current cycle's draws for a person (autod.candidates.clock.DrawProgress.as_dict)."""
    from autod.candidates.clock import DrawProgress

    return DrawProgress(d["done"], d["planned"], d["model_s"], d.get("checks_s") or 0.0, d.get("eta_s"),
                        d.get("deadline_in_s")).line()


def daemon_lines(data: dict[str, Any]) -> list[str]:
    out = [
        f"autod running (pid {data['pid']}, up {data['uptime_s']:.0f}s)"
        f"{' — PAUSED' if data.get('paused') else ''}"
    ]
    if data.get("wedged"):
        w = data["wedged"]
        out.append(f"  WEDGED: {w['what']} for {w['running_s']:.0f}s (deadline {w['deadline_s']:.0f}s)")
    if data.get("waiting"):
        out.append(f"  waiting: {data['waiting']}")
    if data.get("current_cycle"):
        c = data["current_cycle"]
        out.append(f"  in cycle {c['cycle_id']} ({c['mode']}, {c.get('phase') or '-'}): {c['summary'][:100]}")
        if c.get("draws"):
            out.append(f"  draws: {draws_line(c['draws'])}")
    out.append(f"  modes: {', '.join(data.get('modes', [])) or 'none'}   memory: {data.get('memory')}")
    out += sandbox_lines(data)
    llm = data.get("llm", {})
    if llm.get("configured"):
        circuit = (llm.get("circuit") or {}).get("state", "?")
        out.append(f"  llm: {llm.get('endpoint')} reachable={llm.get('reachable')} circuit={circuit}")
    else:
        out.append("  llm: not configured (offline rules planner)")
    for s in data.get("sources", []):
        err = f" last error: {s['last_error']}" if s.get("last_error") else ""
        counts = f"events {s['events']}, restarts {s['restarts']}"
        out.append(f"  source {s['name']}: {s['state']} ({counts}){err}")
    for name, c in data.get("checks", {}).items():
        if c.get("error"):
            out.append(f"  check {name}: CANNOT START (configuration error): {c['error']}")
        else:
            out.append(f"  check {name}: {'ok' if c['ok'] else 'FAILING'} (exit {c['exit_code']})")
        if c.get("changed"):
            files = ", ".join(c["changed"][:5]) + (" ..." if len(c["changed"]) > 5 else "")
            out.append(f"    WARNING: check {name} changed source files: {files}"
                       " (a fix verified by this check is rolled back)")
    for problem in data.get("config_problems") or []:
        out.append(f"  config error: {problem}")
    for name, c in data.get("counters", {}).items():
        out.append(f"  {name}: {c['used']}/{c['cap']}")
    return out + output_lines(data)


def output_lines(data: dict[str, Any]) -> list[str]:
    """Metrics, webhooks and delivery: what is served, who is told, where fixes go."""
    out = []
    now = time.time()
    m = data.get("metrics") or {}
    if m.get("state") == "serving":
        out.append(f"  metrics: serving {m['url']}")
    elif m.get("state") == "failed":
        wait = max(0.0, (m.get("next_try") or now) - now)
        retry = f"; next try in {wait:.0f}s" if m.get("next_try") else ""
        out.append(f"  metrics: NOT SERVING {m.get('listen')}: {m.get('error')} (the daemon runs on{retry})")
    for w in data.get("webhooks") or []:
        counts = f"queued {w['queued']}, sent {w['sent']}, dropped {w['dropped']}"
        if w.get("state") == "down":
            retry = max(0.0, (w.get("next_try") or now) - now)
            out.append(f"  webhook {w['name']}: DOWN since {ago(w.get('down_since'))}: {w.get('last_error')}"
                       f" ({counts}; next try in {retry:.0f}s)")
        else:
            out.append(f"  webhook {w['name']}: ok ({counts})")
    d = data.get("delivery") or {}
    if d.get("modes"):
        modes = ", ".join(f"{m} -> {k}" for m, k in d["modes"].items())
        push = f" (push to {d['push']})" if d.get("push") else ""
        out.append(f"  delivery: {modes}{push}; open {d.get('open', 0)}/{d.get('max_open')}")
        if d.get("unavailable"):
            out.append(f"  delivery: UNAVAILABLE ({d['unavailable']}): no fix is verified or delivered")
        if d.get("at_cap"):
            out.append(f"  delivery: CAP REACHED ({d.get('open')}/{d.get('max_open')} open):"
                       f" {len(d.get('held') or [])} failure(s) wait; merge or delete a branch or patch")
    for item in d.get("items") or []:
        flags = item["state"] + (", pushed" if item.get("pushed") else "")
        out.append(f"    {item['kind']} {item['name']} ({flags}): {item['summary'][:70]}")
    for p in d.get("problems") or []:
        out.append(f"  delivery problem {ago(p['at'])}: {p['problem'][:200]}")
    return out


def down_lines(data: dict[str, Any]) -> list[str]:
    out = ["autod is not running" + (" (figures read from the state dir)" if "queue" in data else "")]
    if data.get("paused"):
        out.append("  paused: it starts paused (autod resume)")
    return out + sandbox_lines(data)


def sandbox_lines(data: dict[str, Any]) -> list[str]:
    if not data.get("sandbox"):
        return []
    from autod.checks.sandbox import describe

    return [f"  {describe(data['sandbox'])}"]


def retry_lines(rows: list[dict[str, Any]]) -> list[str]:
    """One line per event waiting for a retry: its id (for `autod retry`), one due time (its own, or
    later when a limit holds every cycle: then that limit is named), its try count, and why it waits."""
    out = []
    now = time.time()
    for r in rows:
        if r["status"] == "in_flight":
            when = "running now"
        else:
            due_in = r.get("due_in_s")
            due_in = max(0.0, (r.get("not_before") or now) - now) if due_in is None else due_in
            when = f"due in {due_in:.0f}s" if due_in >= 1 else "due now"
            if r.get("held"):
                when += f" (held: {r['held'][:80]})"
        why = (r.get("last_error") or "")[:120]
        out.append(f"  retry {r['id'][:12]} (tried {r['retries']}x) {when}: {r['summary'][:70]} -- {why}")
    return out


def quarantine_lines(resp: dict[str, Any], clear: bool) -> list[str]:
    if clear:
        lines = [f"cleared {fp}" for fp in resp.get("cleared") or []] or ["nothing was quarantined"]
        rechecking = resp.get("rechecking") or []
        return lines + ([f"running {', '.join(rechecking)} now: a failure it still has is worked on again"]
                        if rechecking else [])
    rows = resp.get("quarantined") or []
    if not rows:
        return ["nothing is quarantined"]
    return [
        f"{r['fingerprint']} since {ago(r['quarantined_at'])} after {r['attempts']} attempts"
        f"{' (check ' + r['check_name'] + ')' if r.get('check_name') else ''}: {r['summary'][:100]}"
        for r in rows
    ]
