"""A scripted OpenAI-compatible chat server for offline tests (threaded http.server).

Why a real socket rather than a mocked transport: the ``openai`` SDK's HTTP layer, its
timeouts and its error classes are exercised exactly as against a real server.

Each POST ``/v1/chat/completions`` consumes the next *cue* (``server.queue(...)``), or
``server.default`` when the queue is empty. Cues:

``good``      valid JSON: entries covering every ``[Tn]`` turn of an extraction prompt,
              or ``{"answer": server.answer, "fact_ids": ["F1"]}`` for a question
``fenced``    the same JSON inside a ```json fence with prose around it
``prose``     the same JSON embedded in a sentence
``text``      a bare prose answer (no JSON)
``invalid``   not JSON at all
``bad_ids``   entries citing a turn id that does not exist
``partial``   entries for only the first half of the turns
``no_text``   entries without a text field
``429``       HTTP 429 (rate limited)
``500``       HTTP 500
``timeout``   sleeps ``server.sleep_s`` then answers ``good`` (past a short client timeout)
``400_rf``    HTTP 400 if the request has ``response_format``, else ``good``
``drip``      a ``good`` reply whose body is sent one byte per ``server.drip_s`` seconds
``endless``   a chunked body that never ends (one chunk per ``server.drip_s`` seconds)
``html``      HTTP 200 with an HTML page (a proxy or login page in front of the model)
``huge``      a valid reply whose content is ``server.huge_chars`` characters long
A callable cue gets the request body and returns ``(status, content_or_payload)``.
"""

from __future__ import annotations

import gzip
import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TURN_LINE = re.compile(r"^\[(T\d+)\] ", re.M)


def _user_text(body: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content", "")) for m in body.get("messages", []) if m.get("role") == "user")


def prompt_text(body: dict[str, Any]) -> str:
    """Every message's content of a request, joined (what a model would read)."""
    return "\n".join(str(m.get("content", "")) for m in body.get("messages", []))


class FakeOpenAIServer:
    def __init__(self, default: str | Callable[..., Any] = "good") -> None:
        self.default = default
        self.answer = "a short answer"
        self.sleep_s = 1.5
        self.drip_s = 1.0
        self.huge_chars = 5_000_000
        self.requests: list[dict[str, Any]] = []
        #: The Accept-Encoding of each raw-cue request (what the client asked for).
        self.encodings: list[str] = []
        self._cues: deque[Any] = deque()
        self._lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---------------------------------------------------------------- control
    def queue(self, *cues: Any) -> FakeOpenAIServer:
        with self._lock:
            self._cues.extend(cues)
        return self

    @property
    def url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.requests)

    def start(self) -> FakeOpenAIServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:  # /v1/models, for readiness checks
                self._send(200, {"object": "list", "data": [{"id": "fake-model", "object": "model"}]})

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.requests.append(body)
                    cue = server._cues.popleft() if server._cues else server.default
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    if cue in ("drip", "endless", "html", "gzip"):
                        server.encodings.append(self.headers.get("accept-encoding", ""))
                        _send_raw(self, server, cue, body)
                        return
                    status, payload, delay = server._respond(cue, body)
                    if delay:
                        time.sleep(delay)
                    self._send(status, payload)
                except (BrokenPipeError, ConnectionResetError):  # client gave up (timeout)
                    pass
                finally:
                    with server._lock:
                        server.in_flight -= 1

            def _send(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                if status == 429:
                    self.send_header("retry-after", "0")
                self.end_headers()
                self.wfile.write(data)

        class Server(ThreadingHTTPServer):
            request_queue_size = 128  # many concurrent async clients: no refused connections
            daemon_threads = True

        self._httpd = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ---------------------------------------------------------------- replies
    def good_json(self, body: dict[str, Any], *, fraction: float = 1.0, bad_ids: bool = False,
                  no_text: bool = False) -> dict[str, Any]:
        user = _user_text(body)
        ids = TURN_LINE.findall(user)
        if not ids:  # a question, not an extraction window
            return {"answer": self.answer, "fact_ids": ["F1", "F99"]}
        keep = ids[: max(1, int(len(ids) * fraction))]
        entries = []
        for tid in keep:
            line = next(ln for ln in user.splitlines() if ln.startswith(f"[{tid}] "))
            entry: dict[str, Any] = {
                "text": f"Fact from {tid}: {line.split(': ', 1)[-1][:80]}",
                "source_turn_ids": ["T999" if bad_ids else tid],
                "keywords": ["fact", tid.lower()],
                "persons": [],
                "entities": [],
                "location": None,
                "topic": "testing",
            }
            if no_text:
                del entry["text"]
            entries.append(entry)
        return {"entries": entries}

    @staticmethod
    def completion(body: dict[str, Any], content: str) -> dict[str, Any]:
        prompt_tokens = max(1, len(prompt_text(body)) // 4)
        completion_tokens = max(1, len(content) // 4)
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "fake-model"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }

    def _respond(self, cue: Any, body: dict[str, Any]) -> tuple[int, Any, float]:
        def ok(content: str, delay: float = 0.0) -> tuple[int, Any, float]:
            return 200, self.completion(body, content), delay

        def error(status: int, message: str, param: str | None = None) -> tuple[int, Any, float]:
            return status, {"error": {"message": message, "type": "invalid_request_error", "param": param,
                                      "code": None}}, 0.0

        if callable(cue):
            status, content = cue(body)
            if status == 200 and isinstance(content, str):
                return ok(content)
            return status, content, 0.0
        good = json.dumps(self.good_json(body))
        if cue == "400_rf":
            if "response_format" in body:
                return error(400, "'response_format' is not supported by this model", "response_format")
            return ok(good)
        replies: dict[str, Callable[[], tuple[int, Any, float]]] = {
            "good": lambda: ok(good),
            "fenced": lambda: ok(f"Here is the result:\n```json\n{good}\n```\nLet me know if you need more."),
            "prose": lambda: ok(f"Sure! The JSON is {good} and that is all."),
            "text": lambda: ok(f"{self.answer}"),
            "invalid": lambda: ok("I could not produce JSON for this {unbalanced"),
            "bad_ids": lambda: ok(json.dumps(self.good_json(body, bad_ids=True))),
            "partial": lambda: ok(json.dumps(self.good_json(body, fraction=0.5))),
            "no_text": lambda: ok(json.dumps(self.good_json(body, no_text=True))),
            "429": lambda: error(429, "Rate limit reached"),
            "500": lambda: error(500, "internal server error"),
            "timeout": lambda: ok(good, self.sleep_s),
            "huge": lambda: ok("x" * self.huge_chars),
        }
        if cue in replies:
            return replies[cue]()
        raise ValueError(f"unknown cue {cue!r}")


def _send_raw(self: BaseHTTPRequestHandler, server: FakeOpenAIServer, cue: str, body: dict[str, Any]) -> None:
    """The replies that are not one JSON document: an HTML page, a drip, an endless body."""
    if cue == "gzip":  # a small completion, compressed although identity was asked for
        packed = gzip.compress(json.dumps(server.completion(body, '{"answer": "ok"}')).encode())
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-encoding", "gzip")
        self.send_header("content-length", str(len(packed)))
        self.end_headers()
        self.wfile.write(packed)
        return
    if cue == "html":
        page = b"<html><body><h1>Welcome</h1>Please log in.</body></html>"
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)
        return
    data = json.dumps(server.completion(body, json.dumps(server.good_json(body)))).encode()
    self.send_response(200)
    self.send_header("content-type", "application/json")
    if cue == "drip":
        self.send_header("content-length", str(len(data)))
    else:
        self.send_header("transfer-encoding", "chunked")
    self.end_headers()
    self.wfile.flush()
    for i in range(10**9):
        if server._httpd is None:
            return
        if cue == "drip":
            if i >= len(data):
                return
            self.wfile.write(data[i:i + 1])
        else:
            self.wfile.write(b"1\r\n \r\n")
        self.wfile.flush()
        time.sleep(server.drip_s)


def fake_client(server: FakeOpenAIServer, **kw: Any) -> Any:
    """An ``LLMClient`` on ``server`` with test-speed timeouts and backoff (``kw`` overrides)."""
    from ariadnemem_core.llm import LLMClient

    kw.setdefault("model", "fake-model")
    # The timeout is a total deadline per call (retries included): a loaded machine can take
    # seconds to answer even a local call, so only the tests about deadlines set a short one.
    kw.setdefault("timeout", 30.0)
    kw.setdefault("max_retries", 1)
    kw.setdefault("backoff_initial", 0.01)
    kw.setdefault("backoff_max", 0.02)
    return LLMClient(base_url=server.url, **kw)
