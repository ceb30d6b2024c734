"""Whatever goes wrong while a config is loaded is a ConfigError naming the file: the one exit (78) an
operator and systemd's RestartPreventExitStatus know, never a traceback or exit 2.

The checks that know better say more (the YAML's shape: `autod.config.yamlshape`; the schema:
`autod.config.errors.format_error`; a credential: `autod.config.credfile`). This guard is for what none of
them foresaw: an exception out of YAML construction, pydantic-settings, path handling or recursion is
said as the file and the exception's type, never its text (which may quote a value).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from autod.config.credfile import CredentialError
from autod.config.errors import ConfigError, key_lines

__all__ = ["check_credentials", "config_errors"]


@contextmanager
def config_errors(cfg_path: Path | None) -> Iterator[None]:
    """Turn every exception raised inside into a ConfigError naming `cfg_path` (MemoryError excepted)."""
    try:
        yield
    except (ConfigError, MemoryError):
        raise
    except Exception as exc:
        where = str(cfg_path) if cfg_path is not None else "<config>"
        raise ConfigError(
            f"{where}: cannot be loaded ({type(exc).__name__}): a value autod cannot read; no line or"
            " field is known for it (check values of unusual types, tags or sizes)"
        ) from None


def check_credentials(
    readers: Iterable[Callable[[], Any]], cfg_path: Path | None, text: str
) -> None:
    """Read each secret now, so a malformed key file is a config error at load and not a request that
    fails (quoting the key) later. An unreadable file is left for when it is used: `config check` may run
    as a user the key is hidden from."""
    for read in readers:
        try:
            read()
        except CredentialError as exc:
            where = str(cfg_path) if cfg_path is not None else "<config>"
            line = key_lines(cfg_path).get(exc.key) if cfg_path is not None and exc.key and text else None
            if line is not None:
                where += f":{line}"
            raise ConfigError(f"{where}: {exc}") from None
        except OSError:
            continue
