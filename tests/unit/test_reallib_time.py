"""bench/reallib_time.py: where a kept run's model time went, reading prompts against writing replies.
A trace whose request times were made from known speeds gives those speeds back."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def load():
    spec = importlib.util.spec_from_file_location("reallib_time", BENCH / "reallib_time.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["reallib_time"] = module
    spec.loader.exec_module(module)
    return module


def sse(text: str) -> str:
    """A streamed reply: a chunk a character (a token each, for the fake tokenizer below)."""
    return "".join(f"data: {json.dumps({'choices': [{'text': ch}]})}\n\n" for ch in text) + "data: [DONE]\n\n"


def test_the_split_is_fitted_from_what_each_request_read_past_the_last_one_and_wrote(tmp_path: Path):
    rt = load()
    read_s, write_s, request_s = 0.004, 0.05, 0.2
    head = "system: you fix bugs\nuser: the failure " + "x" * 300
    prompts = [head + "A" * 200, head + "A" * 200 + "leg two" * 10, head + "B" * 500, head + "B" * 500,
               head + "C" * 50, "another bug " + "y" * 900]
    replies = ["fixed code " * 3, "z" * 40, "echo" * 30, "q", "w" * 70, "e" * 12]
    lines, last = [], ""
    lines.append(json.dumps({"method": "GET", "path": "/models", "seconds": 0.0}))
    lines.append(json.dumps({"method": "POST", "path": "/extras/tokenize", "request": {"input": "probe"}}))
    expected_read = 0
    for prompt, reply in zip(prompts, replies, strict=True):
        shared = next((i for i, (a, b) in enumerate(zip(last, prompt, strict=False)) if a != b),
                      min(len(last), len(prompt)))
        new = len(prompt) - shared
        expected_read += new
        seconds = read_s * new + write_s * len(reply) + request_s
        lines.append(json.dumps({"method": "POST", "path": "/completions", "seconds": seconds,
                                 "request": {"prompt": prompt, "max_tokens": 100}, "reply": sse(reply)}))
        last = prompt
    (tmp_path / "bug-01.trace.jsonl").write_text("\n".join(lines) + "\n")

    summary = rt.run_summary(tmp_path, lambda text: [ord(ch) for ch in text])  # a token a character
    assert summary["requests"] == len(prompts)
    assert summary["read"] == expected_read and summary["written"] == sum(map(len, replies))
    assert abs(summary["read_ms_per_token"] - read_s * 1000) < 0.01
    assert abs(summary["write_ms_per_token"] - write_s * 1000) < 0.01
    assert abs(summary["read_per_written"] - read_s / write_s) < 0.001
    assert abs(summary["read_share"] - read_s * expected_read / summary["seconds"]) < 0.01
    assert summary["per_bug"]["bug-01"]["requests"] == len(prompts)
