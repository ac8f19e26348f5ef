"""The loopback Messages API server, exercised with the real anthropic SDK."""

from __future__ import annotations

import json
import time

import anthropic
import httpx
import pytest

from hermes_core.testing import Failure, MessagesAPIServer, Reply

MODEL = "claude-test"
USER = [{"role": "user", "content": "hello"}]


def client(api: MessagesAPIServer, **kw: object) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key="test-key", base_url=api.base_url, max_retries=0, **kw)


def test_text_answer_and_request_recording() -> None:
    with MessagesAPIServer(["Hi there!"]) as api:
        msg = client(api).messages.create(model=MODEL, max_tokens=50, messages=USER, system="be brief")
        assert api.base_url.startswith("http://127.0.0.1:")
    assert msg.content[0].type == "text" and msg.content[0].text == "Hi there!"
    assert msg.stop_reason == "end_turn" and msg.usage.input_tokens > 0
    (req,) = api.requests
    assert req.path == "/v1/messages" and req.status == 200
    assert req.body == {"model": MODEL, "max_tokens": 50, "messages": USER, "system": "be brief"}
    # SDK versions differ in where the key goes (x-api-key or a bearer token)
    assert "test-key" in (req.headers.get("x-api-key", "") + req.headers.get("authorization", ""))


def test_tool_use_answer() -> None:
    reply = Reply(text="Let me look.", tool_calls=[{"name": "read_file", "input": {"path": "a.py"}}])
    with MessagesAPIServer([reply]) as api:
        msg = client(api).messages.create(model=MODEL, max_tokens=50, messages=USER)
    assert [b.type for b in msg.content] == ["text", "tool_use"]
    assert msg.content[1].name == "read_file" and msg.content[1].input == {"path": "a.py"}
    assert msg.stop_reason == "tool_use"


def test_streaming_text_and_tool_use() -> None:
    text = "streamed " * 10
    reply = Reply(text=text, tool_calls=[{"name": "run", "input": {"cmd": "ls -la"}}], chunk_size=7)
    with MessagesAPIServer([reply]) as api:
        deltas = []
        with client(api).messages.stream(model=MODEL, max_tokens=50, messages=USER) as stream:
            for delta in stream.text_stream:
                deltas.append(delta)
            final = stream.get_final_message()
    assert len(deltas) > 5 and "".join(deltas) == text
    assert final.content[0].text == text
    assert final.content[1].type == "tool_use" and final.content[1].input == {"cmd": "ls -la"}
    assert api.requests[0].body is not None and api.requests[0].body["stream"] is True


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (429, anthropic.RateLimitError),
        (500, anthropic.InternalServerError),
        (529, anthropic.APIStatusError),
        (401, anthropic.AuthenticationError),
    ],
)
def test_failures_reach_the_sdk_as_its_exceptions(status: int, error: type[Exception]) -> None:
    with MessagesAPIServer([Failure(status, "nope")]) as api, pytest.raises(error) as info:
        client(api).messages.create(model=MODEL, max_tokens=5, messages=USER)
    assert getattr(info.value, "status_code", None) == status
    assert "nope" in str(info.value)
    assert api.requests[0].status == status


def test_sdk_retries_honour_retry_after_ms() -> None:
    with MessagesAPIServer([Failure(429), Failure(503), "finally"]) as api:
        started = time.perf_counter()
        sdk = anthropic.Anthropic(api_key="k", base_url=api.base_url, max_retries=2)
        msg = sdk.messages.create(model=MODEL, max_tokens=5, messages=USER)
    assert msg.content[0].text == "finally"
    assert [r.status for r in api.requests] == [429, 503, 200]
    assert time.perf_counter() - started < 2  # retry-after-ms: 1, not the SDK's 0.5 s back-off


def test_slow_answer_times_out_in_the_client() -> None:
    with MessagesAPIServer([Reply(text="late", delay=2.0)]) as api:
        started = time.perf_counter()
        with pytest.raises(anthropic.APITimeoutError):
            client(api, timeout=0.3).messages.create(model=MODEL, max_tokens=5, messages=USER)
        assert time.perf_counter() - started < 1.5


def test_empty_answer_has_no_content() -> None:
    with MessagesAPIServer([Reply()]) as api:
        msg = client(api).messages.create(model=MODEL, max_tokens=5, messages=USER)
    assert msg.content == []


def test_callable_script_sees_each_body() -> None:
    def answer(body: dict) -> str:
        return f"you said {body['messages'][-1]['content']}"

    with MessagesAPIServer(answer) as api:
        msg = client(api).messages.create(model=MODEL, max_tokens=5, messages=USER)
    assert msg.content[0].text == "you said hello"


def test_exhausted_script_answers_a_clear_500_and_default_is_used() -> None:
    with MessagesAPIServer(["one"]) as api:
        sdk = client(api)
        sdk.messages.create(model=MODEL, max_tokens=5, messages=USER)
        with pytest.raises(anthropic.InternalServerError, match="script is exhausted"):
            sdk.messages.create(model=MODEL, max_tokens=5, messages=USER)
    with MessagesAPIServer(default="always") as api:
        for _ in range(3):
            msg = client(api).messages.create(model=MODEL, max_tokens=5, messages=USER)
            assert msg.content[0].text == "always"


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"model": MODEL, "messages": USER}, "max_tokens"),
        ({"model": MODEL, "max_tokens": 5, "messages": []}, "at least one message"),
        (
            {
                "model": MODEL,
                "max_tokens": 5,
                "messages": [
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x", "content": "r"}]}
                ],
            },
            "tool_use_id",
        ),
        (
            {
                "model": MODEL,
                "max_tokens": 5,
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": str(i), "cache_control": {"type": "ephemeral"}}
                            for i in range(5)
                        ],
                    }
                ],
            },
            "maximum of 4 blocks",
        ),
    ],
)
def test_validation_rejects_what_the_real_api_rejects(body: dict, problem: str) -> None:
    with MessagesAPIServer(default="ok") as api:
        response = httpx.post(f"{api.base_url}/v1/messages", content=json.dumps(body))
    assert response.status_code == 400
    assert problem in response.json()["error"]["message"]
    assert response.json()["error"]["type"] == "invalid_request_error"


def test_stop_cuts_a_pending_slow_answer_short() -> None:
    api = MessagesAPIServer([Reply(text="never", delay=30)]).start()
    import threading

    errors: list[BaseException] = []

    def call() -> None:
        try:
            client(api, timeout=10).messages.create(model=MODEL, max_tokens=5, messages=USER)
        except BaseException as exc:  # the connection is dropped
            errors.append(exc)

    worker = threading.Thread(target=call)
    worker.start()
    time.sleep(0.2)
    started = time.perf_counter()
    api.stop()
    worker.join(timeout=10)
    assert time.perf_counter() - started < 5
    assert errors and isinstance(errors[0], anthropic.APIError)


def test_a_burst_of_new_connections_is_answered_not_reset() -> None:
    """Many clients connecting at once (two serve nodes filling their pools) all get answers:
    with the standard library's listen backlog of 5 the kernel reset some of them ("Connection
    reset by peer", which the SDK reports as a connection error)."""
    import threading

    errors: list[str] = []
    go = threading.Event()
    with MessagesAPIServer(lambda body: Reply("hi")) as api:
        def ask() -> None:
            go.wait(30)
            for _ in range(4):  # a new connection each time, as a client filling its pool
                try:
                    with httpx.Client(timeout=60) as c:
                        r = c.post(f"{api.base_url}/v1/messages", headers={"x-api-key": "k"},
                                   json={"model": MODEL, "max_tokens": 5, "messages": USER})
                    if r.status_code != 200:
                        errors.append(f"{r.status_code} {r.text[:80]}")
                except httpx.TransportError as exc:
                    errors.append(repr(exc))

        threads = [threading.Thread(target=ask) for _ in range(40)]
        for t in threads:
            t.start()
        go.set()
        for t in threads:
            t.join(120)
    assert errors == [] and len(api.requests) == 160


@pytest.mark.parametrize(("body", "says"), [
    (b"[1, 2]", "the body is a JSON list; send a JSON object"),
    (b'"hello"', "the body is a JSON str; send a JSON object"),
    (b"{not json", "the body is not valid JSON; send a JSON object"),
])
def test_count_tokens_answers_a_body_that_is_not_an_object_with_400(body: bytes, says: str) -> None:
    with MessagesAPIServer([]) as api:
        response = httpx.post(f"{api.base_url}/v1/messages/count_tokens", content=body,
                              headers={"content-type": "application/json"}, timeout=5)
        good = httpx.post(f"{api.base_url}/v1/messages/count_tokens", timeout=5,
                          json={"model": MODEL, "messages": USER})
    assert response.status_code == 400 and says in response.json()["error"]["message"]
    assert good.status_code == 200 and good.json()["input_tokens"] > 0
