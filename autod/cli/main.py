"""`autod ...` commands: parse, call, print. Exit 78 on a bad config, never a traceback."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from autod import __version__
from autod.cli.common import _ask, _die, _emit, _offline, _operator_settings, _out, _settings, _warnings
from autod.cli.reading import (
    FOLLOW_LINES,
    READ_LINES,
    cmd_history,
    cmd_logs,
    cmd_memory,
    cmd_proposals,
    cmd_quarantine,
    cmd_show,
    cmd_status,
)
from autod.config.settings import EXIT_CONFIG, ConfigError, find_config
from autod.safety.filemodes import private_files

MODES = ("auto-debug", "auto-doc", "auto-plan")


# -- commands --------------------------------------------------------------------------------


def _minutes(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 10080:
        raise argparse.ArgumentTypeError(f"{text!r}: minutes, more than 0 and at most 10080")
    return value


def cmd_run(args: argparse.Namespace) -> int:
    from autod import heap, logs
    from autod.cli import demo
    from autod.daemon.supervisor import Daemon, DaemonAlreadyRunning
    from autod.threads import STOP_JOIN_S, exit_now, run_bounded

    if not args.once and demo.wanted(args.config, Path.cwd()):
        try:
            for line in demo.write(Path.cwd()):
                _out(f"autod: {line}", file=sys.stderr)
        except demo.DemoRefused as exc:
            return _die(str(exc), 2)
    settings = _settings(args)
    if args.once and not any(not c.fixer for c in settings.checks.values()):
        cfg = settings.config_file
        if cfg is None:
            why = "no config file found; the defaults have no checks: nothing would be run or verified"
            return _die(f"run --once: {why} (add `checks:`)", 2)
        # a config that names no check may still have queued requests (`autod trigger`) to work on
        _out(f"autod: run --once: {cfg} configures no checks: queued requests only, nothing verified",
             file=sys.stderr)
    if args.max_minutes is not None:
        if not args.once:
            return _die("--max-minutes bounds the cycles of `autod run --once`; a daemon takes "
                        "candidates.max_cycle_minutes from its config", 2)
        bound = settings.candidates.model_copy(update={"max_cycle_minutes": args.max_minutes})
        settings = settings.model_copy(update={"candidates": bound})
    heap.limit_arenas()  # before chromadb, onnxruntime and our pools start threads (autod.heap)
    # The state dir is private (0700) when autod makes it; made first, or the log dir's parents= would
    # create it with the umask's mode.
    settings.state_path.mkdir(mode=0o700, parents=True, exist_ok=True)
    logs.configure_logging(level=settings.logging.level, file=settings.log_file, secrets=settings.secrets())
    daemon = Daemon(settings, find_config(args.config), once=args.once)
    try:
        code, stuck = run_bounded(daemon.run(), join_s=STOP_JOIN_S)
    except DaemonAlreadyRunning as exc:
        return _die(str(exc), 2 if args.once else 1)  # --once: 1 means "checks still fail"
    except KeyboardInterrupt:
        return 0
    if stuck:  # a thread blocked past the stop's wait is left behind, never joined (autod.threads)
        log = logs.get_logger("autod.daemon")
        log.warning("daemon.threads_abandoned", threads=stuck, waited_s=STOP_JOIN_S)
        exit_now(code)
    return code


def cmd_config_check(args: argparse.Namespace) -> int:
    from autod.daemon.preflight import format_problem, problems

    settings = _settings(args)
    found = problems(settings)
    for problem in found:
        kind = "" if problem.error else "warning: "
        _out(f"autod: {kind}{format_problem(settings, problem)}", file=sys.stderr)
    if any(p.error for p in found):
        return EXIT_CONFIG
    where = find_config(args.config) or "(no file: defaults)"
    modes = ", ".join(settings.modes.enabled()) or "none"
    planner = "llm" if settings.llm.base_url else "rules"
    from autod.checks import sandbox

    st = sandbox.status(settings)
    refused = list(st["refused_checks"])  # type: ignore[call-overload]
    if refused:
        field = "checks.sandbox" if settings.checks_sandbox == "bwrap" else f"checks.{refused[0]}.sandbox"
        return _die(f"{where}: {field}: bwrap is required but {st['why']}", EXIT_CONFIG)
    _out(
        f"{where}: ok (workspace {settings.workspace}, modes {modes},"
        f" checks {', '.join(settings.checks) or 'none'}, planner {planner})"
    )
    _out(sandbox.describe(st))
    from autod.act.judges import rule_lines

    lines = rule_lines(settings)  # the effective deny, no-write, allow and judge lists
    if getattr(args, "rules", False):
        for line in lines:
            _out(line)
    else:
        _out("file rules: built-in" + (" plus limits.*_globs" if _own_globs(settings) else "")
             + " (`autod config check --rules` lists what is never read, edited or judged)")
    _warnings(settings)
    from autod.runtime.outage import unreachable_now

    if said := unreachable_now(settings):  # a warning: the config is valid all the same
        _out(f"autod: warning: {said}", file=sys.stderr)
    return 0


def _own_globs(settings: Any) -> bool:
    lim = settings.limits
    return bool(lim.deny_globs or lim.no_write_globs or lim.allow_globs)


def _daemon_call(args: argparse.Namespace, cmd: str, label: str | None = None, **kw: Any) -> int:
    from autod.control.socket import DaemonDown

    settings = _settings(args)
    if cmd == "approve":  # it waits for a cycle in flight, then its own checks, each up to its timeout
        kw["timeout"] = max(600.0, 120 + 2 * sum(c.timeout_s for c in settings.checks.values()))
    try:
        resp = _ask(settings, cmd, label=label, **kw)
    except DaemonDown:
        return _die(f"the daemon is not running; `{cmd}` needs it (start it with `autod run`)", 3)
    if getattr(args, "json", False):
        _emit(resp)
    elif resp.get("ok"):
        _out(_decision(cmd, resp))
    elif resp.get("error"):
        _out(f"autod: {resp['error']}", file=sys.stderr)
    else:  # the approved plan ran but did not hold: say how the cycle ended and why
        _out(f"autod: proposal {resp.get('proposal')} not applied: {_decision(cmd, resp)}", file=sys.stderr)
    return 0 if resp.get("ok") else 1


def _decision(cmd: str, resp: dict[str, Any]) -> str:
    """One line for a human: what approve or reject did."""
    if cmd == "reject":
        return f"rejected {resp['proposal']}; lesson stored: {resp.get('lesson', '')[:200]}"
    files = ", ".join(f"{e['path']} +{e['added']} -{e['removed']}" for e in resp.get("edits") or []) or "none"
    checks = ", ".join(f"{c['name']}={c['exit_code']}" for c in resp.get("checks") or []) or "none"
    reason = f" ({resp['reason']})" if resp.get("reason") else ""
    return f"cycle {resp.get('cycle_id')} {resp.get('status')}{reason}; files: {files}; checks: {checks}"


def cmd_approve(args: argparse.Namespace) -> int:
    return _daemon_call(args, "approve", label="applying and verifying", id=args.id)


def cmd_reject(args: argparse.Namespace) -> int:
    return _daemon_call(args, "reject", id=args.id, reason=args.reason)


def _set_pause(args: argparse.Namespace, paused: bool) -> int:
    from autod.control.socket import DaemonDown

    settings = _operator_settings(args)
    try:
        resp = _ask(settings, "pause" if paused else "resume")
        _out("paused" if resp.get("paused") else "resumed")
        return 0
    except DaemonDown:
        off = _offline(settings)
        if off is None:
            settings.state_path.mkdir(parents=True, exist_ok=True)
            from autod.stores.state import State

            off = (State(settings.state_path / "state.db"), None)
        off[0].set_kv("paused", paused)
        _out(
            f"{'paused' if paused else 'resumed'} (the daemon is not running; it starts "
            f"{'paused' if paused else 'normally'})"
        )
        return 0


def cmd_metrics(args: argparse.Namespace) -> int:
    from autod.cli.metrics import run

    return run(_settings(args), _ask)


def cmd_undo(args: argparse.Namespace) -> int:
    from autod.cli.undo import run

    return run(_settings(args), args.cycle, args.reason, args.json, _ask, _out, _die)


# -- parser ----------------------------------------------------------------------------------


JSON_HELP = "print one JSON document on stdout (for scripts)"


def build_parser() -> argparse.ArgumentParser:
    from autod.cli.retry import cmd_retry, cmd_trigger

    p = argparse.ArgumentParser(prog="autod", description="autonomous developer daemon")
    p.add_argument("--version", action="version", version=f"autod {__version__}",
                   help="print autod's version and exit")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-c",
        "--config",
        help="config file (default: $AUTOD_CONFIG, ./autod.yaml, ./config/autod.yaml, /etc/autod/autod.yaml)",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", help="what to do")

    def add(name: str, fn: Callable[[argparse.Namespace], int], help: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, parents=[common], help=help)
        sp.set_defaults(fn=fn)
        return sp

    r = add("run", cmd_run, "run the daemon in the foreground")
    r.add_argument("--once", action="store_true",
                   help="run every check, work through the queue, re-check the tree left, then exit:"
                        " 0 all checks pass, 1 some fail, 2 autod could not do its job")
    r.add_argument("--max-minutes", type=_minutes, metavar="M",
                   help="with --once: no cycle draws past M minutes; it ends unfixed, the deadline its"
                        " reason (candidates.max_cycle_minutes for this run)")
    cfg = sub.add_parser("config", help="config commands")
    cs = cfg.add_subparsers(dest="config_cmd", required=True, metavar="SUBCOMMAND", help="config command")
    chk = cs.add_parser("check", parents=[common], help="validate the config: exit 0, or 78 naming the field")
    chk.add_argument("--rules", action="store_true",
                     help="also print the effective never-read, deny, no-write, allow and judge lists")
    chk.set_defaults(fn=cmd_config_check)
    s = add("status", cmd_status, "daemon state, queue, counters, last cycles")
    s.add_argument("--json", action="store_true", help=JSON_HELP)
    h = add("history", cmd_history, "one row per cycle")
    h.add_argument("--json", action="store_true", help=JSON_HELP)
    h.add_argument("-n", type=int, default=20, help="how many cycles, newest first (20)")
    sh = add("show", cmd_show, "one cycle: its candidates and what the model was sent and answered")
    sh.add_argument("cycle", help="a cycle id (or its first characters) from `autod history`")
    sh.add_argument("--json", action="store_true", help="one JSON document: the record and the transcript")
    sh.add_argument("--prompts", action="store_true", help="print the messages sent to the model in full")
    lg = add("logs", cmd_logs, "read or follow the JSON log")
    lg.add_argument("-f", "--follow", action="store_true", help="keep printing new lines, across rotation")
    lg.add_argument("--json", action="store_true", help="print the JSON lines as they are in the file")
    lg.add_argument("--cycle", help="only this cycle's lines (a prefix of its id)")
    lg.add_argument("--phase", choices=["observe", "plan", "act", "reflect"], help="only lines of this phase")
    lg.add_argument("--level", choices=["debug", "info", "warning", "error"], help="this level and above")
    lg.add_argument("--mode", choices=list(MODES), help="only this mode's lines")
    lg.add_argument("--since", help="10m, 2h, 1d or an ISO time")
    lg.add_argument("-n", type=int, default=None, help=f"lines ({READ_LINES}; with -f {FOLLOW_LINES})")
    pr = add("proposals", cmd_proposals, "plans waiting for approval")
    pr.add_argument("--json", action="store_true", help=JSON_HELP)
    ap = add("approve", cmd_approve, "apply, verify and reflect a proposal")
    ap.add_argument("id", help="the proposal (a unique prefix of its id)")
    ap.add_argument("--json", action="store_true", help=JSON_HELP)
    rj = add("reject", cmd_reject, "reject a proposal (remembered as a lesson)")
    rj.add_argument("id", help="the proposal (a unique prefix of its id)")
    rj.add_argument("--reason", help="why: stored with the lesson later plans recall")
    rj.add_argument("--json", action="store_true", help=JSON_HELP)
    add("pause", lambda a: _set_pause(a, True), "stop starting cycles (sources keep queueing)")
    add("resume", lambda a: _set_pause(a, False), "start cycles again")
    qr = add("quarantine", cmd_quarantine, "failures autod stopped trying to fix; clear them")
    qr.add_argument("--json", action="store_true", help=JSON_HELP)
    qrs = qr.add_subparsers(dest="quarantine_cmd", metavar="SUBCOMMAND", help="clear: try one again")
    qc = qrs.add_parser("clear", parents=[common], help="try a fingerprint again (or --all)")
    qc.add_argument("fingerprint", nargs="?", help="the quarantined fingerprint (a unique prefix)")
    qc.add_argument("--all", action="store_true", help="clear every quarantined fingerprint")
    qc.add_argument("--json", action="store_true", help=JSON_HELP)
    qc.set_defaults(fn=cmd_quarantine)
    t = add("trigger", cmd_trigger, "run a mode now: starts its waiting event, or queues a manual one")
    t.add_argument("mode", choices=list(MODES), help="the mode to run")
    t.add_argument("--path", help="a workspace file the mode should look at (always a new event)")
    t.add_argument("--message", help="what to do, shown to the planner (always a new event)")
    rt = add("retry", cmd_retry, "run waiting retries now (daemon down: at its next start)")
    rt.add_argument("event", nargs="?", help="the waiting event: a unique prefix of its id (autod status)")
    rt.add_argument("--all", action="store_true", help="every waiting event")
    rt.add_argument("--json", action="store_true", help=JSON_HELP)
    add("metrics", cmd_metrics, "print the Prometheus metrics (what a scrape of metrics.listen gets)")
    un = add("undo", cmd_undo, "take back a kept cycle (refused when its files changed since)")
    un.add_argument("cycle", help="a kept cycle's id (or its first characters) from `autod history`")
    un.add_argument("--reason", help="why (stored as a lesson, like a rejection)")
    un.add_argument("--json", action="store_true", help=JSON_HELP)
    m = sub.add_parser("memory", help="tiered memory")
    ms = m.add_subparsers(dest="memory_cmd", required=True, metavar="SUBCOMMAND", help="memory command")
    st = ms.add_parser("stats", parents=[common], help="items per tier, spool and health")
    st.add_argument("--json", action="store_true", help=JSON_HELP)
    se = ms.add_parser("search", parents=[common], help="what memory holds that is like QUERY")
    se.add_argument("query", help="text to search for")
    se.add_argument("--tier", choices=["N0", "N1", "N2", "n0", "n1", "n2"],
                    help="only this tier: N0 observations, N1 episodes, N2 lessons")
    se.add_argument("-k", type=int, default=10, help="how many results (10)")
    se.add_argument("--json", action="store_true", help=JSON_HELP)
    pu = ms.add_parser("prune", parents=[common], help="apply the retention limits now")
    pu.add_argument("--dry-run", action="store_true", help="only count what would be removed")
    pu.add_argument("--json", action="store_true", help=JSON_HELP)
    for sp in (st, se, pu):
        sp.set_defaults(fn=cmd_memory)
    return p


def main(argv: list[str] | None = None) -> int:
    from autod import heap

    # every command: `autod memory prune` writes the index as `autod run` does (autod.heap)
    heap.pin_mmap_threshold()
    heap.scrub_freed()
    args = build_parser().parse_args(argv)
    try:
        with private_files():  # whatever a command creates for autod is 0700/0600 (autod.safety.filemodes)
            return int(args.fn(args))
    except ConfigError as exc:
        return _die(str(exc), EXIT_CONFIG)
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:  # Ctrl-C while waiting (e.g. on approve): the daemon carries on
        return 130
    except Exception as exc:  # never a traceback for the operator; the daemon logs its own
        return _die(f"{type(exc).__name__}: {str(exc)[:300]}", 2)


if __name__ == "__main__":
    sys.exit(main())
