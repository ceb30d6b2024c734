"""Structured logging: one structlog chain, JSON lines to a file, readable text on stderr.

Every record passes the same pipeline: context (cycle_id, event_id, mode, phase from
contextvars), level, logger name, an ISO-8601 UTC timestamp, exception rendering without
locals, redaction of secrets (and lone surrogates escaped: `autod.fsnames`), then a renderer per
handler: JSON for the file (what `autod logs` reads), console text for stderr (coloured on a TTY;
under journald plain, and each line prefixed with its syslog priority, ``<3>`` error to ``<7>``
debug, so `journalctl -p` works).
Records from libraries (httpx, chromadb, apscheduler) go through the same formatters at
WARNING and above.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import logging.handlers
import os
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

from autod import fsnames
from autod.safety import keyblocks, secretforms, termsafe

__all__ = [
    "PHASES",
    "bind_cycle",
    "clear_cycle",
    "configure_logging",
    "flush",
    "get_logger",
    "redact",
    "redact_secrets",
    "redact_text",
    "redact_tree",
    "set_phase",
    "set_secrets",
    "survive",
]

PHASES = ("observe", "plan", "act", "reflect")
REDACTED = "***"
ROOT_LOGGER = "autod"
_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
           "error": logging.ERROR, "critical": logging.CRITICAL}
_CYCLE_KEYS = ("cycle_id", "event_id", "mode", "phase")
# Libraries that are chatty at INFO (httpx logs every request) or noisy at any level
# (chromadb's telemetry client logs an error whenever it cannot phone home).
_QUIET = {"httpx": logging.WARNING, "httpcore": logging.WARNING, "apscheduler": logging.WARNING,
          "chromadb": logging.WARNING, "chromadb.telemetry": logging.CRITICAL + 1,
          "watchfiles": logging.WARNING}

# ---------------------------------------------------------------------------------------
# Redaction

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]+"), r"\1" + REDACTED),
    (re.compile(r"""(?i)\b(authorization["']?\s*[:=]\s*["']?)[^"'\r\n,}]+"""), r"\1" + REDACTED),
    (re.compile(r"sk-[A-Za-z0-9_-]{8,}"), REDACTED),
    (re.compile(r"""(?i)(?<![a-z])((?:api[_-]?key|password|passwd|secret[_-]?(?:access[_-]?)?key|client[_-]?secret)"""
                r"""["']?\s*[:=]\s*["']?)[^"'\s&,;}]+"""),
     r"\1" + REDACTED),
    # well-known credential formats, whoever configured them: private key blocks, cloud and forge tokens
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), REDACTED),
    (re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}|glpat-[A-Za-z0-9_-]{20,})"),
     REDACTED),
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"), REDACTED),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"), REDACTED),
)
_SECRET_KEY_PARTS = ("api_key", "apikey", "authorization", "password", "passwd", "secret", "token",
                     "credential")
_secret_re: re.Pattern[str] | None = None


def set_secrets(secrets: Sequence[str]) -> None:
    """Replace the secrets redacted from every log line, event, prompt and memory item (on start and
    reload): each value exactly and in the forms a check can print it (`autod.safety.secretforms`: base64 at
    any alignment, hex, URL-encoded, reversed, separated...)."""
    global _secret_re
    _secret_re = secretforms.pattern(secrets)


def redact_text(text: str) -> str:
    """`text` with the configured secrets and credential-looking values replaced by ***.

    The same rules as every log line; used for check output and log excerpts before they reach an
    Event payload, a prompt or memory (the daemon sets the secrets at start-up and on reload).
    """
    return _redact_text(text)


def redact_secrets(text: str) -> str:
    """Only the configured secret values replaced by *** (for whole prompts: source code stays as is)."""
    return _secret_re.sub(REDACTED, text) if _secret_re is not None else text


def redact_tree(value: Any) -> Any:
    """A copy of a JSON-like value with configured secrets (in every form) replaced in each string, lone
    surrogates escaped: what the state db stores of a cycle (its record may quote what the LLM or a
    check wrote, or a file name that is not UTF-8)."""
    if isinstance(value, str):
        return redact_secrets(fsnames.shown(value))
    if isinstance(value, dict):
        return {fsnames.encodable(k): redact_tree(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_tree(v) for v in value]
    return value


def _redact_text(text: str) -> str:
    text = fsnames.shown(text)  # every line, event, prompt and transcript is then encodable
    if _secret_re is not None:
        text = _secret_re.sub(REDACTED, text)
    text = keyblocks.redacted(text, REDACTED)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def _is_secret_key(key: object) -> bool:
    name = str(key).lower().replace("-", "_")
    return any(part in name for part in _SECRET_KEY_PARTS)


def _redact_value(value: Any) -> Any:
    # New containers, never in place: the caller's objects must stay as they were.
    if isinstance(value, str):
        return _redact_text(value)
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, dict):
        return {k: _redact_item(k, v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_redact_value(v) for v in value]
    # Anything else would be str()-ed by the renderer; do it here so redaction sees it.
    return _redact_text(str(value))


def _redact_item(key: object, value: Any) -> Any:
    if isinstance(value, str) and value and _is_secret_key(key):
        return REDACTED
    return _redact_value(value)


def redact(_: WrappedLogger, __: str, event_dict: EventDict) -> EventDict:
    """structlog processor: configured secrets, credential patterns and secret-named keys -> ***."""
    return {k: _redact_item(k, v) for k, v in event_dict.items()}


# ---------------------------------------------------------------------------------------
# Renderers


def _render_json(_: WrappedLogger, __: str, event_dict: EventDict) -> str:
    # timestamp, level, event first: the file is also read by people with `less`, so NEL, U+2028/9,
    # C1 and bidi controls are written as \uXXXX escapes (the same JSON values, a safe screen).
    head = {k: event_dict[k] for k in ("timestamp", "level", "event") if k in event_dict}
    head.update(event_dict)
    return termsafe.json_text(json.dumps(head, default=str, ensure_ascii=False))


def _terminal_safe(_: WrappedLogger, __: str, event_dict: EventDict) -> EventDict:
    # The console renderer repr()s values (escaping controls) but prints the event text and the
    # exception block as they are: those two are made terminal-safe here.
    out = dict(event_dict)
    for key, shown in (("event", termsafe.line), ("exception", termsafe.block)):
        if isinstance(out.get(key), str):
            out[key] = shown(out[key])
    return out


def _drop_timestamp(_: WrappedLogger, __: str, event_dict: EventDict) -> EventDict:
    # journald stamps every line itself.
    event_dict.pop("timestamp", None)
    return event_dict


_SHARED: list[Processor] = [
    structlog.contextvars.merge_contextvars,
    structlog.stdlib.add_log_level,
    structlog.stdlib.add_logger_name,
    structlog.processors.TimeStamper(fmt="iso", utc=True, key="timestamp"),
]


def _formatter(renderer: Processor, *, text_exceptions: bool, journal: bool) -> logging.Formatter:
    if text_exceptions:
        exceptions = structlog.processors.ExceptionRenderer()  # plain traceback text, never locals
    else:
        exceptions = structlog.processors.ExceptionRenderer(
            structlog.tracebacks.ExceptionDictTransformer(show_locals=False)
        )
    processors: list[Processor] = [structlog.stdlib.ProcessorFormatter.remove_processors_meta, exceptions]
    if journal:
        processors.append(_drop_timestamp)
    # Redaction after exception rendering so the traceback text is redacted too.
    processors += [redact]
    if text_exceptions:
        processors.append(_terminal_safe)
    processors.append(renderer)
    return structlog.stdlib.ProcessorFormatter(
        processors=processors, foreign_pre_chain=[structlog.stdlib.ExtraAdder(), *_SHARED]
    )


_PRIORITIES = ((logging.CRITICAL, 2), (logging.ERROR, 3), (logging.WARNING, 4), (logging.INFO, 6))


def _syslog_priority(levelno: int) -> int:
    """The syslog priority of a logging level: 2 crit, 3 err, 4 warning, 6 info, 7 debug."""
    for threshold, priority in _PRIORITIES:
        if levelno >= threshold:
            return priority
    return 7


class _JournalPriority(logging.Formatter):
    """Prefix each line with ``<N>`` (sd-daemon(3)): journald then stores it at that priority, so
    ``journalctl -p warning`` shows autod's warnings and errors. A traceback is several lines, and
    journald reads each line on its own: every one gets the prefix."""

    def __init__(self, inner: logging.Formatter) -> None:
        super().__init__()
        self._inner = inner

    def format(self, record: logging.LogRecord) -> str:
        prefix = f"<{_syslog_priority(record.levelno)}>"
        return "\n".join(prefix + line for line in self._inner.format(record).split("\n"))


def _stderr_is_journal() -> bool:
    """stderr is the journal stream systemd connected (JOURNAL_STREAM is ``device:inode`` of it).

    A child that inherited the variable but writes elsewhere (``2>file``) is not; a stream without a
    descriptor (a test's fake) trusts the variable.
    """
    value = os.environ.get("JOURNAL_STREAM")
    if not value:
        return False
    try:
        st = os.fstat(sys.stderr.fileno())
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return True
    return value == f"{st.st_dev}:{st.st_ino}"


class _LogFile(logging.handlers.WatchedFileHandler):
    """WatchedFileHandler that creates the file (and every reopened one) mode 0600.

    The log holds check output and source excerpts: it is as private as the state dir it lives in.
    """

    def _open(self):  # type: ignore[no-untyped-def]
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        return open(fd, "a", encoding=self.encoding, errors=self.errors)


# ---------------------------------------------------------------------------------------
# Configuration

_handlers: list[logging.Handler] = []
_file_handler: _LogFile | None = None


def _configure_structlog() -> None:
    structlog.configure(
        # Redacted here as well as in the formatters: any other handler on the root logger
        # (pytest's caplog, a handler a library adds) only ever sees the redacted dict.
        processors=[structlog.stdlib.filter_by_level, *_SHARED, redact,
                    structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        # Not cached: a reload must never leave a logger bound to an old configuration.
        cache_logger_on_first_use=False,
    )


def configure_logging(
    *, level: str = "info", file: Path | None, secrets: Sequence[str] = (), stderr: bool = True
) -> None:
    """Install the handlers; calling it again (SIGHUP reload) replaces them and the secrets."""
    global _file_handler
    try:
        numeric = _LEVELS[level.lower()]
    except KeyError:
        raise ValueError(f"logging.level must be one of {', '.join(_LEVELS)}") from None
    new: list[logging.Handler] = []
    new_file: _LogFile | None = None
    if file is not None:
        file = Path(file)
        file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        new_file = _LogFile(file, encoding="utf-8")
        new_file.setFormatter(_formatter(_render_json, text_exceptions=False, journal=False))
        new.append(new_file)
    if stderr:
        journal = _stderr_is_journal()
        colors = sys.stderr.isatty() and not journal and "NO_COLOR" not in os.environ
        console = logging.StreamHandler(sys.stderr)
        renderer = structlog.dev.ConsoleRenderer(
            colors=colors, exception_formatter=structlog.dev.plain_traceback
        )
        text = _formatter(renderer, text_exceptions=True, journal=journal)
        console.setFormatter(_JournalPriority(text) if journal else text)
        new.append(console)

    # Only now that the new handlers exist: a failed reload leaves the old setup in force.
    set_secrets(secrets)
    _configure_structlog()
    root = logging.getLogger()
    for old in _handlers:
        root.removeHandler(old)
        old.close()  # closes the old file: a moved log path is not kept open
    for handler in new:
        root.addHandler(handler)
    _handlers[:] = new
    _file_handler = new_file

    # Libraries speak at WARNING and above; autod's own loggers at the configured level.
    root.setLevel(logging.WARNING)
    logging.getLogger(ROOT_LOGGER).setLevel(numeric)
    for name, lib_level in _QUIET.items():
        logging.getLogger(name).setLevel(lib_level)
    logging.captureWarnings(True)


def flush() -> None:
    """Flush every handler and fsync the log file (on stop, so the last lines survive a crash)."""
    for handler in _handlers:
        handler.flush()
    handler = _file_handler
    if handler is not None and handler.stream is not None:
        # A closed handler or a stream that is not a real file has nothing to sync.
        with handler.lock, contextlib.suppress(OSError, ValueError):  # type: ignore[union-attr]
            os.fsync(handler.stream.fileno())


def get_logger(name: str | None = None) -> structlog.stdlib.BoundLogger:
    """A logger under the `autod` hierarchy (so the configured level applies to it)."""
    if not structlog.is_configured():
        # Never fall back to structlog's default PrintLogger, which writes to stdout
        # (where `--json` commands print their document).
        _configure_structlog()
    if not name:
        name = ROOT_LOGGER
    elif name != ROOT_LOGGER and not name.startswith(ROOT_LOGGER + "."):
        name = f"{ROOT_LOGGER}.{name}"
    return structlog.stdlib.get_logger(name)


# ---------------------------------------------------------------------------------------
# Cycle context


def bind_cycle(cycle_id: str, event_id: str, mode: str) -> None:
    """Every line logged from here on (in this task) carries the cycle's ids and mode."""
    structlog.contextvars.bind_contextvars(cycle_id=cycle_id, event_id=event_id, mode=mode)


def set_phase(phase: str) -> None:
    """Mark the current phase (observe, plan, act, reflect) on every following line."""
    if phase not in PHASES:
        raise ValueError(f"phase must be one of {', '.join(PHASES)}, not {phase!r}")
    structlog.contextvars.bind_contextvars(phase=phase)


def clear_cycle() -> None:
    """Drop the cycle context (other bound context vars are kept)."""
    structlog.contextvars.unbind_contextvars(*_CYCLE_KEYS)


# ---------------------------------------------------------------------------------------
# Errors the daemon survives


@contextlib.contextmanager
def survive(event: str, **fields: Any) -> Iterator[None]:
    """`contextlib.suppress(Exception)` that leaves a warning line: `event`, the error and `fields`.

    Where a cycle is bound its cycle_id is named on the line itself, so the line still says which
    cycle lost what even where the bound context is not merged (a test capturing logs, a thread)."""
    try:
        yield
    except Exception as exc:
        cycle_id = structlog.contextvars.get_contextvars().get("cycle_id")
        if cycle_id is not None:
            fields.setdefault("cycle_id", cycle_id)
        get_logger("survived").warning(
            event, error=f"{type(exc).__name__}: {str(exc)[:200]}", exc_info=exc, **fields
        )
