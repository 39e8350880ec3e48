"""LLMClient against a scripted local server: retries, JSON handling, usage, async."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from fake_openai_server import FakeOpenAIServer, fake_client

from ariadnemem_core.errors import LLMError
from ariadnemem_core.llm import DEFAULT_MODEL, PLACEHOLDER_API_KEY, LLMClient, parse_json

MSGS = [{"role": "system", "content": "Reply in JSON."}, {"role": "user", "content": "What is up?"}]


def make_client(server: FakeOpenAIServer, **kw) -> LLMClient:
    kw.setdefault("max_retries", 2)
    kw.setdefault("backoff_max", 0.05)
    return fake_client(server, **kw)


# ---------------------------------------------------------------- parsing
@pytest.mark.parametrize("text, expected", [
    ('{"a": 1}', {"a": 1}),
    ('  \n{"a": [1, 2]}\n', {"a": [1, 2]}),
    ('```json\n{"a": 1}\n```', {"a": 1}),
    ('Sure, here it is:\n```\n{"a": "x"}\n```\nanything else?', {"a": "x"}),
    ('The answer is {"a": "brace } inside", "b": {"c": 2}} hope this helps', {"a": "brace } inside", "b": {"c": 2}}),
    ('prefix {not json} then {"ok": true}', {"ok": True}),
    ('[{"text": "x"}]', [{"text": "x"}]),
    ('{"a": "escaped \\" quote {"}', {"a": 'escaped " quote {'}),
    # a reasoning model's draft is not its answer
    ('<think>first guess {"city": "Porto"}</think>\n{"city": "Lisbon"}', {"city": "Lisbon"}),
    # ... but a whole JSON reply that quotes the tag is the reply
    ('{"entries": [{"text": "I like <think> tags"}]}', {"entries": [{"text": "I like <think> tags"}]}),
    # prose with a stray bracket or quote before the JSON
    ('Sure :-[ here it is:\n{"entries": []}', {"entries": []}),
    ('The user is 6\'2" tall. Output:\n{"entries": [1]}', {"entries": [1]}),
])
def test_parse_json_tolerant(text: str, expected: object) -> None:
    assert parse_json(text) == expected


@pytest.mark.parametrize("text", ["", "   ", "no json here", "{unbalanced", "```json\n{bad}\n```",
                                  '<think>only a draft {"city": "Porto"}'])
def test_parse_json_errors_are_llm_errors(text: str) -> None:
    with pytest.raises(LLMError):
        parse_json(text)


# ---------------------------------------------------------------- configuration
def test_from_env_offline_default(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ARIADNEMEM_LLM_MODEL"):
        monkeypatch.delenv(var, raising=False)
    assert LLMClient.from_env() is None
    with pytest.raises(LLMError, match="no LLM configured"):
        LLMClient()


def test_from_env_base_url_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ARIADNEMEM_LLM_MODEL", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    client = LLMClient.from_env()
    assert client is not None
    assert client._api_key == PLACEHOLDER_API_KEY
    assert client.model == DEFAULT_MODEL == "gpt-4o-mini"
    monkeypatch.setenv("ARIADNEMEM_LLM_MODEL", "my-model")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    client = LLMClient.from_env()
    assert client is not None and client.model == "my-model" and client._api_key == "sk-test"
    assert LLMClient(model="explicit").model == "explicit"


@pytest.mark.parametrize(("var", "value", "message"), [
    ("OPENAI_BASE_URL", "localhost:11434/v1", "must start with http"),
    ("ARIADNEMEM_LLM_TIMEOUT", "nan", "positive, finite"),
    ("ARIADNEMEM_LLM_TIMEOUT", "inf", "positive, finite"),
    ("ARIADNEMEM_LLM_TIMEOUT", "-5", "positive, finite"),
])
def test_a_bad_setting_is_refused_before_any_call(monkeypatch: pytest.MonkeyPatch, var: str, value: str,
                                                  message: str) -> None:
    """Said at once, not as "Connection error" or an OverflowError after an attempt."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv(var, value)
    with pytest.raises(LLMError, match=message):
        LLMClient()


# ---------------------------------------------------------------- calls
def test_good_json_and_usage(server: FakeOpenAIServer) -> None:
    server.answer = "fine"
    client = make_client(server)
    data = client.complete_json(MSGS).data
    assert data["answer"] == "fine"
    assert server.count == 1
    assert server.requests[0]["response_format"] == {"type": "json_object"}
    assert server.requests[0]["temperature"] == 0.0
    u = client.usage
    assert u["calls"] == 1 and u["prompt_tokens"] > 0 and u["completion_tokens"] > 0
    assert u["seconds"] > 0 and u["retries"] == 0 and u["failures"] == 0
    resp = client.complete_json(MSGS)
    assert resp.prompt_tokens > 0 and resp.latency_s > 0 and resp.model == "fake-model"
    assert client.usage["calls"] == 2


@pytest.mark.parametrize("cue", ["fenced", "prose"])
def test_wrapped_json_is_parsed(server: FakeOpenAIServer, cue: str) -> None:
    server.queue(cue)
    server.answer = "wrapped"
    assert make_client(server).complete_json(MSGS).data["answer"] == "wrapped"


def test_invalid_json_raises_and_counts(server: FakeOpenAIServer) -> None:
    server.queue("invalid")
    client = make_client(server)
    with pytest.raises(LLMError, match="not valid JSON"):
        client.complete_json(MSGS)
    assert server.count == 1  # a bad reply is not an HTTP retry: callers decide
    u = client.usage
    assert u["failures"] == 1 and u["parse_failures"] == 1 and u["calls"] == 1


def test_429_then_success_is_retried(server: FakeOpenAIServer) -> None:
    server.queue("429", "429", "good")
    client = make_client(server)
    assert "answer" in client.complete_json(MSGS).data
    assert server.count == 3
    assert client.usage["retries"] == 2 and client.usage["failures"] == 0


def test_timeout_is_the_deadline_of_the_whole_call(server: FakeOpenAIServer) -> None:
    """A slow reply ends the call at ``timeout`` (retries included), with no retry after
    the deadline; the next call gets its own deadline."""
    server.sleep_s = 1.0
    server.queue("timeout", "good")
    client = make_client(server, timeout=0.25)
    t0 = time.perf_counter()
    with pytest.raises(LLMError, match=r"deadline of 0\.25 s"):
        client.complete_json(MSGS)
    assert time.perf_counter() - t0 < 0.9
    assert server.count == 1 and client.usage["failures"] == 1
    assert "answer" in client.complete_json(MSGS).data


def test_500_forever_fails_after_retries(server: FakeOpenAIServer) -> None:
    server.default = "500"
    client = make_client(server, max_retries=2)
    with pytest.raises(LLMError) as info:
        client.complete_json(MSGS)
    assert server.count == 3  # 1 + max_retries
    assert "500" in str(info.value) and "3 attempt" in str(info.value)
    u = client.usage
    assert u["failures"] == 1 and u["retries"] == 2


def test_connection_refused_is_llm_error() -> None:
    client = LLMClient(base_url="http://127.0.0.1:9/v1", max_retries=1, backoff_initial=0.01,
                       backoff_max=0.02, timeout=1.0)
    with pytest.raises(LLMError, match="APIConnectionError"):
        client.complete_json(MSGS)
    assert client.usage["retries"] == 1


def test_400_on_response_format_falls_back_and_remembers(server: FakeOpenAIServer) -> None:
    server.default = "400_rf"
    client = make_client(server)
    assert "answer" in client.complete_json(MSGS).data
    assert server.count == 2
    assert "response_format" in server.requests[0] and "response_format" not in server.requests[1]
    assert client.json_mode is False and client.usage["json_mode_fallbacks"] == 1
    client.complete_json(MSGS)
    assert server.count == 3 and "response_format" not in server.requests[2]


def test_other_400_is_not_swallowed(server: FakeOpenAIServer) -> None:
    server.default = lambda body: (400, {"error": {"message": "context length exceeded"}})
    client = make_client(server)
    with pytest.raises(LLMError, match="400"):
        client.complete_json(MSGS)
    assert server.count == 2  # once with, once without response_format; no transient retries
    assert client.json_mode is True  # the plain retry failed too: JSON mode was not the problem


def test_sync_calls_are_thread_safe(server: FakeOpenAIServer) -> None:
    client = make_client(server)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(5):
                client.complete_json(MSGS)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert client.usage["calls"] == 40 and server.count == 40


def test_async_many_concurrent_calls(server: FakeOpenAIServer) -> None:
    server.queue("429")  # one of them is retried
    client = make_client(server)

    async def main() -> list[object]:
        return [r.data for r in await asyncio.gather(*(client.acomplete_json(MSGS) for _ in range(24)))]

    results = asyncio.run(main())
    assert all(isinstance(r, dict) and "answer" in r for r in results)
    assert client.usage["calls"] == 24 and client.usage["retries"] == 1
    assert server.count == 25
    # a second event loop gets its own async HTTP pool
    assert "answer" in asyncio.run(client.acomplete_json(MSGS)).data


def test_async_errors_are_llm_errors(server: FakeOpenAIServer) -> None:
    server.default = "500"
    client = make_client(server, max_retries=1)
    with pytest.raises(LLMError):
        asyncio.run(client.acomplete_json(MSGS))
    assert server.count == 2


def test_injected_http_client_and_sdk_client(server: FakeOpenAIServer) -> None:
    import openai

    try:  # openai>=3 ships its own httpx fork; older SDKs take httpx itself
        import httpx2 as httpx_mod  # type: ignore[import-not-found]
    except ImportError:  # pragma: no cover
        import httpx as httpx_mod

    seen: list[str] = []
    http = httpx_mod.Client(event_hooks={"request": [lambda req: seen.append(str(req.url))]})
    client = make_client(server, http_client=http)
    assert "answer" in client.complete_json(MSGS).data
    assert seen and seen[0].endswith("/chat/completions")

    sdk = openai.OpenAI(base_url=server.url, api_key="x", max_retries=0)
    client = LLMClient(openai_client=sdk, model="fake-model")
    assert "answer" in client.complete_json(MSGS).data


def test_json_mode_can_be_switched_off(server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARIADNEMEM_LLM_JSON_MODE", "0")
    client = make_client(server)
    server.queue("fenced")
    assert client.json_mode is False and "answer" in client.complete_json(MSGS).data
    assert "response_format" not in server.requests[0]
    assert make_client(server, json_mode=True).json_mode is True


def test_retry_after_is_honoured_and_capped() -> None:
    """Tenacity's jitter has no notion of ``Retry-After``: the client waits the longer of
    the two, capped at ``backoff_max``."""
    from types import SimpleNamespace

    from tenacity import RetryCallState

    from ariadnemem_core.llm import _retry_after

    def state(value: str | None) -> RetryCallState:
        exc = Exception("429")
        exc.response = SimpleNamespace(headers={} if value is None else {"retry-after": value})  # type: ignore[attr-defined]
        return SimpleNamespace(outcome=SimpleNamespace(exception=lambda: exc))  # type: ignore[return-value]

    assert _retry_after(state("3"), 20.0) == 3.0
    assert _retry_after(state("300"), 20.0) == 20.0
    assert _retry_after(state("soon"), 20.0) == 0.0
    assert _retry_after(state(None), 20.0) == 0.0


def test_the_guard_reaches_the_installed_http_stack() -> None:
    """``guard_http_client`` rewires private attributes of openai, httpx2 and httpcore2
    (no public hook sees a streaming body or a socket read). On a release that renames
    them the guard would silently do nothing, and a dripping server could hold a call past
    its deadline: this fails instead."""
    import openai

    from ariadnemem_core.llm import _async_guard, _deadline_backend, _sync_guard, guard_http_client

    sdk = guard_http_client(openai.OpenAI(base_url="http://127.0.0.1:9", api_key="x", max_retries=0))
    transport = sdk._client._transport
    assert isinstance(transport, _sync_guard())
    assert isinstance(transport.inner._pool._network_backend, _deadline_backend())
    guard_http_client(sdk)  # guarding twice wraps nothing twice
    assert sdk._client._transport is transport
    assert not isinstance(transport.inner._pool._network_backend.inner, _deadline_backend())

    async_sdk = guard_http_client(openai.AsyncOpenAI(base_url="http://127.0.0.1:9", api_key="x", max_retries=0))
    assert isinstance(async_sdk._client._transport, _async_guard())


@pytest.mark.parametrize("payload, message", [
    ({"choices": [None]}, "malformed chat completion"),
    ({"choices": [{"message": {"role": "assistant", "content": 123}, "finish_reason": "stop"}]}, "not text"),
    ({"choices": [{"message": {"role": "assistant", "content": '{"a": 1}'}, "finish_reason": "stop"}],
      "usage": {"prompt_tokens": "many"}}, "malformed chat completion"),
    ({"choices": [{"message": {"role": "assistant", "content": '{"a": 1}'}, "finish_reason": "length"}]},
     "cut off at max_tokens"),
    ({"choices": [{"message": {"role": "assistant", "content": ""}, "finish_reason": "content_filter"}]},
     "content filter"),
])
def test_a_reply_not_shaped_like_an_answer_is_an_llm_error(server: FakeOpenAIServer, payload: dict,
                                                         message: str) -> None:
    """A proxy's broken completion, a reply cut off or withheld: an LLMError naming it, never
    a Python error from inside the client nor a shorter object taken for the answer."""
    client = make_client(server, max_retries=0)
    server.queue(lambda body: (200, {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                                     **payload}))
    with pytest.raises(LLMError, match=message):
        client.complete_json(MSGS)
    assert client.usage["failures"] == 1
