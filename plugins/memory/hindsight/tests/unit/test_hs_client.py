"""The HTTP client: request shapes, headers, and how each failure is classified."""

from __future__ import annotations

import httpx
import pytest
from hermes_core_hindsight import (
    HindsightClient,
    HindsightNoLLM,
    HindsightRejected,
    HindsightUnavailable,
)
from hermes_core_hindsight.client import version_tuple


def client_for(handler, **kw) -> HindsightClient:
    return HindsightClient("http://127.0.0.1:9", transport=httpx.MockTransport(handler), **kw)


def test_bearer_header_and_version(fake):
    client = client_for(fake, api_key="s3cret")
    info = client.version()
    assert info.api_version == "1.1.0" and info.observations is False and info.supports_append
    assert fake.requests[0][3]["authorization"] == "Bearer s3cret"


def test_no_key_sends_no_authorization(fake):
    client_for(fake).health()
    assert "authorization" not in fake.requests[0][3]


def test_recall_request_shape(fake):
    client = client_for(fake)
    client.retain("b1", [{"content": "the deploy runs on Tuesdays"}])
    found = client.recall("b1", "when is the deploy", types=["world", "experience"], budget="low",
                          max_tokens=512, tags=["session:x"])
    assert [m.text for m in found] == ["the deploy runs on Tuesdays"]
    body = fake.calls("/recall")[0]
    assert body == {"query": "when is the deploy", "budget": "low", "max_tokens": 512,
                    "types": ["world", "experience"], "tags": ["session:x"], "tags_match": "any"}


def test_recall_of_a_query_without_words_asks_nothing(fake):
    assert client_for(fake).recall("b1", "🚀 — !!") == []
    assert fake.calls("/recall") == []


def test_connection_refused_is_unavailable():
    def down(request):
        raise httpx.ConnectError("refused", request=request)

    with pytest.raises(HindsightUnavailable, match=r"cannot reach Hindsight at http://127\.0\.0\.1:9"):
        client_for(down).recall("b", "anything")


def test_timeout_is_unavailable_and_names_the_limit():
    def slow(request):
        raise httpx.ReadTimeout("timed out", request=request)

    with pytest.raises(HindsightUnavailable, match=r"within 0.5 s"):
        client_for(slow).recall("b", "anything", timeout=0.5)


@pytest.mark.parametrize("status", [500, 503, 429])
def test_server_errors_are_unavailable(status):
    with pytest.raises(HindsightUnavailable, match=f"HTTP {status}"):
        client_for(lambda r: httpx.Response(status, json={"detail": "busy"})).health()


def test_validation_error_is_rejected_with_detail():
    detail = [{"loc": ["body", "query"], "msg": "query must contain at least one word"}]
    client = client_for(lambda r: httpx.Response(422, json={"detail": detail}))
    with pytest.raises(HindsightRejected) as info:
        client.recall("b", "x")
    assert info.value.status == 422 and "body.query: query must contain" in str(info.value)


def test_unauthorised_names_the_environment_variable():
    client = client_for(lambda r: httpx.Response(401, json={"detail": "Invalid API key"}))
    with pytest.raises(HindsightRejected, match="HINDSIGHT_API_KEY"):
        client.version()


def test_reflect_without_llm(fake):
    fake.llm = False
    with pytest.raises(HindsightNoLLM, match="requires an LLM"):
        client_for(fake).reflect("b", "what do I like?")


def test_not_json_is_unavailable():
    client = client_for(lambda r: httpx.Response(200, text="<html>proxy</html>"))
    with pytest.raises(HindsightUnavailable, match="not JSON"):
        client.version()


def test_version_tuple():
    assert version_tuple("1.1.0") == (1, 1, 0)
    assert version_tuple("0.5.0rc1") >= (0, 5, 0) > version_tuple("0.4.9")


def test_recall_from_a_bank_not_created_yet_is_empty():
    client = client_for(lambda r: httpx.Response(404, json={"detail": "Bank 'new' not found"}))
    assert client.recall("new", "anything") == []
