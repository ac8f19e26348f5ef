"""The inspector's REST API and page (FastAPI): a thin HTTP layer over :class:`.service.Inspector`.

Every ``/api/*`` route needs a credential (:mod:`.auth`): ``Authorization: Bearer <token>`` or
the session cookie a one-time link set; without one the answer is 401. A user-scoped caller that
names another user gets 403. A request carrying an ``Origin`` other than the server's own is
refused (403): another web page cannot drive the API with the cookie. The OpenAPI document is
``/api/openapi.json``; ``/`` is the page (which uses this API only).

FastAPI reads a request's body before any dependency runs, so :class:`_BodyGate` answers a
request that carries a body to ``/api/*`` (401, 403) before its body is read, and refuses a body
over :data:`MAX_BODY_BYTES` (413: declared, unread; or counted as it arrives).
"""


from collections.abc import Awaitable, Callable, MutableMapping
from importlib import resources
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from pydantic import BaseModel, Field

from hermes_core.errors import HermesCoreError
from hermes_core.users import UserKeyError, check_user_key

from .auth import COOKIE, SESSION_SECONDS, Access, Gate
from .service import Conflict, Inspector, NotFound, Unavailable

__all__ = ["MAX_BODY_BYTES", "build_app", "page_html"]

Target = Literal["memory", "user"]
#: the largest request body read (the longest valid one, a 100,000-character recall query, is
#: at most 600,000 bytes even with every character escaped); a larger one is answered 413
MAX_BODY_BYTES = 1024 * 1024
#: methods whose requests may carry a body: checked for a credential before it is read
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class EntryAdd(BaseModel):
    content: str = Field(min_length=1, max_length=20_000)
    expected_version: int | None = None


class EntryReplace(BaseModel):
    old_text: str = Field(min_length=1, max_length=20_000)
    content: str = Field(min_length=1, max_length=20_000)
    expected_version: int | None = None


class EntryRemove(BaseModel):
    old_text: str = Field(min_length=1, max_length=20_000)
    expected_version: int | None = None


class Rollback(BaseModel):
    version: int
    expected_version: int | None = None


class Pin(BaseModel):
    target: Target
    text: str = Field(min_length=1, max_length=20_000)


class Recall(BaseModel):
    query: str = Field(max_length=100_000)


class Forget(BaseModel):
    subject: str = Field(max_length=1000)
    dry_run: bool = True
    confirm: bool = False
    force: bool = False


def _too_large(size: str) -> HTTPException:
    return HTTPException(413, detail=f"the request body is {size}; the inspector reads at most "
                         f"{MAX_BODY_BYTES} bytes (a memory entry or a query is far smaller)",
                         headers={"Connection": "close"})


class _BodyGate:
    """ASGI middleware: credential and origin before a body is read, and the body's size cap."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]],
                 check: Callable[[Request], Access]) -> None:
        self.app = app
        self.check = check

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        try:
            if scope["method"] in _BODY_METHODS and scope["path"].startswith("/api/"):
                self.check(request)
            declared = request.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
                raise _too_large(f"{declared} bytes")
        except HTTPException as refused:
            headers = {**(refused.headers or {}), "Connection": "close"}
            answer = JSONResponse({"detail": refused.detail}, refused.status_code, headers)
            await answer(scope, receive, send)
            return
        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > MAX_BODY_BYTES:  # FastAPI answers an HTTPException raised here
                raise _too_large(f"over {MAX_BODY_BYTES} bytes")
            return message

        await self.app(scope, counted, send)


def page_html() -> str:
    """The page: one self-contained file (HTML, CSS, JS) shipped beside this module."""
    return resources.files(__package__).joinpath("page.html").read_text(encoding="utf-8")


def build_app(inspector: Inspector, gate: Gate) -> FastAPI:
    app = FastAPI(title="hermes-core inspect", version="1",
                  description="What the agent remembers: memory, history, sessions, recall.",
                  openapi_url="/api/openapi.json", docs_url=None, redoc_url=None)

    @app.exception_handler(HermesCoreError)
    async def refused(request: Request, exc: HermesCoreError) -> JSONResponse:
        status = 400
        if isinstance(exc, NotFound) or type(exc).__name__ == "NoMatch":
            status = 404
        elif isinstance(exc, Conflict):
            status = 409
        elif isinstance(exc, Unavailable):
            status = 503
        return JSONResponse({"detail": getattr(exc, "message", None) or str(exc)}, status)

    def caller(request: Request) -> Access:
        """The caller's scope; raises HTTPException 403 (a foreign Origin) or 401."""
        origin = request.headers.get("origin")
        if origin is not None and origin != f"{request.url.scheme}://{request.headers.get('host')}":
            raise HTTPException(403, detail=f"requests from origin {origin!r} are refused: the "
                                "inspector answers its own page only")
        access = gate.check(request.headers.get("authorization"), request.cookies.get(COOKIE))
        if access is None:
            raise HTTPException(401, detail="a credential is required: 'Authorization: Bearer "
                                "<token>' (the home's mcp-token, $HERMES_CORE_MCP_TOKEN, or a "
                                "token from 'hermes-core inspect token --user KEY'), or open the "
                                "one-time link 'hermes-core inspect' prints",
                                headers={"WWW-Authenticate": "Bearer"})
        return access

    def user_of(access: Annotated[Access, Depends(caller)],
                user: Annotated[str | None, Query(description="a user key (memory.scope: user); "
                                                 "absent: the shared memory")] = None
                ) -> str | None:
        if user is not None:
            try:
                user = check_user_key(user)
            except UserKeyError as exc:
                raise HTTPException(400, detail=str(exc)) from None
        if access.user is not None:
            if user is not None and user != access.user:
                raise HTTPException(403, detail=f"this credential sees user {access.user!r} only")
            return access.user
        return user

    User = Annotated[str | None, Depends(user_of)]

    def searcher_of(access: Annotated[Access, Depends(caller)], user: User) -> str | None:
        if access.user is not None and not inspector.per_user:
            raise HTTPException(403, detail="this home's memory is shared by every user "
                                "(memory.scope: global), so search and recall reach every "
                                "user's sessions: a user-scoped credential may use them with "
                                "memory.scope: user in config.yaml; else use the home's token")
        return user

    #: search and recall: not per user unless memory.scope is user
    Searcher = Annotated[str | None, Depends(searcher_of)]
    app.add_middleware(_BodyGate, check=caller)

    @app.get("/health", include_in_schema=False)
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/", include_in_schema=False)
    def page() -> HTMLResponse:
        return HTMLResponse(page_html(), headers={
            "Content-Security-Policy": "default-src 'none'; script-src 'unsafe-inline'; "
            "style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; "
            "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
            "Cache-Control": "no-store"})

    @app.get("/login", include_in_schema=False)
    def login(code: str = "") -> Response:
        cookie = gate.redeem(code)
        if cookie is None:
            return HTMLResponse("<p>This link was already used or has expired. Run "
                                "<code>hermes-core inspect</code> again for a new one.</p>", 401)
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(COOKIE, cookie, max_age=int(SESSION_SECONDS), httponly=True,
                            samesite="strict", path="/")
        return response

    @app.get("/api/whoami", tags=["access"])
    def whoami(access: Annotated[Access, Depends(caller)]) -> dict[str, Any]:
        """The caller's scope: a user key, or null for the whole home."""
        return {"user": access.user,
                "memory": inspector.memory is not None, "sessions": inspector.sessions is not None}

    # ------------------------------------------------------------------------- memory

    @app.get("/api/memory", tags=["memory"])
    def memory(user: User) -> dict[str, Any]:
        """MEMORY.md and USER.md as entries, with their usage against the limits."""
        return inspector.memory_state(user)

    @app.post("/api/memory/{target}/add", tags=["memory"])
    def add(target: Target, body: EntryAdd, user: User) -> dict[str, Any]:
        """Add one entry (409 when expected_version is not the newest version)."""
        return inspector.edit(user, "add", target, content=body.content,
                              expected_version=body.expected_version)

    @app.post("/api/memory/{target}/replace", tags=["memory"])
    def replace(target: Target, body: EntryReplace, user: User) -> dict[str, Any]:
        """Replace the one entry containing old_text."""
        return inspector.edit(user, "replace", target, content=body.content,
                              old_text=body.old_text, expected_version=body.expected_version)

    @app.post("/api/memory/{target}/remove", tags=["memory"])
    def remove(target: Target, body: EntryRemove, user: User) -> dict[str, Any]:
        """Remove the one entry containing old_text."""
        return inspector.edit(user, "remove", target, old_text=body.old_text,
                              expected_version=body.expected_version)

    @app.get("/api/memory/history", tags=["memory"])
    def history(user: User) -> list[dict[str, Any]]:
        """Every recorded version, oldest first, with its origin, session and changes."""
        return inspector.history(user)

    @app.get("/api/memory/diff", tags=["memory"])
    def diff(version: int, user: User, other: int | None = None) -> list[dict[str, Any]]:
        """What a version changed, or (with other) how the stores differ between two."""
        return inspector.diff(user, version, other)

    @app.post("/api/memory/rollback", tags=["memory"])
    def rollback(body: Rollback, user: User) -> dict[str, Any]:
        """Put both stores back as they were after a version (itself a new version)."""
        return inspector.rollback(user, body.version, body.expected_version)

    @app.post("/api/memory/pin", tags=["memory"])
    def pin(body: Pin, user: User) -> dict[str, Any]:
        """Pin the one entry containing text (the curator never drops a pinned entry)."""
        return inspector.pin(user, body.target, body.text, True)

    @app.post("/api/memory/unpin", tags=["memory"])
    def unpin(body: Pin, user: User) -> dict[str, Any]:
        return inspector.pin(user, body.target, body.text, False)

    # ------------------------------------------------------------------------ sessions

    @app.get("/api/sessions", tags=["sessions"])
    def sessions(user: User, limit: Annotated[int, Query(ge=1, le=500)] = 50,
                 offset: Annotated[int, Query(ge=0)] = 0) -> list[dict[str, Any]]:
        """Sessions, newest first, each with its parent (compaction, delegation)."""
        return inspector.list_sessions(user, limit, offset)

    @app.get("/api/facts", tags=["sessions"])
    def facts(user: User, limit: Annotated[int, Query(ge=1, le=1000)] = 100
              ) -> list[dict[str, Any]]:
        """Facts derived from settled turns (session_archive.derive), newest first."""
        return inspector.list_facts(user, limit)

    @app.get("/api/sessions/{session_id}", tags=["sessions"])
    def session(session_id: str, user: User, offset: Annotated[int, Query(ge=0)] = 0,
                limit: Annotated[int, Query(ge=1, le=1000)] = 200) -> dict[str, Any]:
        """One session: its record, children, lineage and a page of its messages."""
        return inspector.show_session(user, session_id, offset, limit)

    @app.get("/api/search", tags=["sessions"])
    def search(q: Annotated[str, Query(max_length=100_000)], user: Searcher) -> dict[str, Any]:
        """The session_search tool's hybrid search; each hit says found_by (words, meaning,
        both) when meaning took part."""
        return inspector.search(user, q)

    @app.post("/api/recall", tags=["recall"])
    def recall(body: Recall, user: Searcher) -> dict[str, Any]:
        """What each active provider's prefetch returns for a message, timed, and the fenced
        block the model would see."""
        return inspector.recall(user, body.query)

    # ------------------------------------------------------------------ state, forget

    @app.get("/api/providers", tags=["state"])
    def providers(access: Annotated[Access, Depends(caller)]) -> dict[str, Any]:
        """Loaded plugins, active instances, hook problems since start."""
        return inspector.providers()

    @app.get("/api/doctor", tags=["state"])
    def doctor(access: Annotated[Access, Depends(caller)]) -> list[dict[str, Any]]:
        """doctor's checks."""
        if access.user is not None:
            raise HTTPException(403, detail="doctor's checks describe the whole home: use the "
                                "home's token")
        return inspector.doctor()

    def home_only(access: Annotated[Access, Depends(caller)]) -> Access:
        if access.user is not None:
            raise HTTPException(403, detail="eval reports belong to the whole home: use the "
                                "home's token")
        return access

    @app.get("/api/eval", tags=["eval"])
    def eval_runs(access: Annotated[Access, Depends(home_only)]) -> list[dict[str, Any]]:
        """The reports of 'hermes-core eval --out' in the home's eval/ folder, newest first
        (a file that is not a report is listed with an error)."""
        return inspector.eval_runs()

    @app.get("/api/eval/{name}", tags=["eval"])
    def eval_run(name: str, access: Annotated[Access, Depends(home_only)]) -> dict[str, Any]:
        """One report: recall per question type and k, tokens per question."""
        return inspector.eval_run(name)

    @app.post("/api/forget", tags=["forget"])
    def forget(body: Forget, user: User) -> dict[str, Any]:
        """forget's preview (dry_run, the default), or with confirm the deletion."""
        return inspector.forget(user, body.subject, dry_run=body.dry_run and not body.confirm,
                                confirm=body.confirm, force=body.force)

    return app
