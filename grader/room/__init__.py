"""``kvgrade serve``: the live interview room, run on the interviewer's machine.

The candidate edits and runs code in a browser page; the interviewer watches in another,
with the sheet, the hints and the level as it stands. Grading goes through the same engine
and sandbox as ``kvgrade grade``. Parts, each with one job:

- ``store``: the session folder's SQLite file, written as things happen;
- ``session``: the room's rules (who may change what, sizes, one run at a time, the end);
- ``grading``: what runs in the grading process (the engine, the public tests);
- ``views``: what each page may see; ``finish``: notes, the standing level, the reports;
- ``app``: the Starlette routes; ``templates/`` and ``static/``: the two pages.

Starlette and uvicorn are the optional extra ``kvgrade[room]``: nothing here imports them
until a room is served.
"""
from __future__ import annotations

import importlib.util
import socket
import sqlite3
from pathlib import Path

from .session import RoomError

EXTRA = "kvgrade serve needs the room extra: pip install 'kvgrade[room]' (starlette and uvicorn)"


class MissingExtra(RoomError):
    pass


def serve(folder: str | Path, exercise_ids: list[str] | None, minutes: int | None, feedback: str | None,
          host: str, port: int | None, echo=print, trust: bool = False):
    """Open (or resume) the session in ``folder``, print its two links, and serve until stopped. The room runs
    someone else's code: IsolationError at the process level unless ``trust`` (as for batch)."""
    if not all(importlib.util.find_spec(name) for name in ("starlette", "uvicorn")):
        raise MissingExtra(EXTRA)
    import uvicorn

    from ..sandbox import Limits, require_isolation
    level = require_isolation(trust, Limits())

    from .app import create_app
    from .session import Room

    resumed = (Path(folder) / "room.sqlite").is_file()
    try:
        room = Room(Path(folder), exercise_ids, minutes, feedback)
    except (OSError, sqlite3.Error) as exc:
        raise RoomError(f"cannot open the session in {folder}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        sock = _listen(host, port, room.meta.get("port"))
        room.store.set_meta(port=sock.getsockname()[1])
        for line in _banner(room, host, sock.getsockname()[1], resumed, level):
            echo(line)
        config = uvicorn.Config(create_app(room), log_level="warning", access_log=False,
                                timeout_graceful_shutdown=5)

        class Server(uvicorn.Server):
            def handle_exit(self, sig, frame):  # Ctrl-C: open pages' event streams end first
                room.stop_streams()
                super().handle_exit(sig, frame)
        try:
            Server(config).run(sockets=[sock])
        except KeyboardInterrupt:  # uvicorn raises the Ctrl-C again once it has shut down
            pass
        echo(f"stopped; everything is kept in {room.folder}")
    finally:
        room.close()


def _listen(host: str, port: int | None, stored: int | None) -> socket.socket:
    """A listening socket: ``port`` if given; else (or for 0) the session's own port when it is
    free, so a restart serves the same links; else any free port."""
    tries = [port] if port else [p for p in (stored, 0) if p is not None]
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    for i, candidate in enumerate(tries):
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, candidate))
        except OSError as exc:
            sock.close()
            if i == len(tries) - 1:
                raise RoomError(f"cannot listen on {host}:{candidate}: {exc.strerror or exc}") from None
            continue
        sock.listen(64)
        sock.set_inheritable(True)
        return sock
    raise AssertionError("unreachable: tries is never empty")


def _banner(room, host: str, port: int, resumed: bool, level: str) -> list[str]:
    shown = socket.gethostname() if host in ("0.0.0.0", "::") else (f"[{host}]" if ":" in host else host)
    base = f"http://{shown}:{port}"
    meta = room.meta
    return [(f"kvgrade serve: {', '.join(meta['exercises'])} in {room.folder} ({'resumed' if resumed else 'new'} "
             f"session; time box {meta['minutes']} min, feedback {meta['feedback']}; isolation {level}"
             + (": NOT ISOLATED, for code you trust only)" if level == "process" else ")")),
            f"candidate:   {base}/c/{meta['candidate_token']}/",
            f"interviewer: {base}/i/{meta['interviewer_token']}/",
            (f"Send the candidate link only; the interviewer link opens the sheet and the answers. The server "
             f"listens on {host} only. To reach it from the candidate's machine, forward it yourself: an SSH "
             f"tunnel (ssh -N -R 8000:127.0.0.1:{port} you@a-host-they-can-reach, then send that host's "
             f"address with the same path) or your team's own HTTPS proxy. kvgrade never opens a tunnel."),
            "Stop with Ctrl-C; run the same command again to resume with the same links."]
