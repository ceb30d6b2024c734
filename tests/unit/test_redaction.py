"""Known secret values never reach an Event payload, a re-plan prompt or memory, whatever a check prints."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from autod import logs
from autod.checks.run import CheckResult
from autod.checks.source import failure_event
from autod.config.settings import load_config
from autod.modes import Verification

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


# -- what the pattern replaces, exactly (secretforms.pattern, without logs' other rules) --------


def _redact(secrets: list[str], text: str) -> str:
    from autod.safety.secretforms import pattern

    found = pattern(secrets)
    assert found is not None
    return found.sub("***", text)


def _b64(data: bytes) -> str:
    import base64

    return base64.b64encode(data).decode()


KEY_BYTES = ENCODED_KEY.encode()


@pytest.mark.parametrize(
    ("shown", "left"),
    [
        # what stays is only the characters that also carry bits of the bytes around the key
        (_b64(KEY_BYTES), "***"),
        (_b64(KEY_BYTES).rstrip("="), "***"),
        (_b64(KEY_BYTES + b"xyz"), "***Z4eXo="),
        (_b64(b"x" + KEY_BYTES + b"yz"), "eH***eXo="),
        (_b64(b"xy" + KEY_BYTES + b"z"), "eHl***no="),
        ("-_90cnVzdC1DQU5BUlktMGQxZTJhM2Q0YjVlNmU3Zv4=", "-_9***v4="),  # urlsafe, 2 bytes in
    ],
)
def test_base64_of_the_key_is_replaced_up_to_the_last_character_its_bytes_decide(
    shown: str, left: str
) -> None:
    assert _redact([ENCODED_KEY], f"[{shown}]") == f"[{left}]"


def test_a_url_encoded_key_with_slashes_and_pluses_is_redacted() -> None:
    from urllib.parse import quote, quote_plus

    key = "sk/live+9f8e7d6c5b4a3928"
    for shown in (quote(key, safe=""), quote_plus(key)):
        assert _redact([key], f"key={shown}&x=1") == "key=***&x=1", shown


@pytest.mark.parametrize("form", ["exact", "reversed", "rot13", "hex", "base64"])
def test_a_key_of_exactly_the_fuzzy_length_is_redacted_in_every_form(form: str) -> None:
    import codecs

    from autod.safety.secretforms import MIN_FUZZY

    key = "k3y-9f8e"
    assert len(key) == MIN_FUZZY
    shown = {"exact": key, "reversed": key[::-1], "rot13": codecs.encode(key, "rot13"),
             "hex": key.encode().hex(), "base64": _b64(key.encode())}[form]
    assert _redact([key], f"<{shown}>") == "<***>"


def test_an_empty_or_short_secret_listed_first_does_not_stop_the_others_being_found() -> None:
    for first in ("", "   ", "abc12"):
        assert _redact([first, ENCODED_KEY], f"a {ENCODED_KEY[::-1]} b") == "a *** b", repr(first)
        assert _redact([first, ENCODED_KEY], f"a {_b64(KEY_BYTES)} b") == "a *** b", repr(first)


def test_blank_secrets_are_no_secret_so_whitespace_is_never_redacted() -> None:
    from autod.safety.secretforms import pattern

    assert pattern(["", " ", "\t\n"]) is None
    assert _redact(["   ", "abc12"], "a   b abc12") == "a   b ***"


@pytest.mark.parametrize(
    ("secrets", "text"),
    [
        (["abc12", "abc12xy"], "abc12xy"),  # short ones, matched exactly
        (["trust-CANARY-0d1e", "trust-CANARY-0d1e-2a3d"], "trust-CANARY-0d1e-2a3d"),
        (["zzzz-canary-0d1e", "ZZZZ-CANARY-0D1E-2A3D"], "ZZZZ-CANARY-0D1E-2A3D"),  # case folded
    ],
)
def test_a_secret_that_extends_another_is_replaced_whole(secrets: list[str], text: str) -> None:
    assert _redact(secrets, f"({text})") == "(***)"
    assert _redact(secrets[::-1], f"({text})") == "(***)"


@pytest.mark.slow
def test_a_forms_own_punctuation_is_never_a_separator_so_hostile_text_cannot_stall_redaction() -> None:
    import subprocess
    import sys

    # Almost the key, every '-' tripled: were '-' also a separator, each of the 36 gaps could be read
    # three ways before the last character fails (3**36 paths: it would never end; 18 gaps already
    # took ~10 s). The real pattern is linear, milliseconds. The timeout is a hang guard, not a
    # speed limit: the two outcomes are milliseconds and never.
    key = "-".join("abcdefghijklmnopqrstuvwxyzABCDEFGHIJK")
    hostile = key[:-1].replace("-", "---") + "!"
    code = (
        "import sys\nfrom autod.safety.secretforms import pattern\n"
        f"key, text = {key!r}, {hostile!r}\n"
        "sys.exit(0 if pattern([key]).sub('***', text) == text else 3)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], timeout=120, check=False)
    assert done.returncode == 0


@pytest.mark.parametrize(
    "printed", ["trust--CANARY-0d1e-2a3d", "trust---CANARY--0d1e-2a3d", "TRUST--canary-0D1E-2A3D"]
)
def test_a_key_printed_with_its_own_punctuation_repeated_is_redacted(printed: str) -> None:
    assert _redact(["trust-CANARY-0d1e-2a3d"], f"key={printed};") == "key=***;"


def test_a_forms_own_punctuation_is_read_as_itself_never_as_a_separator() -> None:
    # In-process twin of the hang guard above (whose subprocess no mutant reaches): were `-` also a
    # separator, `-.-` between two parts would be one `-` plus a separator `.-`, each gap read
    # several ways. Read once, `-.-` is a separator between two `-`, which the key does not have.
    key = "trust-CANARY-0d1e-2a3d"
    assert _redact([key], "trust-.-CANARY-0d1e-2a3d") == "trust-.-CANARY-0d1e-2a3d"
    assert _redact([key], "trust-.CANARY-0d1e-2a3d") == "***"  # `-` then a separator `.`: the key


def test_a_key_block_without_its_end_line_is_redacted_and_many_begin_lines_are_read_once(monkeypatch):
    """A BEGIN line with no END within 20,000 characters hides the 20,000 after it (they were left as
    they were); and the END lines are looked for in windows that never overlap, so a text of BEGIN
    lines is read in time linear in its length (a lazy regex tried each against the 20,000 after it)."""
    from autod import logs
    from autod.safety import keyblocks

    body = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" * 10
    text = "-----BEGIN PRIVATE KEY-----\n" + body + "\n" + "x" * 30_000
    got = logs.redact_text(text)
    assert body not in got and "MIIEvQ" not in got and got.startswith(logs.REDACTED)
    scanned = []
    real = keyblocks._KEY_END

    class Counting:
        def search(self, s, pos, endpos):
            scanned.append(min(endpos, len(s)) - pos)
            return real.search(s, pos, endpos)

    monkeypatch.setattr(keyblocks, "_KEY_END", Counting())
    flood = "-----BEGIN PRIVATE KEY-----" * 40_000
    assert "PRIVATE KEY-----BEGIN" not in logs.redact_text(flood)
    assert sum(scanned) <= len(flood) and len(scanned) < len(flood) // 20_000 + 2


KEY = "pr0beH+KEY/0123456789abcdefSECRETxyz"


def _escaped_echo(rng, key: str) -> str:
    """The key as a server quotes it back: each character as itself or a JSON, HTML or XML escape."""
    forms = [lambda c: c, lambda c: f"\\u{ord(c):04x}", lambda c: f"\\u{ord(c):04X}",
             lambda c: f"&#{ord(c)};", lambda c: f"&#x{ord(c):x};", lambda c: f"&#X{ord(c):X};",
             lambda c: ("\\" + c) if not c.isalnum() else c]
    return "".join(rng.choice(forms)(c) for c in key)


def test_a_secret_a_server_quotes_back_escaped_is_redacted_however_it_is_escaped():
    import random

    from autod.safety import secretforms

    rng = random.Random(4)
    pat = secretforms.pattern([KEY])
    assert pat is not None
    for _ in range(300):
        echo = _escaped_echo(rng, KEY)
        body = '{"error": {"message": "Incorrect API key provided: ' + echo + '."}}'  # as the server wrote it
        assert KEY[:6] not in pat.sub("***", body).replace("&#", ""), (echo, pat.sub("***", body))
        assert "***" in pat.sub("***", body), echo


def test_an_error_body_is_redacted_whole_before_it_is_cut_and_a_key_it_ends_inside_is_hidden():
    from autod.planner.endpoint import Endpoint
    from autod.safety import secretforms

    ep = Endpoint.__new__(Endpoint)
    ep._secrets = [KEY]
    for pad in (0, 4_076, 4_090, 5_000):
        for body in (" " * pad + KEY + " tail", " " * pad + KEY[:19], "x" * pad + "\\u0070" + KEY[1:]):
            got = ep._excerpt(body.encode())
            for k in range(secretforms.MIN_TAIL, len(KEY) + 1):
                assert KEY[:k] not in got, (pad, body[-40:], got)
    assert secretforms.cut_tail("abc " + KEY[:5], [KEY]) == "abc " + KEY[:5]  # too short to be one
    assert secretforms.cut_tail("abc " + KEY[:6], [KEY]) == "abc ***"


def test_escaped_forms_hide_the_longest_secret_whole_and_any_start_of_one_a_text_ends_with():
    from autod.safety import secretforms

    short, long_ = "abcdefgh12", "abcdefgh12+34"
    pat = secretforms.pattern([short, long_])
    assert pat is not None and pat.sub("*", "x abcdefgh12\\u002B34 y") == "x * y"
    odd = "abcdefgh\uffff"
    assert secretforms.pattern([odd]).sub("*", "k=abcdefgh\\uFFFF.") == "k=*."
    for k in range(secretforms.MIN_TAIL, len(long_)):
        assert secretforms.cut_tail("tail " + long_[:k], [long_]) == "tail ***", k


def test_an_encoded_secret_that_starts_another_s_encoding_never_leaves_its_rest():
    from autod.safety import secretforms

    short, long_ = "abcdefgh", "abcdefghij"
    pat = secretforms.pattern([short, long_])
    assert pat is not None and pat.sub("*", "x " + long_.encode().hex() + " y") == "x * y"


@pytest.mark.parametrize(
    "spell",
    [
        lambda s: repr(b"Bearer " + s.encode()),  # httpx/h11: Illegal header value b'Bearer KEY\n...'
        repr,
        ascii,  # \xe9 for é, \U0001f511 past the BMP
        lambda s: __import__("json").dumps(s),  # \n, \u00e9, a surrogate pair past the BMP
        lambda s: repr(s.encode()),  # UTF-8 bytes: \xc3\xa9
    ],
    ids=["header-bytes-repr", "repr", "ascii", "json", "bytes-repr"],
)
def test_a_secret_with_a_line_break_or_non_ascii_is_redacted_as_repr_and_json_escape_it(spell) -> None:
    from autod.safety import secretforms

    for secret in ("probeCkey0123456789\n# rotated 2024-01-01", "clé-0123456789\t\U0001f511end"):
        pat = secretforms.pattern([secret])
        assert pat is not None
        shown = pat.sub("***", f"said: {spell(secret)}")
        assert "0123456789" not in shown and "***" in shown, shown


@pytest.mark.parametrize(("char", "spelled"), [
    ("\U0001f511", "\\ud83d\\udd11"),  # JSON's surrogate pair
    ("\U00010000", "\\ud800\\udc00"),  # the first astral character
    ("\U00010000", "\\U00010000"),  # Python's repr
    ("\x80", "\\xc2\\x80"),  # the first character UTF-8 writes in two bytes, as bytes' repr shows it
    ("\x80", "\\x80"),  # and as str's repr
    ("+", "\\x2b"),  # punctuation as \\x
    ("\xff", "\\xff"),
])
def test_each_character_of_a_secret_is_found_in_each_escape_at_the_edges_of_its_range(char, spelled):
    from autod.safety import secretforms

    secret = f"abcdef{char}ghijkl"
    pat = secretforms.pattern([secret])
    assert pat is not None and pat.sub("*", f"x abcdef{spelled}ghijkl y") == "x * y"


@pytest.mark.parametrize(("char", "spelled"), [
    ("\u0100", "\\x100"),  # past U+00FF there is no \\x form: this is \\x10 and a 0
    ("\u2014", "\\x2014"),
    ("A", "\\x41"),  # a letter is never written as \\x by repr
])
def test_what_no_repr_writes_is_not_taken_for_a_secret(char, spelled):
    from autod.safety import secretforms

    secret = f"abcdef{char}ghijkl"
    pat = secretforms.pattern([secret])
    text = f"x abcdef{spelled}ghijkl y"
    assert pat is not None and pat.sub("*", text) == text
