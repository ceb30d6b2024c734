"""Known secret values never reach an Event payload, a re-plan prompt or memory, whatever a check prints."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from autod import logs
from autod.checks.run import CheckResult
from autod.config.settings import load_config
from autod.modes import Verification
from autod.sources.check import failure_event

KEY = "sk-live-9f8e7d6c5b4a39281706"


@pytest.fixture
def secrets_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    monkeypatch.setenv("AUTOD_LLM__API_KEY", KEY)
    cfg = tmp_path / "autod.yaml"
    cfg.write_text(
        f"workspace: {tmp_path}\nllm: {{base_url: 'http://127.0.0.1:1/v1',"
        " fallback: {base_url: 'http://127.0.0.1:2/v1', api_key: 'fallback-secret-123'}}\n"
    )
    found = load_config(cfg).secrets()
    logs.set_secrets(found)
    yield found
    logs.set_secrets([])


def test_settings_secrets_finds_every_key_in_force(secrets_set: list[str]) -> None:
    assert KEY in secrets_set and "fallback-secret-123" in secrets_set


def test_a_failing_checks_output_loses_the_key_before_it_becomes_an_event(secrets_set: list[str]) -> None:
    out = f'E   AssertionError: token was {KEY}\n  File "src/app.py", line 3\nfallback-secret-123\n1 failed\n'
    event = failure_event(CheckResult("tests", 1, out, 5))
    text = event.model_dump_json()
    assert KEY not in text and "fallback-secret-123" not in text
    assert "***" in event.payload["excerpt"]
    assert event.payload["locations"] == [{"path": "src/app.py", "line": 3}]


def test_the_replan_sees_check_output_without_the_key(secrets_set: list[str]) -> None:
    v = Verification("rolled_back", [CheckResult("tests", 1, f"printing {KEY}", 5)])
    assert KEY not in v.output and "***" in v.output


# -- the forms a check can print a key in -------------------------------------------------------

ENCODED_KEY = "trust-CANARY-0d1e2a3d4b5e6e7f"


def _forms(key: str) -> dict[str, str]:
    import base64
    import codecs

    b = key.encode()
    b64 = base64.b64encode
    return {
        "base64": b64(b).decode(),
        "base64 without padding": b64(b).decode().rstrip("="),
        "base64, 1 byte into a stream": b64(b"x" + b + b"yz").decode(),
        "base64, 2 bytes into a stream": b64(b"xy" + b + b"z").decode(),
        "urlsafe base64 in a stream": base64.urlsafe_b64encode(b"\xfb\xff" + b + b"\xfe").decode(),
        "urlsafe base64 without padding": base64.urlsafe_b64encode(b).decode().rstrip("="),
        "base64 wrapped at 76 columns": base64.encodebytes(b"A" * 50 + b).decode(),
        "hex": b.hex(),
        "HEX": b.hex().upper(),
        "hex bytes spaced": " ".join(f"{c:02x}" for c in b),
        "\\x escapes": "".join(f"\\x{c:02x}" for c in b),
        "url-encoded": "".join(f"%{c:02X}" for c in b),
        "reversed": key[::-1],
        "spaced": " ".join(key),
        "dotted": ".".join(key),
        "one character a line": "\n".join(key),
        "upper case": key.upper(),
        "rot13": codecs.encode(key, "rot13"),
    }


@pytest.mark.parametrize("form", sorted(_forms(ENCODED_KEY)))
def test_a_key_printed_in_any_common_encoding_is_redacted(form: str) -> None:
    import base64

    logs.set_secrets([ENCODED_KEY])
    try:
        shown = _forms(ENCODED_KEY)[form]
        out = logs.redact_text(f"the check says: {shown} (done)")
        assert logs.REDACTED in out
        # nothing of the key survives that decodes back to it, in any form
        for leftover in (ENCODED_KEY, shown, shown.strip()):
            assert leftover not in out
        assert "CANARY" not in out.upper().replace(" ", "").replace(".", "")
        for piece in out.split():
            for decode in (base64.b64decode, base64.urlsafe_b64decode):
                with contextlib.suppress(ValueError):
                    assert b"CANARY" not in decode(piece + "==")
        assert out.startswith("the check says: ") and out.endswith(" (done)")
    finally:
        logs.set_secrets([])


def test_prompts_lose_the_encoded_key_too_but_keep_the_code_around_it() -> None:
    import base64

    logs.set_secrets([ENCODED_KEY])
    try:
        encoded = base64.b64encode(ENCODED_KEY.encode()).decode()
        code = f"TOKEN = '{encoded}'\ndef add(a, b):\n    return a - b\n"
        out = logs.redact_secrets(code)
        assert out == "TOKEN = '***'\ndef add(a, b):\n    return a - b\n"
    finally:
        logs.set_secrets([])


def test_short_secrets_are_matched_exactly_only_so_ordinary_text_survives() -> None:
    logs.set_secrets(["abc12"])
    try:
        assert logs.redact_text("x abc12 y") == "x *** y"
        assert logs.redact_text("a b c 1 2, 21cba, 6162633132") == "a b c 1 2, 21cba, 6162633132"
    finally:
        logs.set_secrets([])


def test_well_known_credential_formats_are_masked_whoever_configured_them() -> None:
    pem = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----"
    line = (
        f"{pem} AKIAIOSFODNN7EXAMPLE ghp_{'x' * 36} xoxb-1234567890-abcdef"
        " aws_secret_access_key = wJalrXUtnFEMI/K7MDENG CLIENT_SECRET: abc123def"
    )
    out = logs.redact_text(line)
    for leaked in ("b3BlbnNzaC1rZXktdjEAAAAA", "AKIAIOSFODNN7EXAMPLE", "x" * 36, "1234567890-abcdef",
                   "wJalrXUtnFEMI", "abc123def"):
        assert leaked not in out
    assert out.count(logs.REDACTED) == 6
