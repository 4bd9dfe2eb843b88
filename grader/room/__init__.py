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

import contextlib
import importlib.util
import signal
import socket
import sqlite3
import threading
from datetime import datetime
from pathlib import Path

from .session import RoomError
from .store import FILE

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

    folder = Path(folder)
    resumed = (folder / FILE).is_file()
    if not resumed and not exercise_ids:  # before anything is written: an error leaves no session behind
        raise RoomError(f"{folder} holds no session yet: a new session needs its exercises, -e ID[,ID]")
    made = _missing(folder)  # the folders a new session creates, removed again if it cannot start
    try:
        room = Room(folder, exercise_ids, minutes, feedback)
    except (OSError, sqlite3.Error) as exc:
        _undo(folder, made, resumed)
        raise RoomError(f"cannot open the session in {folder}: {getattr(exc, 'strerror', None) or exc}") from None
    except BaseException:
        _undo(folder, made, resumed)
        raise
    try:
        try:
            sock = _listen(host, port, room.meta.get("port"))
        except BaseException:
            room.close()
            _undo(folder, made, resumed)
            raise
        config = uvicorn.Config(create_app(room), log_level="warning", access_log=False,
                                timeout_graceful_shutdown=5)

        class Server(uvicorn.Server):
            def handle_exit(self, sig, frame):  # Ctrl-C or SIGTERM: open pages' event streams end first
                room.stop_streams()
                super().handle_exit(sig, frame)
        server = Server(config)
        with _terminated_as_abort(server) as terminated:
            try:
                room.store.set_meta(port=sock.getsockname()[1])
                for line in _banner(room, host, sock.getsockname()[1], resumed, level):
                    echo(line)
                server.run(sockets=[sock])
            except KeyboardInterrupt:  # uvicorn raises the signal again once it has shut down
                terminated.append(signal.SIGINT)
        echo(f"stopped; everything is kept in {room.folder}")
        if terminated:  # Ctrl-C or SIGTERM ends serve as it ends every command: "Aborted!", exit 130 (README)
            raise KeyboardInterrupt
    finally:
        room.close()  # a second close (after a refused port) does nothing more


@contextlib.contextmanager
def _terminated_as_abort(server):
    """While serving, SIGTERM stops the server as Ctrl-C does: it is recorded and asks uvicorn to exit (uvicorn
    takes the signal itself once it runs, and raises it again after shutting down), instead of killing the
    process (exit 143, no "Aborted!"); the caller then ends with a KeyboardInterrupt,
    which the CLI reports as every command's interruption. Only SIGTERM at its default is taken, and only
    in the main thread; Ctrl-C is uvicorn's, which ends the same way once it has shut down."""
    terminated: list[int] = []
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        yield terminated
        return

    def stop(signum, frame):  # never raises inside the event loop (a half-closed loop printed a traceback)
        terminated.append(signum)
        server.should_exit = True  # uvicorn stops at its next tick, or at once if it has not started yet
    signal.signal(signal.SIGTERM, stop)
    try:
        yield terminated
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _missing(folder: Path) -> list[Path]:
    """``folder`` and each parent of it that does not exist yet, deepest first."""
    missing, path = [], folder.absolute()
    while not path.exists() and path != path.parent:
        missing.append(path)
        path = path.parent
    return missing


def _undo(folder: Path, made: list[Path], resumed: bool):
    """A new session that could not start leaves nothing: its database and the folders it created."""
    if resumed:
        return
    for suffix in ("", "-wal", "-shm", "-journal"):
        (folder / f"{FILE}{suffix}").unlink(missing_ok=True)
    for path in made:
        try:
            path.rmdir()
        except OSError:  # not empty: something else is in it now, and it stays
            break


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


def _when(iso: str) -> str:
    """A stored time (UTC, ISO 8601) as the CLI writes times: 2026-12-05 16:54:03 UTC."""
    return datetime.fromisoformat(iso).strftime("%Y-%m-%d %H:%M:%S UTC")


def _banner(room, host: str, port: int, resumed: bool, level: str) -> list[str]:
    shown = socket.gethostname() if host in ("0.0.0.0", "::") else (f"[{host}]" if ":" in host else host)
    base = f"http://{shown}:{port}"
    meta = room.meta
    kind = "new session"
    if resumed:
        kind = "resumed session" + (f", which ended {_when(meta['ended'])}: both pages are read-only"
                                    if meta.get("ended") else "")
    return [(f"kvgrade serve: {', '.join(meta['exercises'])} in {room.folder} ({kind}; "
             f"time box {meta['minutes']} min, feedback {meta['feedback']}; isolation {level}"
             + (": NOT ISOLATED, for code you trust only)" if level == "process" else ")")),
            f"candidate:   {base}/c/{meta['candidate_token']}/",
            f"interviewer: {base}/i/{meta['interviewer_token']}/",
            (f"Send the candidate link only; the interviewer link opens the sheet and the answers. The server "
             f"listens on {host} only. To reach it from the candidate's machine, forward it yourself: an SSH "
             f"tunnel (ssh -N -R 8000:127.0.0.1:{port} you@a-host-they-can-reach, then send that host's "
             f"address with the same path) or your team's own HTTPS proxy. kvgrade never opens a tunnel."),
            "Stop with Ctrl-C; run the same command again to resume with the same links."]
