"""The provider's own client against the wire format: its request bodies pass the honcho-ai SDK's
request models (which forbid unknown keys), and bad answers become clear errors."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from hermes_core_honcho.client import (
    HonchoClient,
    HonchoProtocolError,
    HonchoRejected,
    HonchoUnavailable,
)
from hermes_core_honcho.testing import Fault
from honcho import api_types as sdk

from hermes_core.types import MemoryWrite, Message, Session, SwitchReason, ToolContext

W = r"/v3/workspaces/[^/]+"
REQUEST_MODELS: list[tuple[str, str, type[Any]]] = [
    ("POST", r"^/v3/workspaces$", sdk.WorkspaceCreateParams),
    ("POST", rf"^{W}/peers$", sdk.PeerCreateParams),
    ("POST", rf"^{W}/peers/list$", sdk.PeerListParams),
    ("POST", rf"^{W}/sessions$", sdk.SessionCreateParams),
    ("POST", rf"^{W}/sessions/[^/]+/messages$", sdk.MessageBatchCreateParams),
    ("POST", rf"^{W}/peers/[^/]+/chat$", sdk.DialecticParams),
    ("POST", rf"^{W}/peers/[^/]+/representation$", sdk.PeerRepresentationParams),
    ("POST", rf"^{W}(/peers/[^/]+)?/search$", sdk.MessageSearchParams),
    ("POST", rf"^{W}/conclusions$", sdk.ConclusionBatchCreateParams),
    ("POST", rf"^{W}/conclusions/list$", sdk.ConclusionListParams),
    ("POST", rf"^{W}/conclusions/query$", sdk.ConclusionQueryParams),
]


def test_request_bodies_pass_the_sdk_models(make_provider: Any, honcho_server: Any) -> None:
    provider = make_provider()
    session = Session(id="wire-1")
    provider.on_session_switch(new_session=session, old_session=None, reason=SwitchReason.NEW)
    provider.sync_turn(user_message=Message("user", "I run the data team in Rotterdam."),
                       assistant_message=Message("assistant", "Noted."), session=session)
    provider.on_memory_write(write=MemoryWrite("add", "user", "Runs the data team"))
    provider.on_memory_write(write=MemoryWrite("remove", "user", "", old_text="Runs the data team"))
    provider.queue_prefetch(query="where is the data team?", session=session)
    assert provider.wait_idle(5)
    context = ToolContext(session=session)
    tools = {t.name: t for t in provider.get_tools()}
    tools["honcho_search"].invoke({"query": "data team"}, context)
    tools["honcho_search"].invoke({"query": "data team", "peer": "user"}, context)
    tools["honcho_conclude"].invoke({"list": True, "query": "team"}, context)
    tools["honcho_reasoning"].invoke({"query": "where does the user work?"}, context)
    provider.client.representation("hermes", target="user", search_query="team")
    assert "hermes" in provider.client.peer_ids()
    checked: set[str] = set()
    for request in honcho_server.requests:
        for method, pattern, model in REQUEST_MODELS:
            if request.method == method and re.search(pattern, request.path):
                model.model_validate(request.body or {})
                checked.add(model.__name__)
    assert checked == {model.__name__ for _m, _p, model in REQUEST_MODELS}


def test_answers_are_validated(honcho_server: Any) -> None:
    client = HonchoClient(honcho_server.url, workspace="ws", timeout=2)
    client.ensure_workspace()
    honcho_server.faults.append(Fault("junk", times=1))
    with pytest.raises(HonchoProtocolError, match=r"POST /v3/workspaces/ws/peers .*not a Honcho"):
        client.ensure_peer("alice")
    client.ensure_peer("alice")
    with pytest.raises(HonchoRejected, match="404") as info:
        client.session_context("missing-session")
    assert info.value.status == 404


def test_transport_failures_are_unavailable(honcho_server: Any) -> None:
    client = HonchoClient(honcho_server.url, workspace="ws", timeout=0.2)
    honcho_server.faults.append(Fault("status", status=429, retry_after=3, times=1))
    with pytest.raises(HonchoUnavailable, match="429") as info:
        client.ensure_workspace()
    assert info.value.retry_after == 3
    honcho_server.faults[:] = [Fault("drop", times=1)]
    with pytest.raises(HonchoUnavailable, match="cannot reach"):
        client.ensure_workspace()
    honcho_server.faults.clear()
    honcho_server.latency = 0.5
    with pytest.raises(HonchoUnavailable, match=r"did not answer .* within 0\.2 s"):
        client.ensure_workspace()


def test_not_a_honcho_server() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text="<html>hello</html>")

    client = HonchoClient("http://127.0.0.1:9", workspace="ws",
                          transport=httpx.MockTransport(handler))
    with pytest.raises(HonchoProtocolError, match=r"not JSON.*is honcho\.base_url a Honcho server"):
        client.ensure_workspace()


def test_api_key_is_sent_and_refusal_explained(tmp_path: Any) -> None:
    from hermes_core_honcho.testing import HonchoTestServer

    with HonchoTestServer(tmp_path / "db", api_key="sekret") as server:
        HonchoClient(server.url, workspace="ws", api_key="sekret").ensure_workspace()
        with pytest.raises(HonchoRejected, match=r"refused the API key .*HONCHO_API_KEY"):
            HonchoClient(server.url, workspace="ws", api_key="wrong").ensure_workspace()


@pytest.mark.parametrize(("response", "says"), [
    (httpx.Response(503, json={"detail": "overloaded"}), "overloaded"),
    (httpx.Response(422, json={"detail": [{"loc": ["body", "content"], "msg": "too long"}]}),
     "body.content: too long"),
    # a proxy or another server in front of Honcho: its own JSON error, shown as it came
    (httpx.Response(502, json={"error": "upstream timed out"}), '{"error":"upstream timed out"}'),
    (httpx.Response(500, text="<html>oops</html>"), "<html>oops</html>"),
])
def test_error_detail_shows_what_the_server_said(response: httpx.Response, says: str) -> None:
    from hermes_core_honcho.client import _detail

    assert _detail(response) == says
