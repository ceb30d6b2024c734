"""A secret read from a file (a systemd credential, `llm.api_key_file`, `memory.auth_token_file`) is one
line of text that can go in an HTTP header: anything else is a config error naming the file, never its
content.

The file may end with a line break (and CRLF); an empty file is "not set here" (install.sh's placeholder).
A second non-empty line (`KEY` then `# rotated 2024-01-01`), bytes that are not UTF-8, or a character an
HTTP header value cannot hold (a control character, anything past ASCII) would be sent as part of the key
and refused by the HTTP client or the server, in words that quote the key: autod says so at load instead.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import SecretStr

from autod.config.bounded import CREDENTIAL_CAP, read_bounded
from autod.linebreaks import lines_of

__all__ = ["CredentialError", "credential", "header_problem", "read_credential"]


class CredentialError(ValueError):
    """A credential that cannot be used; the message names where it is, never what it holds. `key`: the
    config key that names it (("llm", "api_key_file")), for the line of the file to blame."""

    def __init__(self, message: str, key: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.key = key


def header_problem(value: str) -> str | None:
    """Why `value` cannot be sent as (part of) an HTTP header value, or None when it can."""
    lines = [line for line in lines_of(value) if line.strip()]  # a stray \x0b or \x85: below
    if len(lines) > 1:
        return f"holds {len(lines)} non-empty lines (a key is one line: no comments, no second key)"
    bad = [c for c in value if not " " <= c <= "~"]
    if bad:
        kind = "a control character" if all(ord(c) < 128 for c in bad) else "a character past ASCII"
        return f"holds {kind}, which an HTTP header cannot carry"
    return None


def read_credential(path: Path) -> str | None:
    """The secret in `path` (stripped), None when the file is absent or empty; CredentialError when it is
    not one line of header-safe text. OSError (unreadable) is the caller's."""
    if not path.is_file():
        return None
    data = read_bounded(path, CREDENTIAL_CAP)
    try:
        text = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise CredentialError(f"{path}: not UTF-8 text") from None
    if not text:
        return None
    why = header_problem(text)
    if why is not None:
        raise CredentialError(f"{path}: {why}")
    return text


def credential(name: str, file: Path | None, value: SecretStr | None, field: str) -> str | None:
    """A secret from the systemd credential dir, else a file, else the config/env value.

    An empty credential or file (install.sh's placeholder) is "not set here": the next source counts.
    A secret that is not one line of header-safe text is a CredentialError naming where it is (and the
    config key that names it); an unreadable file is an OSError for the caller.
    """
    section = tuple(field.split("."))
    cred = os.environ.get("CREDENTIALS_DIRECTORY")
    sources: list[tuple[Path | None, str, tuple[str, ...]]] = [
        (Path(cred) / name if cred else None, f"credential {name}", ()),
        (file, f"{field}_file", (*section[:-1], f"{section[-1]}_file")),
    ]
    for path, said, key in sources:
        if path is None:
            continue
        try:
            text = read_credential(path)
        except CredentialError as exc:
            raise CredentialError(f"{said}: {exc}", key) from None
        if text:
            return text
    if not value:
        return None
    secret = value.get_secret_value()
    why = header_problem(secret)
    if why is not None:
        raise CredentialError(f"{field}: {why}", section)
    return secret
