"""One OpenAI-compatible LLM client for the whole library (extraction and synthesis).

Why one client: every LLM call of AriadneMem (one per extraction window, one per answer)
goes through :class:`LLMClient`, so retries, JSON handling, timeouts and the token/latency
accounting are identical everywhere and the benchmarks can report cost per call.

* Configuration comes from arguments or the environment: ``OPENAI_API_KEY``,
  ``OPENAI_BASE_URL``, ``ARIADNEMEM_LLM_MODEL`` (default ``gpt-4o-mini``) and
  ``ARIADNEMEM_LLM_TIMEOUT`` (seconds), ``ARIADNEMEM_LLM_JSON_MODE`` (0 = never send
  ``response_format``). With only a base URL (a local server) the key is
  ``"not-needed"``. :meth:`LLMClient.from_env` returns None when neither the key nor the
  base URL is set: the library then stays offline (rule extraction, extractive answers).
* Transient failures (HTTP 408/409/429/5xx, timeouts, connection errors) are retried
  with exponential backoff and jitter by tenacity; the SDK's own retry loop is switched
  off so that every retry is counted here.
* ``timeout`` is a *total* wall-clock deadline per call, retries and backoff included.
  HTTP timeouts are per operation (a server dripping one byte per second never trips a
  read timeout), so the deadline is enforced at the transport and, on the sync path,
  at the socket: every connect/read/write timeout is capped at the time left, every
  socket read (response headers included: a server may drip its status line and
  headers) waits at most the time left and fails once it is gone, and the response body
  is read through a guard that ends the read once the deadline passes (checked per
  received chunk, so a drip or an endless chunked stream stops within one chunk of the
  deadline). A call that passes its deadline raises :class:`LLMTimeoutError`. The async path
  also wraps the call in ``asyncio.timeout``, which cancels it wherever it waits. Why
  not a watchdog thread: it could return to the caller in time but would leave the
  thread reading the drip; the guard closes the connection itself. A body larger than
  ``MAX_REPLY_BYTES`` is refused the same way (not retried).
* JSON: ``response_format={"type": "json_object"}`` is sent; if the server rejects the
  parameter (HTTP 400) the call is repeated without it once and the client remembers not
  to send it again. Replies are parsed tolerantly (```json fences, prose around the
  object, the first JSON value found by ``json.JSONDecoder.raw_decode``), because servers
  without JSON mode still answer; broken JSON is refused, never repaired.
* Every call is recorded in a thread-safe :class:`LLMUsage` accumulator
  (``client.usage`` is a dict snapshot).
* Tests inject an ``http_client`` / ``async_http_client`` or prebuilt SDK clients (build
  those with ``max_retries=0``, or the SDK retries underneath our counted retries).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import itertools
import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_any,
    wait_random_exponential,
)
from tenacity.stop import stop_base

from .errors import LLMError, LLMTimeoutError
from .limits import replace_surrogates

ENV_API_KEY = "OPENAI_API_KEY"
ENV_BASE_URL = "OPENAI_BASE_URL"
ENV_MODEL = "ARIADNEMEM_LLM_MODEL"
ENV_TIMEOUT = "ARIADNEMEM_LLM_TIMEOUT"
#: "0"/"false"/"off" stops sending ``response_format``: llama.cpp enforces it with a JSON
#: grammar that made generation ~8x slower in our measurements (1.3 vs 10.4 tokens/s on
#: 2 CPU cores); the tolerant parser reads fenced or plain JSON replies just as well.
ENV_JSON_MODE = "ARIADNEMEM_LLM_JSON_MODE"
DEFAULT_MODEL = "gpt-4o-mini"
#: Key sent to servers that need none (llama.cpp, vLLM, Ollama): the SDK insists on one.
PLACEHOLDER_API_KEY = "not-needed"
#: Generous because local CPU models need tens of seconds per extraction window.
DEFAULT_TIMEOUT_S = 120.0
#: Largest reply body read, in bytes. An extraction reply is a few KB and an answer a few
#: hundred bytes; a multi-megabyte body is a broken or hostile server, refused unread.
MAX_REPLY_BYTES = 2 * 1024 * 1024
#: ``parse_json`` tries at most this many ``{``/``[`` positions: each try scans to the end
#: of the reply, so an unbounded search over ``"[" * n`` would be quadratic.
MAX_JSON_CANDIDATES = 64

Message = Mapping[str, str]


# ---------------------------------------------------------------------- usage accounting
class LLMUsage:
    """Thread-safe totals over every call of one client (extraction runs in threads)."""

    KEYS = ("calls", "prompt_tokens", "completion_tokens", "seconds", "retries", "failures",
            "json_mode_fallbacks", "parse_failures")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._totals: dict[str, float] = dict.fromkeys(self.KEYS, 0)

    def record(self, *, prompt_tokens: int = 0, completion_tokens: int = 0, seconds: float = 0.0,
               retries: int = 0, failed: bool = False) -> None:
        with self._lock:
            t = self._totals
            t["calls"] += 1
            t["prompt_tokens"] += prompt_tokens
            t["completion_tokens"] += completion_tokens
            t["seconds"] += seconds
            t["retries"] += retries
            t["failures"] += int(failed)

    def bump(self, key: str, n: int = 1) -> None:
        with self._lock:
            self._totals[key] = self._totals.get(key, 0) + n

    def as_dict(self) -> dict[str, float]:
        with self._lock:
            out = dict(self._totals)
        for key in out:
            if key != "seconds":
                out[key] = int(out[key])
        out["seconds"] = round(float(out["seconds"]), 6)
        return out


@dataclass(slots=True)
class LLMResponse:
    """One completed call: the raw text, the parsed JSON (``complete_json`` only) and its cost."""

    text: str
    data: Any = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    retries: int = 0
    model: str = ""
    finish_reason: str | None = None

    def usage(self) -> dict[str, Any]:
        return {
            "calls": 1,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "latency_s": round(self.latency_s, 6),
            "retries": self.retries,
        }


# ---------------------------------------------------------------------- JSON parsing
_FENCE = re.compile(r"```[ \t]*(?:json|JSON|javascript|js)?[ \t]*\r?\n?(.*?)```", re.S)


_NOTHING = object()


def _loads(text: str) -> Any:
    """``json.loads`` with lone surrogates (``"\\ud800"`` escapes) replaced by U+FFFD, or
    ``_NOTHING``. Nesting deeper than the interpreter's recursion limit counts as not
    JSON: ``"[" * 3000`` is no reply a caller can use."""
    try:
        return replace_surrogates(json.loads(text))
    except (json.JSONDecodeError, RecursionError):
        return _NOTHING


_DECODER = json.JSONDecoder()


def _decode_at(text: str, start: int) -> Any:
    """The JSON value starting at ``start`` (text after it ignored), or ``_NOTHING``.

    The standard library's ``raw_decode`` finds where the value ends, string literals and
    escapes included, so no hand-written bracket matcher is needed."""
    try:
        value, _ = _DECODER.raw_decode(text, start)
    except (json.JSONDecodeError, RecursionError):
        return _NOTHING
    return replace_surrogates(value)


_THOUGHT_END = re.compile(r"</think>", re.I)
_THOUGHT_START = re.compile(r"<think>", re.I)


def past_thinking(text: str) -> str:
    """The reply after a reasoning model's draft: after its last ``</think>``; before a
    ``<think>`` never closed (a reply cut off while drafting has no answer yet).

    Args:
        text: a model's reply.

    Returns:
        What the model answered, which may be empty.
    """
    ends = list(_THOUGHT_END.finditer(text))
    if ends:
        return text[ends[-1].end():]
    start = _THOUGHT_START.search(text)
    return text[: start.start()] if start else text


def _top_level(text: str, opener: str) -> Iterator[int]:
    """The positions of ``opener`` that no bracket before them encloses (string literals
    read as such), in one pass: a ``{`` inside an object that did not parse (a reply cut
    off at ``max_tokens``) is one of its parts, never the answer."""
    depth = 0
    in_string = escaped = False
    for pos, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            if depth == 0 and ch == opener:
                yield pos
            depth += 1
        elif ch in "}]" and depth:
            depth -= 1


def _scan(text: str) -> Any:
    """The first JSON value that parses at a ``{`` (then ``[``) no earlier bracket
    encloses, else at any one (prose with a stray bracket or quote before the JSON,
    ":-[" or 6'2", makes the real value look nested), else ``_NOTHING``. A reply cut off
    at max_tokens is refused by its finish reason whatever parses here
    (``LLMClient._finish``)."""
    finders: tuple[Callable[[str, str], Iterator[int]], ...] = (_top_level, _every)
    for find in finders:
        for opener in "{[":
            for pos in itertools.islice(find(text, opener), MAX_JSON_CANDIDATES):
                found = _decode_at(text, pos)
                if found is not _NOTHING:
                    return found
    return _NOTHING


def _every(text: str, opener: str) -> Iterator[int]:
    """Every position of ``opener`` in ``text``."""
    pos = text.find(opener)
    while pos != -1:
        yield pos
        pos = text.find(opener, pos + 1)


def parse_json(text: str) -> Any:
    """Parse a model reply that should be JSON, tolerating what models wrap around it.

    Tried in order: the whole reply; then, a reasoning model's draft
    (``<think>...</think>``) left out (the JSON it drafts is not its answer), the rest;
    each fenced code block; the JSON value starting at each ``{`` (then ``[``) that no
    earlier bracket encloses; then at each one at all (prose with a stray bracket or
    quote before the JSON), first one that parses wins. Broken JSON is not repaired: it
    is an :class:`LLMError`, which the extractor answers with a retry or the rule
    fallback; a reply cut off at ``max_tokens`` is refused by its finish reason, never
    read as the shorter object inside it. Raises :class:`LLMError` with the start of the
    reply when nothing parses.
    """
    if not isinstance(text, str) or not text.strip():
        raise LLMError("LLM returned an empty reply where JSON was expected")
    found = _loads(text.strip())  # a whole JSON reply, even one quoting "<think>" in a string
    if found is not _NOTHING:
        return found
    stripped = past_thinking(text).strip()
    if not stripped:
        raise LLMError("LLM reply holds only a reasoning draft (<think>...), no answer after it")
    found = _loads(stripped)
    if found is not _NOTHING:
        return found
    for m in _FENCE.finditer(stripped):
        found = _loads(m.group(1).strip())
        if found is not _NOTHING:
            return found
    found = _scan(stripped)
    if found is not _NOTHING:
        return found
    snippet = stripped[:200].replace("\n", " ")
    raise LLMError(f"LLM reply is not valid JSON (no parseable object found): {snippet!r}")


# ---------------------------------------------------------------------- errors
def _status(exc: BaseException) -> int | None:
    code = getattr(exc, "status_code", None)
    return code if isinstance(code, int) else None


def is_transient(exc: BaseException) -> bool:
    """Worth retrying: rate limits, server errors, timeouts, dropped connections (but not
    a passed deadline nor an oversized reply, which would only repeat)."""
    import openai

    if isinstance(exc, _ReplyTooLarge | _DeadlinePassed):
        return False
    if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
        return True
    code = _status(exc)
    return code is not None and (code in (408, 409, 429) or code >= 500)


def _rejects_response_format(exc: BaseException) -> bool:
    """A 400/422 while JSON mode was requested: assume the server lacks the parameter."""
    return _status(exc) in (400, 422)


def _describe(exc: BaseException) -> str:
    code = _status(exc)
    kind = type(exc).__name__
    msg = str(exc).strip() or kind
    if len(msg) > 300:
        msg = msg[:300] + "..."
    return f"{kind} (HTTP {code}): {msg}" if code else f"{kind}: {msg}"


def _retry_after(state: RetryCallState, maximum: float) -> float:
    """A server's ``Retry-After`` (seconds, capped at ``maximum``), else 0. Tenacity has
    no wait that reads it, so the client waits the longer of this and its jitter."""
    exc = state.outcome.exception() if state.outcome else None
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None:
        return 0.0
    try:
        return min(float(headers.get("retry-after", "")), maximum)
    except (TypeError, ValueError):
        return 0.0


# ---------------------------------------------------------------------- deadline guard
#: Monotonic deadline of the call running in this thread / task (None: no guard).
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("ariadnemem_llm_deadline",
                                                                        default=None)


class _StopAt(stop_base):
    """Stop retrying once the call's deadline has passed."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline

    def __call__(self, retry_state: RetryCallState) -> bool:
        return time.monotonic() >= self.deadline


class _ReplyTooLarge(Exception):
    """The body passed ``MAX_REPLY_BYTES`` (not an httpx error: the SDK must not retry it)."""


class _DeadlinePassed(Exception):
    """The call's total deadline passed (raised where no HTTP request is in flight)."""


def _capped_timeouts(request: Any, remaining: float) -> None:
    """Cap every per-operation timeout of ``request`` at the time left."""
    current = request.extensions.get("timeout") or {}
    request.extensions["timeout"] = {
        key: remaining if current.get(key) is None else min(float(current[key]), remaining)
        for key in ("connect", "read", "write", "pool")
    }


def _check_encoding(headers: Any) -> None:
    """Refuse a compressed reply: the size guard counts the bytes that arrive, and a
    megabyte of gzip decodes to a gigabyte of JSON in memory. Every request asks for
    ``identity``; a server that compresses anyway is refused unread."""
    encoding = str(headers.get("content-encoding", "") or "").strip().lower()
    if encoding not in ("", "identity"):
        raise _ReplyTooLarge(f"reply compressed ({encoding}) although an uncompressed one was asked for: "
                             f"its size cannot be bounded before it is decoded")


def _check_chunk(total: int, deadline: float | None, request: Any) -> None:
    import httpx2

    if total > MAX_REPLY_BYTES:
        raise _ReplyTooLarge(f"reply body larger than {MAX_REPLY_BYTES} bytes")
    if deadline is not None and time.monotonic() > deadline:
        raise httpx2.ReadTimeout("total deadline passed while reading the reply", request=request)


def _prepare(request: Any) -> float | None:
    """The running call's deadline, after capping ``request``'s timeouts at the time left.
    The request asks for an uncompressed reply (see :func:`_check_encoding`)."""
    import httpx2

    request.headers["Accept-Encoding"] = "identity"
    deadline = _DEADLINE.get()
    if deadline is not None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise httpx2.ConnectTimeout("total deadline passed before the request", request=request)
        _capped_timeouts(request, remaining)
    return deadline


@functools.cache
def _sync_guard() -> type:
    """The sync guard transport (built lazily: httpx2 comes with ``openai``)."""
    import httpx2

    class GuardedStream(httpx2.SyncByteStream):
        def __init__(self, inner: Any, deadline: float | None, request: Any) -> None:
            self._inner, self._deadline, self._request = inner, deadline, request

        def __iter__(self) -> Any:
            total = 0
            for chunk in self._inner:
                total += len(chunk)
                _check_chunk(total, self._deadline, self._request)
                yield chunk

        def close(self) -> None:
            self._inner.close()

    class Guarded(httpx2.BaseTransport):
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def handle_request(self, request: Any) -> Any:
            deadline = _prepare(request)
            resp = self.inner.handle_request(request)
            try:
                _check_encoding(resp.headers)
            except _ReplyTooLarge:
                resp.close()
                raise
            return httpx2.Response(resp.status_code, headers=resp.headers, extensions=resp.extensions,
                                   stream=GuardedStream(resp.stream, deadline, request))

        def close(self) -> None:
            self.inner.close()

    return Guarded


def _socket_timeout(timeout: float | None, what: str) -> float | None:
    """``timeout`` capped at the running call's time left; a read or write timeout once
    the deadline has passed (``what``: "read" or "write")."""
    import httpcore2

    deadline = _DEADLINE.get()
    if deadline is None:
        return timeout
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        error = httpcore2.ReadTimeout if what == "read" else httpcore2.WriteTimeout
        raise error(f"total deadline passed while waiting to {what} the reply")
    return remaining if timeout is None else min(timeout, remaining)


@functools.cache
def _deadline_stream() -> type:
    """The sync network stream whose every read and write stops at the running call's
    deadline (see :func:`_deadline_backend`)."""
    import httpcore2

    class DeadlineStream(httpcore2.NetworkStream):
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            data: bytes = self.inner.read(max_bytes, _socket_timeout(timeout, "read"))
            return data

        def write(self, buffer: bytes, timeout: float | None = None) -> None:
            self.inner.write(buffer, _socket_timeout(timeout, "write"))

        def close(self) -> None:
            self.inner.close()

        def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                      timeout: float | None = None) -> Any:
            return DeadlineStream(self.inner.start_tls(ssl_context, server_hostname, timeout))

        def get_extra_info(self, info: str) -> Any:
            return self.inner.get_extra_info(info)

    return DeadlineStream


@functools.cache
def _deadline_backend() -> type:
    """The sync network backend whose every socket read and write stops at the running
    call's deadline (built lazily: httpcore2 comes with ``openai``).

    Why at the socket: HTTP timeouts are per operation and each dripped byte completes a
    read, so a server that sends ``HTTP/1.1 200 OK`` and then one byte every half second
    never trips one, and the response headers are parsed below the transport, before any
    body guard sees a byte. The reads happen in the calling thread, where the call's
    deadline is known (``_DEADLINE``): each read waits at most the time left and raises a
    read timeout once it is gone, so the connection is dropped in the thread that owns it
    (no watchdog thread left reading the drip).
    """
    import httpcore2

    stream = _deadline_stream()

    class DeadlineBackend(httpcore2.NetworkBackend):
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                        local_address: str | None = None, socket_options: Any = None) -> Any:
            return stream(self.inner.connect_tcp(host, port, timeout, local_address, socket_options))

        def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: Any = None) -> Any:
            return stream(self.inner.connect_unix_socket(path, timeout, socket_options))

        def sleep(self, seconds: float) -> None:
            self.inner.sleep(seconds)

    return DeadlineBackend


@functools.cache
def _async_guard() -> type:
    """The async guard transport."""
    import httpx2

    class AsyncGuardedStream(httpx2.AsyncByteStream):
        def __init__(self, inner: Any, deadline: float | None, request: Any) -> None:
            self._inner, self._deadline, self._request = inner, deadline, request

        async def __aiter__(self) -> Any:
            total = 0
            async for chunk in self._inner:
                total += len(chunk)
                _check_chunk(total, self._deadline, self._request)
                yield chunk

        async def aclose(self) -> None:
            await self._inner.aclose()

    class AsyncGuarded(httpx2.AsyncBaseTransport):
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        async def handle_async_request(self, request: Any) -> Any:
            deadline = _prepare(request)
            resp = await self.inner.handle_async_request(request)
            try:
                _check_encoding(resp.headers)
            except _ReplyTooLarge:
                await resp.aclose()
                raise
            return httpx2.Response(resp.status_code, headers=resp.headers, extensions=resp.extensions,
                                   stream=AsyncGuardedStream(resp.stream, deadline, request))

        async def aclose(self) -> None:
            await self.inner.aclose()

    return AsyncGuarded


def guard_http_client(client: Any) -> Any:
    """Route ``client``'s requests (an ``httpx2`` client, or an SDK client holding one)
    through the deadline and size guard; returns ``client``.

    The one place that reaches into another library's private attributes, because no
    public hook exists for what the guard must see: the SDK's ``_client`` (its httpx2
    client), httpx2's ``_transport`` and ``_mounts`` (a transport sees the body as it
    streams in; httpx2 takes a transport only when the client is built, and the SDK builds
    its own) and, for sync clients, httpcore2's ``_pool._network_backend`` (a socket read
    is the only place a dripped header stops; ``HTTPTransport`` takes no network backend).
    ``tests/test_llm_client.py`` checks that the guard is in place on the installed
    versions, so a release that renames these fails there, not silently. Other clients
    (legacy ``httpx``) are left as they are: their calls still have per-operation timeouts
    and the async path's ``asyncio.timeout``, but no body guard.
    """
    import httpx2

    http = getattr(client, "_client", client)
    if not isinstance(http, httpx2.Client | httpx2.AsyncClient):
        return client
    sync = isinstance(http, httpx2.Client)
    guard, backend = (_sync_guard(), _deadline_backend()) if sync else (_async_guard(), None)
    mounts = getattr(http, "_mounts", {})
    slots: list[tuple[Any, Any]] = [*mounts.items(), (None, getattr(http, "_transport", None))]
    for key, transport in slots:
        if transport is None or isinstance(transport, guard):
            continue
        pool = getattr(transport, "_pool", None)
        inner = getattr(pool, "_network_backend", None)
        if backend is not None and inner is not None and not isinstance(inner, backend):
            pool._network_backend = backend(inner)  # type: ignore[union-attr]
        if key is None:
            http._transport = guard(transport)
        else:
            mounts[key] = guard(transport)
    return client


# ---------------------------------------------------------------------- the client
class LLMClient:
    """Sync + async chat client over the ``openai`` SDK with retries, JSON and accounting.

    ``timeout`` (seconds, default ``ARIADNEMEM_LLM_TIMEOUT`` or 120) is the total
    wall-clock deadline of one call, every retry and backoff included.

    Thread-safe (the SDK's sync client is); the async client is created per event loop
    because an HTTP connection pool must not outlive the loop it was opened in.
    """

    def __init__(
        self,
        *,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | None = None,
        max_retries: int = 3,
        backoff_initial: float = 0.5,
        backoff_max: float = 20.0,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        json_mode: bool | None = None,
        http_client: Any = None,
        async_http_client: Any = None,
        openai_client: Any = None,
        async_openai_client: Any = None,
    ) -> None:
        env = os.environ
        self.model = model or env.get(ENV_MODEL) or DEFAULT_MODEL
        self.base_url = (base_url or env.get(ENV_BASE_URL) or "").strip() or None
        if self.base_url is not None and not re.match(r"https?://[^/\s]", self.base_url, re.I):
            # "localhost:11434/v1" failed four attempts later as "Connection error".
            raise LLMError(f"LLM base URL {self.base_url!r} ({ENV_BASE_URL} or base_url=) must start with "
                           f"http:// or https://, e.g. http://localhost:11434/v1")
        key = api_key or env.get(ENV_API_KEY) or None
        if key is None and self.base_url:
            key = PLACEHOLDER_API_KEY
        if key is None and openai_client is None and async_openai_client is None:
            raise LLMError(
                f"no LLM configured: pass api_key/base_url or set {ENV_API_KEY} or {ENV_BASE_URL}"
            )
        self._api_key = key
        if timeout is None:
            try:
                timeout = float(env.get(ENV_TIMEOUT, DEFAULT_TIMEOUT_S))
            except ValueError as exc:
                raise LLMError(f"{ENV_TIMEOUT} must be a number of seconds") from exc
        if not 0 < timeout < float("inf"):  # NaN and inf failed only after an attempt
            raise LLMError(f"the LLM timeout must be a positive, finite number of seconds, got {timeout!r}")
        if max_retries < 0:
            raise LLMError("max_retries must be >= 0")
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.temperature = temperature
        self.max_tokens = max_tokens
        if json_mode is None:
            json_mode = env.get(ENV_JSON_MODE, "1").strip().lower() not in ("0", "false", "no", "off")
        self._json_mode = bool(json_mode)
        self._backoff_max = float(backoff_max)
        #: Exponential backoff with full jitter (tenacity's, the AWS "Full Jitter" scheme).
        self._jitter = wait_random_exponential(multiplier=backoff_initial, max=backoff_max)
        self._usage = LLMUsage()
        self._sync = openai_client
        self._sync_http = http_client
        self._sync_lock = threading.Lock()
        self._sync_guarded = False
        self._async_injected = async_openai_client
        self._async_http = async_http_client
        self._async_by_loop: dict[int, tuple[asyncio.AbstractEventLoop, Any]] = {}
        self._async_lock = threading.Lock()

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_env(cls, **kwargs: Any) -> LLMClient | None:
        """A client configured from the environment, or None when no LLM is configured
        (neither ``OPENAI_API_KEY`` nor ``OPENAI_BASE_URL`` set): the offline default."""
        if not (os.environ.get(ENV_API_KEY) or os.environ.get(ENV_BASE_URL)):
            return None
        return cls(**kwargs)

    def __repr__(self) -> str:
        return f"LLMClient(model={self.model!r}, base_url={self.base_url!r})"

    @property
    def usage(self) -> dict[str, float]:
        """Totals over every call so far: calls, prompt/completion tokens, seconds, retries,
        failures (plus json_mode_fallbacks, parse_failures)."""
        return self._usage.as_dict()

    @property
    def json_mode(self) -> bool:
        """Whether ``response_format`` is still being sent (False once a server rejected it)."""
        return self._json_mode

    def _client_kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {"api_key": self._api_key, "timeout": self.timeout, "max_retries": 0}
        if self.base_url:
            kw["base_url"] = self.base_url
        return kw

    def _sync_client(self) -> Any:
        with self._sync_lock:
            if self._sync is None:
                import openai

                kw = self._client_kwargs()
                if self._sync_http is not None:
                    kw["http_client"] = self._sync_http
                self._sync = openai.OpenAI(**kw)
            if not self._sync_guarded:
                guard_http_client(self._sync)
                self._sync_guarded = True
            return self._sync

    def _async_client(self) -> Any:
        if self._async_injected is not None:
            return guard_http_client(self._async_injected)
        loop = asyncio.get_running_loop()
        with self._async_lock:
            # Drop clients of closed loops (their pools are unusable) and reuse this loop's.
            for key, (lp, _) in list(self._async_by_loop.items()):
                if lp.is_closed():
                    del self._async_by_loop[key]
            hit = self._async_by_loop.get(id(loop))
            if hit is not None and hit[0] is loop:
                return hit[1]
            import openai

            kw = self._client_kwargs()
            if self._async_http is not None:
                kw["http_client"] = self._async_http
            client = guard_http_client(openai.AsyncOpenAI(**kw))
            self._async_by_loop[id(loop)] = (loop, client)
            return client

    # ------------------------------------------------------------------ requests
    def _request(self, messages: Sequence[Message], json_mode: bool, max_tokens: int | None,
                 temperature: float | None) -> dict[str, Any]:
        req: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in messages],
            "temperature": self.temperature if temperature is None else temperature,
        }
        mt = self.max_tokens if max_tokens is None else max_tokens
        if mt is not None:
            req["max_tokens"] = mt
        if json_mode and self._json_mode:
            req["response_format"] = {"type": "json_object"}
        return req

    @staticmethod
    def _plain(req: dict[str, Any], exc: BaseException) -> dict[str, Any] | None:
        """The request without ``response_format`` if the error looks like its rejection."""
        if "response_format" not in req or not _rejects_response_format(exc):
            return None
        return {k: v for k, v in req.items() if k != "response_format"}

    def _json_mode_rejected(self) -> None:
        """Remember (after a successful plain retry) that this server lacks JSON mode."""
        if self._json_mode:
            self._json_mode = False
            self._usage.bump("json_mode_fallbacks")

    def _create_sync(self, req: dict[str, Any]) -> Any:
        client = self._sync_client()
        try:
            return client.chat.completions.create(**req)
        except Exception as exc:
            plain = self._plain(req, exc)
            if plain is None:
                raise
            result = client.chat.completions.create(**plain)
            self._json_mode_rejected()
            return result

    async def _create_async(self, req: dict[str, Any]) -> Any:
        client = self._async_client()
        try:
            return await client.chat.completions.create(**req)
        except Exception as exc:
            plain = self._plain(req, exc)
            if plain is None:
                raise
            result = await client.chat.completions.create(**plain)
            self._json_mode_rejected()
            return result

    def _retry_kwargs(self, counter: list[int], deadline: float) -> dict[str, Any]:
        def before_sleep(_: RetryCallState) -> None:
            counter[0] += 1

        def wait(state: RetryCallState) -> float:  # never sleep past the deadline
            backoff = max(self._jitter(state), _retry_after(state, self._backoff_max))
            return max(0.0, min(backoff, deadline - time.monotonic()))

        return {
            "retry": retry_if_exception(is_transient),
            "stop": stop_any(stop_after_attempt(self.max_retries + 1), _StopAt(deadline)),
            "wait": wait,
            "before_sleep": before_sleep,
            "reraise": True,
        }

    def _finish(self, completion: Any, started: float, retries: int, parse: bool) -> LLMResponse:
        elapsed = time.perf_counter() - started
        if not hasattr(completion, "choices"):  # an HTML page or plain text, not the API
            self._usage.record(seconds=elapsed, retries=retries, failed=True)
            snippet = " ".join(str(completion)[:120].split())
            raise LLMError(f"LLM server at {self.base_url or 'api.openai.com'} replied with something that is not "
                           f"a chat completion (an HTML page? check the base URL): {snippet!r}")
        try:
            pt, ct, text, finish = self._read(completion)
        except LLMError:
            self._usage.record(seconds=elapsed, retries=retries, failed=True)
            raise
        resp = LLMResponse(text=text, prompt_tokens=pt, completion_tokens=ct, latency_s=elapsed,
                           retries=retries, model=str(getattr(completion, "model", "") or self.model),
                           finish_reason=finish)
        try:
            if not past_thinking(text).strip():
                # Nothing to read: an answer of "" is no claim that the memory lacks the fact.
                why = {"length": "cut off at max_tokens", "content_filter": "withheld by a content filter"}.get(
                    str(finish), "empty")
                raise LLMError(f"LLM ({self.model}) reply is {why}"
                               + (" while reasoning (<think>)" if text.strip() else ""))
            if parse:
                try:
                    resp.data = parse_json(text)
                except LLMError as exc:
                    self._usage.bump("parse_failures")
                    hint = " (reply cut off at max_tokens)" if finish == "length" else ""
                    raise LLMError(f"{exc}{hint}") from exc
                if finish == "length":  # what parsed is a part of what the model meant to say
                    self._usage.bump("parse_failures")
                    raise LLMError(f"LLM ({self.model}) reply was cut off at max_tokens")
        except LLMError:
            self._usage.record(prompt_tokens=pt, completion_tokens=ct, seconds=elapsed, retries=retries,
                               failed=True)
            raise
        self._usage.record(prompt_tokens=pt, completion_tokens=ct, seconds=elapsed, retries=retries)
        return resp

    def _read(self, completion: Any) -> tuple[int, int, str, str | None]:
        """(prompt tokens, completion tokens, text, finish reason) of a chat completion;
        :class:`LLMError` for one that does not have the shape of the API's (a proxy's
        ``"choices": [null]``, a number for the content, token counts that are not numbers)."""
        try:
            usage = getattr(completion, "usage", None)
            pt = int(getattr(usage, "prompt_tokens", 0) or 0)
            ct = int(getattr(usage, "completion_tokens", 0) or 0)
            choices = getattr(completion, "choices", None) or []
            if not choices:
                raise LLMError(f"LLM ({self.model}) returned no choices")
            choice = choices[0]
            content = getattr(choice.message, "content", None)
            finish = getattr(choice, "finish_reason", None)
        except LLMError:
            raise
        except Exception as exc:
            raise LLMError(f"LLM ({self.model}) replied with a malformed chat completion: "
                           f"{type(exc).__name__}: {exc}") from exc
        if content is not None and not isinstance(content, str):
            raise LLMError(f"LLM ({self.model}) reply content is a {type(content).__name__}, not text")
        return pt, ct, replace_surrogates(content or ""), None if finish is None else str(finish)

    def _fail(self, exc: BaseException, started: float, retries: int, deadline: float) -> LLMError:
        self._usage.record(seconds=time.perf_counter() - started, retries=retries, failed=True)
        where = self.base_url or "api.openai.com"
        if isinstance(exc, TimeoutError | _DeadlinePassed) or time.monotonic() >= deadline:
            return LLMTimeoutError(f"LLM call to {where} (model {self.model}) passed its total deadline of "
                            f"{self.timeout:g} s after {retries + 1} attempt(s): {_describe(exc)}")
        cause = exc.__cause__ or exc.__context__
        if isinstance(exc, _ReplyTooLarge) or isinstance(cause, _ReplyTooLarge):
            why = str(exc if isinstance(exc, _ReplyTooLarge) else cause)
            if "compressed" in why:
                return LLMError(f"LLM reply from {where} (model {self.model}) was {why}; refused")
            return LLMError(f"LLM reply from {where} (model {self.model}) is too large "
                            f"(over {MAX_REPLY_BYTES} bytes); refused")
        return LLMError(
            f"LLM call to {where} (model {self.model}) failed after {retries + 1} attempt(s): {_describe(exc)}"
        )

    # ------------------------------------------------------------------ public calls
    def chat(self, messages: Sequence[Message], *, json_mode: bool = False, max_tokens: int | None = None,
             temperature: float | None = None, parse: bool = False) -> LLMResponse:
        """One chat completion (with retries). ``parse=True`` fills ``response.data`` with
        the parsed JSON or raises :class:`LLMError`."""
        req = self._request(messages, json_mode, max_tokens, temperature)
        counter = [0]
        started = time.perf_counter()
        deadline = time.monotonic() + self.timeout
        token = _DEADLINE.set(deadline)
        try:
            completion = Retrying(**self._retry_kwargs(counter, deadline))(self._create_sync, req)
        except Exception as exc:
            raise self._fail(exc, started, counter[0], deadline) from exc
        finally:
            _DEADLINE.reset(token)
        return self._finish(completion, started, counter[0], parse)

    async def achat(self, messages: Sequence[Message], *, json_mode: bool = False,
                    max_tokens: int | None = None, temperature: float | None = None,
                    parse: bool = False) -> LLMResponse:
        """Async :meth:`chat`."""
        req = self._request(messages, json_mode, max_tokens, temperature)
        counter = [0]
        started = time.perf_counter()
        deadline = time.monotonic() + self.timeout
        token = _DEADLINE.set(deadline)
        try:
            async with asyncio.timeout(self.timeout):
                completion: Any = await AsyncRetrying(**self._retry_kwargs(counter, deadline))(self._create_async, req)
        except Exception as exc:
            raise self._fail(exc, started, counter[0], deadline) from exc
        finally:
            _DEADLINE.reset(token)
        return self._finish(completion, started, counter[0], parse)

    def complete_json(self, messages: Sequence[Message], *, max_tokens: int | None = None,
                      temperature: float | None = None) -> LLMResponse:
        """A JSON-mode call returning the full :class:`LLMResponse` (data + cost)."""
        return self.chat(messages, json_mode=True, max_tokens=max_tokens, temperature=temperature, parse=True)

    async def acomplete_json(self, messages: Sequence[Message], *, max_tokens: int | None = None,
                             temperature: float | None = None) -> LLMResponse:
        return await self.achat(messages, json_mode=True, max_tokens=max_tokens, temperature=temperature,
                                parse=True)

    def close(self) -> None:
        """Close the sync SDK client if this object created it."""
        if self._sync is not None and self._sync_http is None:
            with contextlib.suppress(Exception):  # best effort
                self._sync.close()


def system_user(system: str, user: str) -> list[dict[str, str]]:
    """The two-message prompt used everywhere: stable system text first (prompt caching)."""
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]
