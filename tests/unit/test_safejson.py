"""Every JSON autod parses from a server, a check or the workspace goes through one parse
(autod.safety.safejson) that fails only with ValueError, and every reader built on it fails only the way
it documents: generated hostile documents (nested to every depth in every position, integers past
any count and past Python's digit limit, NaN and Infinity, bytes that are not UTF-8), fed to each
reader of untrusted JSON."""

from __future__ import annotations

import contextlib
import json
import random
import sys
from pathlib import Path

import pytest

from autod.checks import seal
from autod.planner import prefill, streamread, wire
from autod.safety import safejson


def hostile(rng: random.Random) -> list[bytes]:
    out: list[bytes] = []
    limit = sys.getrecursionlimit()
    for depth in (limit // 2, limit, 10 * limit, 100_000):
        for open_, close in (("[", "]"), ('{"a":', "}")):
            deep = open_ * depth + "1" + close * depth
            out.append(deep.encode())
            out.append(json.dumps({"choices": "X", "usage": "Y"}).replace('"X"', deep).encode())
            out.append(('{"choices":[{"message":{"content":"x"}}],"usage":' + deep + "}").encode())
            out.append(('{"error":' + deep + "}").encode())
            out.append(deep[: rng.randrange(1, len(deep))].encode())  # cut anywhere
    for digits in (20, 400, 4_000, 5_000, 50_000):
        n = "9" * digits
        out.append(('{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":' + n
                    + ',"completion_tokens":' + n + "}}").encode())
        out.append(('{"n_ctx":' + n + "}").encode())
        out.append(('{"tokens":[' + ",".join(["1"] * min(digits, 1000)) + "]}").encode())
    for const in ("NaN", "Infinity", "-Infinity"):
        out.append(('{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":' + const
                    + "}}").encode())
    out.append(b'{"choices":[{"message":{"content":"\xff\xfe"}}]}')
    return out


def test_the_one_parse_reads_json():
    assert safejson.loads(b'{"a": [1, 2.5, null, "\\u00e9"]}') == {"a": [1, 2.5, None, "\u00e9"]}


def test_the_one_parse_fails_only_with_value_error():
    rng = random.Random(5)
    for doc in hostile(rng):
        with contextlib.suppress(ValueError):
            safejson.loads(doc)


@pytest.mark.parametrize("value", [0, 1, 2**31 - 1])
def test_a_count_is_kept(value):
    assert safejson.count(value) == value


@pytest.mark.parametrize("value", [-1, 2**31, 10**30, 10**4000, True, False, 1.0, "3", None, float("nan")])
def test_what_is_not_a_count_is_none(value):
    assert safejson.count(value) is None


def test_every_reader_of_a_servers_or_a_checks_json_fails_only_as_it_says():
    rng = random.Random(6)
    keys = seal.Keys(Path("/nonexistent"), {}, -1, -1)
    for doc in hostile(rng):
        try:
            reply = wire.read_completion("application/json", doc)
        except wire.BadReply:
            pass
        else:  # a reply read is a reply whose counts are counts
            for n in (reply.prompt_tokens, reply.completion_tokens):
                assert n is None or 0 <= n <= safejson.MAX_COUNT
        sse = b"data: " + doc.replace(b"\n", b" ") + b"\n\ndata: [DONE]\n\n"
        with contextlib.suppress(wire.BadReply):
            wire.read_completion("text/event-stream", sse)
        assert isinstance(wire._error_text(doc), str)
        streamread._delta(b"data: " + doc)
        assert seal.opened(keys, doc) is None
        assert prefill._count(doc) is None or isinstance(prefill._count(doc), int)
        try:
            got = wire.context_size(safejson.loads(doc))
        except ValueError:
            got = None
        assert got is None or 0 < got <= safejson.MAX_COUNT


def _strings(doc: object) -> list[str]:
    out, todo = [], [doc]
    while todo:
        v = todo.pop()
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            out += [k for k in v if isinstance(k, str)]
            todo += list(v.values())
        elif isinstance(v, list):
            todo += v
    return out


def test_no_string_the_one_parse_returns_holds_a_lone_surrogate():
    """Generated: `\\u` escapes of lone high and low surrogates (and valid pairs, which stay) in keys and
    values at every depth, as bytes and as text. Every string that comes back encodes as UTF-8, so no
    log line, row, file or validated model downstream can fail on it; a valid pair is kept."""
    rng = random.Random(3)
    pieces = ["\\ud83d", "\\udcff", "\\ud800", "\\udfff", "\\ud83d\\ude00", "ok", "\\u00e9"]

    def text() -> str:
        return "".join(rng.choice(pieces) for _ in range(rng.randint(0, 4)))

    for _ in range(300):
        doc = f'"{text()}"'
        for _ in range(rng.randint(0, 4)):
            doc = rng.choice([f'[{doc}, "{text()}"]', f'{{"{text()}": {doc}}}'])
        for data in (doc, doc.encode()):
            got = safejson.loads(data)
            for s in _strings(got):
                s.encode("utf-8")  # raises on a lone surrogate
            assert got == safejson.loads(data), doc
        if "\\ud83d\\ude00" in doc:
            assert any("\U0001f600" in s for s in _strings(safejson.loads(doc))), doc


def test_a_reply_with_a_lone_surrogate_parses_to_text_every_model_takes():
    body = json.dumps({"choices": [{"message": {"content": "Make add add.\n```python\ndef add(a, b):\n"
                                                "    return a + b  # \ud83d\n```\n"}}]}).encode()
    assert b"\\ud83d" in body
    for data in (body, b"data: " + body + b"\n\ndata: [DONE]\n\n"):  # whole, and streamed
        content = wire.read_completion("text/event-stream" if data.startswith(b"data") else "", data).content
        assert "\ufffd" in content and content.encode("utf-8"), content
