"""The room's web layer: a Starlette app over one ``session.Room``.

Pages live at ``/c/<token>/`` and ``/i/<token>/``; the API at ``/api/candidate/...`` and
``/api/interviewer/...``. Every API request names its side by token, compared in constant
time: a request that changes anything carries it in the ``X-Kvgrade-Token`` header (never only
in the URL); reads also take ``?token=`` (an EventSource or a download link cannot set
headers). Errors are one JSON line, ``{"error": ...}``; nothing a client sends is echoed as
HTML, and no traceback leaves the server.
"""
from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import jinja2
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from .finish import REPORTS
from .session import CANDIDATE, INTERVIEWER, Room, RoomError

HERE = Path(__file__).resolve().parent
HEADER = "X-Kvgrade-Token"
MAX_BODY_BYTES = 256 << 10  # a request body: a few files of at most 64 KiB, as JSON
KEEP_ALIVE_SECONDS = 15.0  # an idle event stream sends a comment this often, so proxies keep it open
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                               "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; "
                               "frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",  # the links carry tokens
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}
log = logging.getLogger("kvgrade.room")


def create_app(room: Room) -> Starlette:
    pages = jinja2.Environment(loader=jinja2.FileSystemLoader(str(HERE / "templates")), autoescape=True,
                               undefined=jinja2.StrictUndefined)

    def page(role: str, template: str):
        async def show(request: Request):
            if room.role(request.path_params["token"]) != role:
                raise RoomError("no such page: check the link", 404)
            html = pages.get_template(template).render(token=request.path_params["token"])
            return HTMLResponse(html, headers=SECURITY_HEADERS)
        return show

    routes = [
        Route("/c/{token}/", page(CANDIDATE, "candidate.html")),
        Route("/i/{token}/", page(INTERVIEWER, "interviewer.html")),
        Route("/api/candidate/state", _reader(room, CANDIDATE, lambda r: room.candidate_view())),
        Route("/api/interviewer/state", _reader(room, INTERVIEWER, lambda r: room.interviewer_view())),
        Route("/api/candidate/events", _events(room, CANDIDATE)),
        Route("/api/interviewer/events", _events(room, INTERVIEWER)),
        Route("/api/candidate/files", _writer(room, CANDIDATE, lambda b: room.save(
            b.get("exercise"), b.get("name"), b.get("text"))), methods=["PUT"]),
        Route("/api/candidate/runs", _writer(room, CANDIDATE, lambda b: {"run": room.run(
            b.get("exercise"), b.get("kind"), b.get("files"))}), methods=["POST"]),
        Route("/api/interviewer/hints", _writer(room, INTERVIEWER, lambda b: room.send_hint(
            b.get("exercise"), b.get("number"))), methods=["POST"]),
        Route("/api/interviewer/observed", _writer(room, INTERVIEWER, lambda b: room.observe(
            b.get("exercise"), b.get("criterion"), b.get("value"))), methods=["PUT"]),
        Route("/api/interviewer/notes", _writer(room, INTERVIEWER, lambda b: room.note(
            b.get("exercise"), b.get("text"))), methods=["PUT"]),
        Route("/api/interviewer/end", _writer(room, INTERVIEWER, lambda b: room.end()), methods=["POST"]),
        Route("/api/interviewer/reports/{name}", _report(room)),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    handlers = {RoomError: _refused, HTTPException: _http_error, Exception: _internal}
    return Starlette(routes=routes, exception_handlers=handlers)


def _caller(room: Room, request: Request, role: str, write: bool):
    token = request.headers.get(HEADER) or (None if write else request.query_params.get("token"))
    if token is None:
        raise RoomError(f"missing the {HEADER} header" if write else "missing the token", 401)
    if room.role(token) != role:
        raise RoomError(f"this token does not open the {role}'s side", 403)


def _reader(room: Room, role: str, view):
    async def read(request: Request):
        _caller(room, request, role, write=False)
        return JSONResponse(await asyncio.to_thread(view, request), headers=SECURITY_HEADERS)
    return read


def _writer(room: Room, role: str, act):
    async def write(request: Request):
        _caller(room, request, role, write=True)
        body = await _json_body(request)
        done = await asyncio.to_thread(act, body)
        return JSONResponse(done or {"ok": True}, headers=SECURITY_HEADERS)
    return write


async def _json_body(request: Request) -> dict:
    data = b""
    async for chunk in request.stream():
        data += chunk
        if len(data) > MAX_BODY_BYTES:
            raise RoomError(f"the request is over {MAX_BODY_BYTES // 1024} KiB", 413)
    try:
        body = json.loads(data or b"{}")
    except (ValueError, RecursionError):
        raise RoomError("the request body must be JSON") from None
    if not isinstance(body, dict):
        raise RoomError("the request body must be a JSON object")
    return body


def _events(room: Room, role: str):
    async def stream(request: Request):
        _caller(room, request, role, write=False)
        loop, changed = asyncio.get_running_loop(), asyncio.Event()

        def notify():
            try:
                loop.call_soon_threadsafe(changed.set)
            except RuntimeError:  # the loop is gone: the server is stopping
                pass

        async def lines():
            listener = room.listen(role, notify)
            try:
                yield "retry: 1000\n\ndata: change\n\n"
                while True:
                    try:
                        await asyncio.wait_for(changed.wait(), KEEP_ALIVE_SECONDS)
                    except TimeoutError:
                        yield ": still here\n\n"
                        continue
                    changed.clear()
                    if room.closing.is_set() or listener.ended:
                        return
                    yield "data: change\n\n"
            finally:
                room.unlisten(listener)
        return StreamingResponse(lines(), media_type="text/event-stream", headers=SECURITY_HEADERS)
    return stream


def _report(room: Room):
    async def download(request: Request):
        _caller(room, request, INTERVIEWER, write=False)
        name = request.path_params["name"]
        path = room.folder / name
        if name not in REPORTS or not path.is_file():
            raise RoomError("no such report yet: end the interview first", 404)
        kind = {"json": "application/json", "html": "text/html", "toml": "text/plain"}[name.rsplit(".", 1)[1]]
        return FileResponse(path, media_type=f"{kind}; charset=utf-8", headers=SECURITY_HEADERS)
    return download


async def _refused(request: Request, exc: RoomError) -> Response:
    return JSONResponse({"error": str(exc)}, status_code=exc.status, headers=SECURITY_HEADERS)


async def _http_error(request: Request, exc: HTTPException) -> Response:
    words = {404: "no such page or API route", 405: "this route does not take that method"}
    return JSONResponse({"error": words.get(exc.status_code, exc.detail)}, status_code=exc.status_code,
                        headers=SECURITY_HEADERS)


async def _internal(request: Request, exc: Exception) -> Response:
    log.exception("the room failed on %s %s", request.method, request.url.path)
    return JSONResponse({"error": "the room failed on this request; the server's log says why"}, status_code=500,
                        headers=SECURITY_HEADERS)
