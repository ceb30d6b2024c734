"""A scripted, OpenAI-compatible LLM server on 127.0.0.1 for tests.

In-process::

    with ScriptedLLM() as llm:
        llm.push_plan({"summary": "fix", "edits": [], "verify": [], "report": None})
        cfg = LLMConfig(base_url=llm.base_url)
        ...
        assert llm.requests[0]["max_tokens"] == 4096

As a subprocess (end-to-end tests of `autod run`)::

    python tests/llmserver.py --script steps.json --port-file port.txt [--log requests.jsonl]

The script is a JSON list of steps, or {"steps": [...], "default": step, "refuse_response_format": true}.
A step is one of:
    {"plan": {...}, "finish_reason": "stop", "fenced": false, "prose": false}
    {"text": "...", "finish_reason": "stop"}
    {"status": 500, "body": "", "headers": {}}
    {"hang": 5}                       sleep, then answer with the default
    {"raw": "...", "status": 200}     the body exactly as given
Each POST /v1/chat/completions consumes one step; an empty script answers with the default
(a 200 plan that does nothing). GET /v1/models answers 200.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import signal
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

NOTHING_TO_DO: dict[str, Any] = {"summary": "nothing to do", "edits": [], "verify": [], "report": None}
REFUSAL = {"error": {"message": "response_format json_schema not supported", "type": "invalid_request_error"}}


class ScriptedLLM:
    """Real HTTP server in a daemon thread; answers chat completions from a script of steps."""

    def __init__(self, *, log_path: str | os.PathLike[str] | None = None) -> None:
        self.requests: list[dict[str, Any]] = []  # every JSON request body, in order
        self.headers: list[dict[str, str]] = []  # the matching request headers (lower-case names)
        self._steps: collections.deque[dict[str, Any]] = collections.deque()
        self._default: dict[str, Any] = {"plan": NOTHING_TO_DO}
        self._refuse_schema = False
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

    def refuse_response_format(self, flag: bool = True) -> None:
        """Answer 400 to requests carrying response_format json_schema (like many local servers)."""
        self._refuse_schema = flag

    @property
    def pending(self) -> int:
        """Steps not yet consumed."""
        with self._lock:
            return len(self._steps)

    # -- serving (handler threads) --------------------------------------------------
    def _record(self, body: dict[str, Any], headers: dict[str, str]) -> None:
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            if self._log_path is not None:
                with self._log_path.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(body) + "\n")

    def _next_step(self, body: dict[str, Any]) -> dict[str, Any]:
        fmt = body.get("response_format")
        if self._refuse_schema and isinstance(fmt, dict) and fmt.get("type") == "json_schema":
            return {"status": 400, "body": json.dumps(REFUSAL)}  # does not consume a scripted step
        with self._lock:
            return self._steps.popleft() if self._steps else dict(self._default)


def _completion(body: dict[str, Any], content: str, finish_reason: str) -> bytes:
    prompt = sum(len(str(m.get("content", ""))) for m in body.get("messages") or [] if isinstance(m, dict))
    doc = {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "model": body.get("model", "scripted"),
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish_reason}
        ],
        "usage": {"prompt_tokens": prompt // 4 + 1, "completion_tokens": len(content) // 4 + 1},
    }
    return json.dumps(doc).encode()


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
            if self.path.rstrip("/") == "/v1/models":
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
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._send(404, b'{"error": {"message": "not found"}}')
                return
            llm._record(body, {k.lower(): v for k, v in self.headers.items()})
            step = llm._next_step(body)
            if "hang" in step:
                if llm._stopping.wait(float(step["hang"])):
                    return
                step = dict(llm._default)
            self._answer(body, step)

        def _answer(self, body: dict[str, Any], step: dict[str, Any]) -> None:
            finish = step.get("finish_reason", "stop")
            if "plan" in step:
                self._send(200, _completion(body, _plan_text(step), finish))
            elif "text" in step:
                self._send(200, _completion(body, step["text"], finish))
            elif "raw" in step:
                raw = step["raw"]
                self._send(int(step.get("status", 200)), raw if isinstance(raw, bytes) else raw.encode())
            elif "status" in step:
                self._send(int(step["status"]), str(step.get("body", "")).encode(), step.get("headers") or {})
            else:
                self._send(500, b'{"error": {"message": "unknown script step"}}')

        def _send(self, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
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


def _load_script(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any] | None, bool]:
    doc = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(doc, list):
        return doc, None, False
    return list(doc.get("steps", [])), doc.get("default"), bool(doc.get("refuse_response_format", False))


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
        steps, default, refuse = _load_script(args.script)
        for step in steps:
            llm.push(step)
        if default is not None:
            llm.set_default(default)
        llm.refuse_response_format(refuse)
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
