"""A scripted, OpenAI-compatible LLM server on 127.0.0.1 for tests.

In-process::

    with ScriptedLLM() as llm:
        llm.push_plan({"summary": "fix", "edits": [], "verify": [], "report": None})
        cfg = LLMConfig(base_url=llm.base_url)
        ...
        assert llm.requests[0]["max_tokens"] == 4096

As a subprocess (end-to-end tests of `autod run`)::

    python tests/llmserver.py --script steps.json --port-file port.txt [--log requests.jsonl]

The script is a JSON list of steps, or {"steps": [...], "default": step, ...server behaviours}.
Server behaviours (methods in process, keys of the script object for the subprocess), each like a
real server autod meets:
    "refuse_response_format": true | "400" | "500"   json_schema refused: 400 (many servers), or
                                  500 with llama-cpp-python's body (it does not take json_schema)
    "sse": true                   every answer streamed as SSE chunks, whatever `stream` says
    "token_param": "max_completion_tokens"   OpenAI reasoning models: 400 to `max_tokens`
    "refuse_stop": true           OpenAI reasoning models: 400 "Unsupported parameter: 'stop'"
    "refuse_grammar": true        OpenAI: 400 "Unrecognized request argument supplied: grammar"
    "choice_field": "structured_outputs" | "guided_choice"   vLLM from 0.12 / before 0.10.2: a
                                  completions request holding that field is answered with the choice
                                  the step's first line is (stripped), else with its first choice; a
                                  request holding both fields: 400, as vLLM refuses two constraints
    "context_limit": N            400 context_length_exceeded (OpenAI's body) when the prompt
                                  (4 characters a token) plus the reply cap passes N tokens
    "props_n_ctx": N              GET /props answers llama.cpp's
                                  {"default_generation_settings": {"n_ctx": N}}; "endless": a 200 whose
                                  body never ends; "trickle": one whose body comes a byte every 0.2 s
    "chars_per_token": C          prompt tokens counted (usage, context_limit) as characters / C (4)
    "no_completions": true        POST /v1/completions answers 404 (a chat-only server)
    "vocab": "chatml" | "other"   POST /extras/tokenize (llama-cpp-python's) counts a text's tokens:
                                  a BOS, each ChatML marker as one token ("chatml") or spelt out in
                                  several ("other"); "endless": a 200 whose body never ends;
                                  "trickle": one whose body comes a byte every 0.2 s; unset:
                                  404, as a server without it
    "honour_n": true              a request with n > 1 gets n choices (each the next step), like vLLM
    "chunk_s": S                  a streamed reply's chunks S seconds apart (a model writing)
    "end_s": S                    a streamed reply's last content chunk is followed S seconds later
                                  by its finish (a stop token written, the server's end of a reply)
    "read_s_per_token": S         a streamed reply's first chunk waits S a prompt token (4 characters)
                                  past what the prompt shares with the last one (a server reading
                                  what its cache does not hold)
    "single_slot": true           one completion at a time; a step's "generate_s" holds the slot that
                                  long, to the end even after its client gave up, unless the request
                                  asked for a stream: then its chunks are spread over generate_s and
                                  the slot is freed when the client leaves; GET /v1/models waits for
                                  the slot too (all as llama-cpp-python); `piled` counts completions
                                  that arrived while it was busy
A step is one of:
    {"plan": {...}, "finish_reason": "stop", "fenced": false, "prose": false}
    {"text": "...", "finish_reason": "stop"}
    {"status": 500, "body": "", "headers": {}}
    {"hang": 5}                       sleep, then answer with the default
    {"raw": "...", "status": 200}     the body exactly as given
    any step may add "generate_s": S  (with single_slot) hold the slot S seconds before answering
Each POST /v1/chat/completions consumes one step; an empty script answers with the default
(a 200 plan that does nothing). GET /v1/models answers 200. POST /v1/completions (a raw prompt, as
autod.planner.prefill sends one) consumes a step too, answered in the completions shape (`text`); a
step's text that begins with what the prompt's last line began the answer with is answered with the
rest of it alone, as a model that continues its own opening (so one script serves both endpoints).
`paths` lists the path of every POST recorded.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import signal
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

BEHAVIOURS = (
    "sse", "token_param", "context_limit", "single_slot", "props_n_ctx", "chars_per_token", "honour_n",
    "refuse_stop", "refuse_grammar", "no_completions", "vocab", "chunk_s", "read_s_per_token", "choice_field",
    "end_s",
)
CHAT = "/v1/chat/completions"
NOTHING_TO_DO: dict[str, Any] = {"summary": "nothing to do", "edits": [], "verify": [], "report": None}
REFUSAL = {"error": {"message": "response_format json_schema not supported", "type": "invalid_request_error"}}
# What llama-cpp-python 0.3 answers to a json_schema response_format (its request model takes only
# "text" and "json_object"; the validation error reaches its catch-all handler, hence a 500).
LLAMA_CPP_PYTHON_REFUSAL = {
    "error": {
        "message": "1 validation error:\n  {'type': 'literal_error', "
        "'loc': ('body', 'response_format', 'type'), "
        "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema', "
        "'ctx': {'expected': \"'text' or 'json_object'\"}}\n\n  File \"llama_cpp/server/app.py\", line 376, "
        "in create_chat_completion\n    POST /v1/chat/completions",
        "type": "internal_server_error",
        "param": None,
        "code": None,
    }
}
MAX_TOKENS_REFUSAL = {
    "error": {
        "message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
        "Use 'max_completion_tokens' instead.",
        "type": "invalid_request_error",
        "param": "max_tokens",
        "code": "unsupported_parameter",
    }
}
GRAMMAR_REFUSAL = {  # OpenAI's answer to a parameter it does not know
    "error": {
        "message": "Unrecognized request argument supplied: grammar",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }
}
TWO_CONSTRAINTS = {  # vLLM's answer to two kinds of constraint in one request
    "error": {
        "message": "You can only use one kind of structured outputs constraint but multiple are specified",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    }
}
STOP_REFUSAL = {
    "error": {
        "message": "Unsupported parameter: 'stop' is not supported with this model.",
        "type": "invalid_request_error",
        "param": "stop",
        "code": "unsupported_parameter",
    }
}


class ScriptedLLM:
    """Real HTTP server in a daemon thread; answers chat completions from a script of steps."""

    def __init__(self, *, log_path: str | os.PathLike[str] | None = None) -> None:
        self.requests: list[dict[str, Any]] = []  # every JSON request body, in order
        self.headers: list[dict[str, str]] = []  # the matching request headers (lower-case names)
        self._steps: collections.deque[dict[str, Any]] = collections.deque()
        self._default: dict[str, Any] = {"plan": NOTHING_TO_DO}
        self._refuse_schema: str | None = None  # "400" or "500"
        self.sse = False
        self.token_param = "max_tokens"
        self.context_limit: int | None = None
        self.single_slot = False
        self.props_n_ctx: int | str | None = None
        self.props_asked = 0  # GET /props answered "endless" or "trickle"
        self.honour_n = False
        self.refuse_stop = False
        self.refuse_grammar = False
        self.choice_field: str | None = None
        # streamed replies (`stream: true`): seconds between chunks, and per reply how many content
        # chunks were sent and whether the client left before the end (a generation ended early)
        self.chunk_s = 0.0
        self.end_s = 0.0  # seconds between a streamed reply's last content chunk and its finish
        # seconds a streamed reply waits before its first chunk per prompt token not shared with the
        # last prompt (a single-slot server reading what its cache does not hold)
        self.read_s_per_token = 0.0
        self._last_prompt = ""
        self.streams: list[dict[str, Any]] = []
        self.chars_per_token: float = 4
        self.no_completions = False
        self.vocab: str | None = None
        self.tokenized = 0  # tokenize requests answered
        self.paths: list[str] = []  # the path of every POST recorded, in order
        self.piled = 0  # completions that arrived while the single slot was busy
        self._slot = threading.Lock()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._log_path = Path(log_path) if log_path else None
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.base_url = ""
        self.port = 0

    # -- lifecycle ------------------------------------------------------------------
    def start(self, port: int = 0) -> ScriptedLLM:
        """Bind 127.0.0.1:port (0: a free port) and serve in a daemon thread."""
        server = ThreadingHTTPServer(("127.0.0.1", port), _handler_for(self))
        server.daemon_threads = True
        self._server = server
        self.port = server.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        # a short poll keeps stop() quick; tests start and stop many servers
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="scripted-llm", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; releases hanging answers at once."""
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> ScriptedLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- script ---------------------------------------------------------------------
    def push(self, step: dict[str, Any]) -> None:
        """Queue one step in the script-file format (see the module docstring)."""
        with self._lock:
            self._steps.append(dict(step))

    def push_plan(
        self, plan: dict[str, Any], *, finish_reason: str = "stop", fenced: bool = False, prose: bool = False
    ) -> None:
        self.push({"plan": plan, "finish_reason": finish_reason, "fenced": fenced, "prose": prose})

    def push_text(self, content: str, *, finish_reason: str = "stop") -> None:
        self.push({"text": content, "finish_reason": finish_reason})

    def push_status(self, status: int, body: str = "", headers: dict[str, str] | None = None) -> None:
        self.push({"status": status, "body": body, "headers": headers or {}})

    def push_hang(self, seconds: float) -> None:
        """Sleep `seconds` before answering with the default (a hang past the client's deadline)."""
        self.push({"hang": seconds})

    def push_raw(self, body: bytes, status: int = 200) -> None:
        """Answer with exactly these bytes (a truncated JSON body, a huge body)."""
        self.push({"raw": body, "status": status})

    def set_default(self, step: dict[str, Any]) -> None:
        """What to answer when the script is empty, e.g. {"status": 500} for a server that is down."""
        with self._lock:
            self._default = dict(step)

    def refuse_response_format(self, flag: bool | str = True) -> None:
        """Refuse response_format json_schema: 400 (many local servers), or "500" as llama-cpp-python."""
        self._refuse_schema = None if not flag else ("500" if str(flag) == "500" else "400")

    def behave(self, **behaviours: Any) -> ScriptedLLM:
        """Set server behaviours by their script-file names (see the module docstring)."""
        for key, value in behaviours.items():
            if key == "refuse_response_format":
                self.refuse_response_format(value)
            elif key in BEHAVIOURS:
                setattr(self, key, value)
            else:
                raise ValueError(f"unknown server behaviour {key!r}")
        return self

    @contextlib.contextmanager
    def _occupy(self, generate_s: float | None = None) -> Iterator[None]:
        """With single_slot: hold the one slot; a completion (generate_s set) "generates" to the end first."""
        if not self.single_slot:
            yield
            return
        if not self._slot.acquire(blocking=False):
            if generate_s is not None:
                with self._lock:
                    self.piled += 1
            self._slot.acquire()
        try:
            if generate_s:
                self._stopping.wait(generate_s)  # runs on after the client has gone
            yield
        finally:
            self._slot.release()

    @property
    def pending(self) -> int:
        """Steps not yet consumed."""
        with self._lock:
            return len(self._steps)

    # -- serving (handler threads) --------------------------------------------------
    def _record(self, body: dict[str, Any], headers: dict[str, str], path: str = CHAT) -> None:
        with self._lock:
            self.paths.append(path)
            self.requests.append(body)
            self.headers.append(headers)
            if self._log_path is not None:
                with self._log_path.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(body) + "\n")

    def _next_step(self, body: dict[str, Any]) -> dict[str, Any]:
        # A server's refusals come before the script: they do not consume a scripted step.
        if self.token_param == "max_completion_tokens" and "max_tokens" in body:
            return {"status": 400, "body": json.dumps(MAX_TOKENS_REFUSAL)}
        if self.refuse_stop and "stop" in body:
            return {"status": 400, "body": json.dumps(STOP_REFUSAL)}
        if self.refuse_grammar and "grammar" in body:
            return {"status": 400, "body": json.dumps(GRAMMAR_REFUSAL)}
        if self.choice_field and "structured_outputs" in body and "guided_choice" in body:
            return {"status": 400, "body": json.dumps(TWO_CONSTRAINTS)}
        fmt = body.get("response_format")
        if self._refuse_schema and isinstance(fmt, dict) and fmt.get("type") == "json_schema":
            refusal = LLAMA_CPP_PYTHON_REFUSAL if self._refuse_schema == "500" else REFUSAL
            return {"status": int(self._refuse_schema), "body": json.dumps(refusal)}
        if self.context_limit is not None:
            prompt = _prompt_tokens(body, self.chars_per_token)
            reply = body.get("max_tokens") or body.get("max_completion_tokens") or 0
            if prompt + reply > self.context_limit:
                return {"status": 400, "body": json.dumps(_context_error(self.context_limit, prompt, reply))}
        with self._lock:
            return self._steps.popleft() if self._steps else dict(self._default)


def _prompt_tokens(body: dict[str, Any], chars_per_token: float = 4) -> int:
    if isinstance(body.get("prompt"), str):
        return int(len(body["prompt"]) / chars_per_token) + 1
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    return int(sum(len(str(m.get("content", ""))) for m in messages) / chars_per_token) + 1


def _continued(body: dict[str, Any], content: str) -> str:
    """A completions request's answer: the step's text without the opening the prompt gave it."""
    prompt = body.get("prompt")
    if not isinstance(prompt, str):
        return content
    begun = prompt.rpartition("<|im_start|>assistant\n")[2]
    return content[len(begun):] if begun and content.startswith(begun) else content


def _chosen(body: dict[str, Any], text: str, field: str | None) -> str:
    """A completions answer held to a list of choices, as vLLM holds it: the choice the text's first line
    is (stripped), else the first; the text as it is where the server does not take the field sent."""
    held = body.get(field) if field else None
    choices = held.get("choice") if isinstance(held, dict) else held
    if not isinstance(choices, list) or not choices:
        return text
    first = text.split("\n", 1)[0].strip()
    return next((c for c in choices if c.strip() == first), choices[0])


def _choice(body: dict[str, Any], content: str | None, finish: str | None) -> dict[str, Any]:
    """One choice (or one chunk's) in the shape of the endpoint asked: chat or completions."""
    if isinstance(body.get("prompt"), str):
        return {"index": 0, "text": content or "", "finish_reason": finish}
    if body.get("stream") is True or content is None:
        return {"index": 0, "delta": {} if content is None else {"content": content}, "finish_reason": finish}
    return {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}


def _cap(body: dict[str, Any]) -> int:
    cap = body.get("max_tokens") or body.get("max_completion_tokens")
    return int(cap) if isinstance(cap, int) else 1000


def _context_error(limit: int, prompt: int, reply: int) -> dict[str, Any]:
    message = (
        f"This model's maximum context length is {limit} tokens. However, you requested {prompt + reply} "
        f"tokens ({prompt} in the messages, {reply} in the completion). Please reduce the length of the "
        "messages or completion."
    )
    return {"error": {"message": message, "type": "invalid_request_error", "param": "messages",
                      "code": "context_length_exceeded"}}


def _completion(body: dict[str, Any], content: str, finish_reason: str, chars_per_token: float = 4) -> bytes:
    doc = {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "model": body.get("model", "scripted"),
        "choices": [_choice(body, content, finish_reason)],
        "usage": {
            "prompt_tokens": _prompt_tokens(body, chars_per_token),
            # a reply cut for length ran up to the cap it was given, as a real server counts it
            "completion_tokens": _cap(body) if finish_reason == "length" else len(content) // 4 + 1,
        },
    }
    return json.dumps(doc).encode()


CHUNK_CHARS = 7  # characters of a streamed reply's content chunk (a server's token; code's are longer)


def _sse(body: dict[str, Any], content: str, finish_reason: str) -> bytes:
    """The reply streamed like llama-cpp-python: role chunk, content deltas, finish, usage, [DONE]."""
    base = {"id": "chatcmpl-sse", "object": "chat.completion.chunk", "model": body.get("model", "scripted")}
    raw = isinstance(body.get("prompt"), str)
    streamed = {**body, "stream": True}
    role = {"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}
    chunks = [] if raw else [{**base, "choices": [role]}]
    for i in range(0, len(content), CHUNK_CHARS):
        chunks.append({**base, "choices": [_choice(streamed, content[i : i + CHUNK_CHARS], None)]})
    chunks.append({**base, "choices": [_choice(streamed, "" if raw else None, finish_reason)]})
    # a reply cut for length ran up to the cap it was given, as a real server counts it
    done = _cap(body) if finish_reason == "length" else len(content) // 4 + 1
    usage = {"prompt_tokens": _prompt_tokens(body), "completion_tokens": done}
    chunks.append({**base, "choices": [], "usage": usage})  # OpenAI's include_usage chunk
    lines = [f"data: {json.dumps(c)}\n\n" for c in chunks] + ["data: [DONE]\n\n"]
    return "".join(lines).encode()


def _has_content(event: bytes) -> bool:
    """An SSE event of `_sse` carries reply text (not the role, the finish, the usage or [DONE])."""
    try:
        chunk = json.loads(event.decode().removeprefix("data: "))
    except ValueError:
        return False
    choices = chunk.get("choices") or [{}]
    return bool(choices[0].get("text") or (choices[0].get("delta") or {}).get("content"))


def _plan_text(step: dict[str, Any]) -> str:
    text = json.dumps(step["plan"], indent=1)
    if step.get("fenced"):
        text = f"```json\n{text}\n```"
    if step.get("prose"):
        text = f"Here is the plan {{as requested}}:\n\n{text}\n\nLet me know if you need anything else."
    return text


def _handler_for(llm: ScriptedLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet test output
            pass

        def do_GET(self) -> None:
            if self.path.rstrip("/") == "/props" and llm.props_n_ctx in ("endless", "trickle"):
                llm.props_asked += 1
                self._endless(trickle=llm.props_n_ctx == "trickle")
            elif self.path.rstrip("/") == "/props" and llm.props_n_ctx:
                props = {"default_generation_settings": {"n_ctx": llm.props_n_ctx}, "total_slots": 1}
                self._send(200, json.dumps(props).encode())
            elif self.path.rstrip("/") == "/v1/models":
                with llm._occupy():  # llama-cpp-python serves /models only when the model is free
                    self._send(200, json.dumps({"object": "list", "data": [{"id": "scripted"}]}).encode())
            else:
                self._send(404, b'{"error": {"message": "not found"}}')

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw)
            except ValueError:
                body = {"_raw": raw.decode("utf-8", "replace")}
            path = self.path.rstrip("/")
            if path == "/extras/tokenize" and llm.vocab in ("endless", "trickle"):
                llm.tokenized += 1
                self._endless(trickle=llm.vocab == "trickle")
                return
            if path == "/extras/tokenize" and llm.vocab:
                llm.tokenized += 1
                text = str(body.get("input", ""))
                markers = text.count("<|im_start|>") + text.count("<|im_end|>")
                rest = text.replace("<|im_start|>", "").replace("<|im_end|>", "")
                count = 1 + markers * (1 if llm.vocab == "chatml" else 5) + (len(rest) + 3) // 4
                self._send(200, json.dumps({"tokens": list(range(count))}).encode())
                return
            if path not in ("/v1/chat/completions", "/v1/completions") or (
                    path == "/v1/completions" and llm.no_completions):
                self._send(404, b'{"error": {"message": "not found"}}')
                return
            llm._record(body, {k.lower(): v for k, v in self.headers.items()}, path)
            step = llm._next_step(body)
            if path == "/v1/completions" and isinstance(step.get("text"), str):
                step = {**step, "text": _chosen(body, _continued(body, step["text"]), llm.choice_field)}
            if "hang" in step:
                if llm._stopping.wait(float(step["hang"])):
                    return
                step = dict(llm._default)
            generate_s = float(step.get("generate_s", 0))
            if body.get("stream") is True:  # generated chunk by chunk, as it is sent
                with llm._occupy(generate_s=0.0):
                    self._answer(body, step, generate_s)
                return
            with llm._occupy(generate_s=generate_s):
                self._answer(body, step)

        def _answer(self, body: dict[str, Any], step: dict[str, Any], generate_s: float = 0.0) -> None:
            finish = step.get("finish_reason", "stop")
            content = _plan_text(step) if "plan" in step else step.get("text")
            wanted = body.get("n") if isinstance(body.get("n"), int) else 1
            if content is not None and llm.honour_n and wanted > 1 and not llm.sse:
                # like vLLM/OpenAI: n choices, each the next scripted step (or the default)
                steps = [step] + [llm._next_step(body) for _ in range(wanted - 1)]
                texts = [
                    (_plan_text(x) if "plan" in x else x.get("text") or "", x.get("finish_reason", "stop"))
                    for x in steps
                ]
                doc = json.loads(_completion(body, texts[0][0], texts[0][1], llm.chars_per_token))
                doc["choices"] = [{"index": i, "message": {"role": "assistant", "content": t},
                                   "finish_reason": f} for i, (t, f) in enumerate(texts)]
                self._send(200, json.dumps(doc).encode())
            elif content is not None and body.get("stream") is True:
                self._stream(body, content, finish, generate_s)
            elif content is not None and llm.sse:
                self._send(200, _sse(body, content, finish), content_type="text/event-stream")
            elif content is not None:
                self._send(200, _completion(body, content, finish, llm.chars_per_token))
            elif "raw" in step:
                raw = step["raw"]
                self._send(int(step.get("status", 200)), raw if isinstance(raw, bytes) else raw.encode())
            elif "status" in step:
                self._send(int(step["status"]), str(step.get("body", "")).encode(), step.get("headers") or {})
            else:
                self._send(500, b'{"error": {"message": "unknown script step"}}')

        def _stream(self, body: dict[str, Any], content: str, finish: str, generate_s: float = 0.0) -> None:
            """Like llama-cpp-python asked to stream: a chunk at a time (`generate_s` spread over them),
            stopping when the client leaves."""
            events = [e + b"\n\n" for e in _sse(body, content, finish).split(b"\n\n") if e]
            pace = max(llm.chunk_s, generate_s / len(events))
            messages = [m for m in body.get("messages") or () if isinstance(m, dict)]
            prompt = body["prompt"] if isinstance(body.get("prompt"), str) else "".join(
                f"<|im_start|>{m.get('role')}\n{m.get('content')}<|im_end|>\n" for m in messages
            ) + "<|im_start|>assistant\n"
            last, llm._last_prompt = llm._last_prompt, prompt
            shared = next((i for i, (a, b) in enumerate(zip(last, prompt, strict=False)) if a != b),
                          min(len(last), len(prompt)))
            reading = (len(prompt) - shared) / llm.chars_per_token * llm.read_s_per_token
            record: dict[str, Any] = {"chunks": 0, "of": len(events), "left": False}
            llm.streams.append(record)
            last_content = max((i for i, e in enumerate(events) if _has_content(e)), default=-1)
            try:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                if reading:
                    self.wfile.flush()
                    llm._stopping.wait(reading)
                for i, event in enumerate(events):
                    self.wfile.write(event)
                    self.wfile.flush()
                    record["chunks"] += 1
                    if pace and llm._stopping.wait(pace):
                        break
                    if i == last_content and llm.end_s and llm._stopping.wait(llm.end_s):
                        break
            except (BrokenPipeError, ConnectionResetError):
                record["left"] = True
            self.close_connection = True

        def _endless(self, trickle: bool = False) -> None:
            """A 200 whose JSON body never ends (until the client leaves or the server stops); trickled:
            a byte at a time, each in time for any read timeout."""
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(b'{"tokens": [')
                self.wfile.flush()
                while not llm._stopping.is_set():
                    if trickle:
                        self.wfile.write(b" ")
                        self.wfile.flush()
                        llm._stopping.wait(0.2)
                    else:
                        self.wfile.write(b"1, " * 4096)
            except (BrokenPipeError, ConnectionResetError):
                pass
            self.close_connection = True

        def _send(
            self, status: int, payload: bytes, headers: dict[str, str] | None = None,
            content_type: str = "application/json",
        ) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                for name, value in (headers or {}).items():
                    self.send_header(name, str(value))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (deadline); nothing to tell it

    return Handler


def scripted_llm_fixture() -> Iterator[ScriptedLLM]:
    """Body of the `scripted_llm` pytest fixture: a started server, stopped after the test."""
    llm = ScriptedLLM().start()
    try:
        yield llm
    finally:
        llm.stop()


def _load_script(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any] | None, dict[str, Any]]:
    """(steps, default, server behaviours) from a script file."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(doc, list):
        return doc, None, {}
    behaviours = {k: v for k, v in doc.items() if k not in ("steps", "default")}
    return list(doc.get("steps", [])), doc.get("default"), behaviours


def main(argv: list[str] | None = None) -> int:
    """Serve a script until SIGTERM/SIGINT; write the chosen port to --port-file."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--script", type=Path, help="JSON list of steps (see the module docstring)")
    ap.add_argument("--port-file", type=Path, required=True, help="the chosen port is written here")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--log", type=Path, help="append each request body here as a JSON line")
    args = ap.parse_args(argv)

    llm = ScriptedLLM(log_path=args.log)
    if args.script is not None:
        steps, default, behaviours = _load_script(args.script)
        for step in steps:
            llm.push(step)
        if default is not None:
            llm.set_default(default)
        llm.behave(**behaviours)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    llm.start(args.port)
    # Written via rename so a reader never sees a partial port number.
    tmp = args.port_file.with_name(args.port_file.name + ".tmp")
    tmp.write_text(f"{llm.port}\n", encoding="utf-8")
    os.replace(tmp, args.port_file)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        llm.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
