"""What every `autod` command shares: load the config, ask the daemon, print for a human or a script."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from autod import logs
from autod.cli.view import Progress
from autod.config.settings import ConfigError, Settings, load_config
from autod.safety import termsafe


def _out(text: str, *, file: Any = None) -> None:
    """Print one line for a human, terminal-safe (text from an LLM, a log or a file cannot drive it) and
    redacted as the daemon's log is: the configured secrets in every form, credential-looking values."""
    print(termsafe.line(logs.redact_text(text)), file=file)


def _block(text: str) -> None:
    """Print lines for a human (a table, memory's hits), terminal-safe and redacted as `_out` is: what
    memory holds was written before every write was redacted (autod.memory.resilient)."""
    print(termsafe.block(logs.redact_text(text)))


def _die(msg: str, code: int) -> int:
    _out(f"autod: {msg}", file=sys.stderr)
    return code


def _loaded(settings: Settings) -> Settings:
    """`settings`, its secrets now redacted from whatever the command prints (as the daemon's log)."""
    logs.set_secrets(settings.secrets())
    return settings


def _settings(args: argparse.Namespace) -> Settings:
    return _loaded(load_config(args.config))


def _operator_settings(args: argparse.Namespace) -> Settings:
    """The config for status, pause and resume: a file that no longer validates (a refused reload) is a
    warning, not a lock-out; the daemon's state dir is found from the file's workspace and state_dir."""
    try:
        return _loaded(load_config(args.config))
    except ConfigError as exc:
        from autod.config.fallback import state_only

        settings = state_only(args.config)
        if settings is None:
            raise
        _out(
            f"autod: warning: the config file on disk is invalid: {exc}; a running daemon keeps the config"
            " it loaded last (fix the file before it restarts)",
            file=sys.stderr,
        )
        return settings


def _emit(data: Any) -> None:
    print(logs.redact_text(json.dumps(data, indent=2, default=str)))


def _ask(settings: Settings, cmd: str, *, label: str | None = None, **kw: Any) -> dict[str, Any]:
    from autod.control.socket import request

    if label:
        with Progress(label):
            return request(settings, cmd, **kw)
    return request(settings, cmd, **kw)


def _offline(settings: Settings) -> tuple[Any, Any] | None:
    from autod.stores.queue import EventQueue
    from autod.stores.state import State

    sp = settings.state_path
    if not (sp / "state.db").exists():
        return None
    return State(sp / "state.db"), EventQueue(sp / "queue.db")


def _warnings(settings: Settings) -> list[str]:
    """Print on stderr (and return) what the operator should know about this config, one line each."""
    from autod.safety.boundary import config_inside_workspace

    found = [w for w in (config_inside_workspace(settings),) if w]
    for warning in found:
        _out(f"autod: warning: {warning}", file=sys.stderr)
    return found
