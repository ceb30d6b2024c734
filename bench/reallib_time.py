"""Where the model's time went in kept real-library runs (`bench_reallib.py --llm ... --keep DIR`):
prompt tokens read against tokens written, from each run's request traces.

    python bench/reallib_time.py --llm http://127.0.0.1:8087/v1 DIR [DIR ...] > time.json

A single-slot server (llama-cpp-python; llama.cpp with one slot) keeps the last prompt it read, so a
request reads only its tokens past the longest prefix it shares with the request before; it writes a
token a streamed chunk. The tokens are counted with the server's own tokenizer (POST /extras/tokenize,
llama-cpp-python; /tokenize, llama.cpp and vLLM), so the server must serve the model the runs used.
Over a run's requests, `seconds = read_s * read + write_s * written + request_s` is fitted by least
squares (`request_s` held at 0 where the fit would make it negative): `read_share` is the part of the
model's time that went on reading prompts, the rest on writing replies. The draws' own records
(`partial.json`) add the part of model time and of written tokens that went on draws that gave the
code back (echoes).

The echo share of written tokens is the issue's measure; on a CPU a draw's reading is as much of its
cost, so the share of model time is printed beside it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import httpx
import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from reallib_table import rows  # noqa: E402


def prompt_of(request: dict[str, Any]) -> str | None:
    """A request's prompt as the server reads it: a /completions prompt as sent, chat messages in
    ChatML's shape (the template the runs' model speaks)."""
    if isinstance(request.get("prompt"), str):
        return request["prompt"]
    messages = request.get("messages")
    if not isinstance(messages, list):
        return None
    return "".join(f"<|im_start|>{m.get('role')}\n{m.get('content')}<|im_end|>\n"
                   for m in messages if isinstance(m, dict)) + "<|im_start|>assistant\n"


class Tokenizer:
    def __init__(self, base_url: str) -> None:
        root = base_url.rstrip("/").removesuffix("/v1")
        self.client = httpx.Client(base_url=root, timeout=60)
        self.path = ""

    def __call__(self, text: str) -> list[int]:
        for path in [self.path] if self.path else ["/extras/tokenize", "/tokenize"]:
            r = self.client.post(path, json={"input": text, "content": text})
            if r.is_success and isinstance(tokens := r.json().get("tokens"), list):
                self.path = path
                return tokens
        raise SystemExit(f"{self.client.base_url}: no tokenize endpoint answered")


def shared(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def requests_of(trace: Path, tokenize: Tokenizer) -> list[tuple[int, int, float]]:
    """Per completion request of one bug's trace: (prompt tokens read, tokens written, seconds)."""
    out, last = [], []
    for line in trace.read_text().splitlines():
        record = json.loads(line)
        request = record.get("request") or {}
        if record.get("method") != "POST" or "max_tokens" not in request:
            continue  # a model list, a tokenizer probe
        prompt = prompt_of(request)
        if prompt is None:
            continue
        tokens = tokenize(prompt)
        written = str(record.get("reply") or "").count("data: {")  # a chunk a token, streamed
        if not written:  # one JSON document: its usage says
            try:
                usage = json.loads(record.get("reply") or "{}").get("usage", {})
                written = int(usage.get("completion_tokens", 0))
            except (ValueError, AttributeError, TypeError):
                written = 0
        out.append((len(tokens) - shared(last, tokens), written, float(record.get("seconds") or 0.0)))
        last = tokens
    return out


def run_summary(run: Path, tokenize: Tokenizer) -> dict[str, Any]:
    per_bug: dict[str, Any] = {}
    all_requests: list[tuple[int, int, float]] = []
    for trace in sorted(run.glob("*.trace.jsonl")):
        reqs = requests_of(trace, tokenize)
        all_requests += reqs
        per_bug[trace.name.split(".")[0]] = {
            "requests": len(reqs), "read": sum(r[0] for r in reqs), "written": sum(r[1] for r in reqs),
            "seconds": round(sum(r[2] for r in reqs), 1)}
    out: dict[str, Any] = {
        "run": str(run), "requests": len(all_requests), "read": sum(r[0] for r in all_requests),
        "written": sum(r[1] for r in all_requests), "seconds": round(sum(r[2] for r in all_requests), 1)}
    if len(all_requests) >= 3:
        a = np.array([[r[0], r[1], 1.0] for r in all_requests])
        seconds = np.array([r[2] for r in all_requests])
        (read_s, write_s, request_s), *_ = np.linalg.lstsq(a, seconds, rcond=None)
        if request_s < 0:  # no request saves time: the per-token costs alone (a long prompt is read
            # faster a token than a short one, in larger batches, which pulls the intercept below 0)
            (read_s, write_s), *_ = np.linalg.lstsq(a[:, :2], seconds, rcond=None)
            request_s = 0.0
        reading = read_s * out["read"]
        out.update(read_ms_per_token=round(read_s * 1000, 2), write_ms_per_token=round(write_s * 1000, 2),
                   request_ms=round(request_s * 1000), read_per_written=round(read_s / write_s, 3),
                   read_share=round(reading / out["seconds"], 3) if out["seconds"] else None)
    echo_ms = total_ms = echo_tokens = total_tokens = 0
    try:
        draws = [c for r in rows(run)[0] for c in r.get("candidates") or [] if c.get("view") != "replay"]
    except (OSError, ValueError):
        draws = []
    for c in draws:
        total_ms += c.get("model_ms") or 0
        total_tokens += c.get("reply_tokens") or 0
        if c.get("echo"):
            echo_ms += c.get("model_ms") or 0
            echo_tokens += c.get("reply_tokens") or 0
    if total_ms:
        out.update(echo_share_of_written=round(echo_tokens / max(1, total_tokens), 3),
                   echo_share_of_model_time=round(echo_ms / total_ms, 3))
    out["per_bug"] = per_bug
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llm", required=True, help="the server the runs used (its tokenizer counts the tokens)")
    ap.add_argument("runs", nargs="+", type=Path, help="kept run directories (bench_reallib --keep)")
    args = ap.parse_args(argv)
    tokenize = Tokenizer(args.llm)
    json.dump({"bench": "reallib_time", "runs": [run_summary(run, tokenize) for run in args.runs]},
              sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
