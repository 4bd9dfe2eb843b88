"""The room's memory: one SQLite file, ``DIR/room.sqlite``, written as things happen.

Every edit snapshot, run, hint, observation and note is a row committed before the request
that made it returns, so a server killed at any moment loses nothing that was acknowledged.
The session's settings and its two tokens are rows too: a restart on the same folder serves
the same links. The last write wins; history stays (snapshots and events are never updated).
"""
from __future__ import annotations

import json
import os
import secrets
import sqlite3
import threading
from datetime import UTC, datetime
from pathlib import Path

FILE = "room.sqlite"
MAX_SNAPSHOTS = 5000  # per file: past it the newest snapshot is overwritten, so a flood of saves cannot fill the disk
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (exercise TEXT, name TEXT, text TEXT NOT NULL, saved TEXT NOT NULL,
                                  PRIMARY KEY (exercise, name));
CREATE TABLE IF NOT EXISTS snapshots (id INTEGER PRIMARY KEY, at TEXT NOT NULL, exercise TEXT NOT NULL,
                                      name TEXT NOT NULL, text TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (id INTEGER PRIMARY KEY, at TEXT NOT NULL, kind TEXT NOT NULL,
                                 exercise TEXT NOT NULL, status TEXT NOT NULL, seed INTEGER,
                                 outcome TEXT NOT NULL DEFAULT '{}');
CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY, at TEXT NOT NULL, kind TEXT NOT NULL,
                                   exercise TEXT NOT NULL, value TEXT NOT NULL);
"""


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class Store:
    """The session folder's database; safe to share between the server's threads."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self._lock = threading.Lock()
        path = self.folder / FILE  # it holds both tokens: the owner's alone, whatever the folder's mode
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
        os.chmod(path, 0o600)  # SQLite gives its -wal and -shm files this file's mode
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")  # a row acknowledged is a row on disk
        self._db.executescript(SCHEMA)

    def close(self):
        with self._lock:  # never while another thread is inside a statement: sqlite would crash
            self._db.close()

    def _rows(self, sql: str, args=()) -> list[tuple]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    def _write(self, sql: str, args=()) -> int:
        with self._lock:
            return self._db.execute(sql, args).lastrowid

    # -- settings and tokens ----------------------------------------------------------------

    def meta(self) -> dict:
        return {k: json.loads(v) for k, v in self._rows("SELECT key, value FROM meta")}

    def set_meta(self, **values):
        for key, value in values.items():
            self._write("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))

    def create(self, exercises: list[str], minutes: int, feedback: str):
        """A new session: its set, time box, feedback and two fresh unguessable tokens."""
        self.set_meta(exercises=exercises, minutes=minutes, feedback=feedback, started=now(), ended=None,
                      candidate_token=secrets.token_urlsafe(24), interviewer_token=secrets.token_urlsafe(24))

    # -- the candidate's files --------------------------------------------------------------

    def save_file(self, exercise: str, name: str, text: str):
        """The file's text now (last write wins) and a snapshot of it in the history, unless unchanged."""
        at, key = now(), (exercise, name)
        with self._lock, self._db:
            current = self._db.execute("SELECT text FROM files WHERE exercise = ? AND name = ?", key).fetchone()
            if current and current[0] == text:
                return
            self._db.execute("INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?)", (*key, text, at))
            count, last = self._db.execute("SELECT count(*), max(id) FROM snapshots WHERE exercise = ? AND name = ?",
                                           key).fetchone()
            if count >= MAX_SNAPSHOTS:
                self._db.execute("UPDATE snapshots SET at = ?, text = ? WHERE id = ?", (at, text, last))
            else:
                self._db.execute("INSERT INTO snapshots (at, exercise, name, text) VALUES (?, ?, ?, ?)",
                                 (at, *key, text))

    def files(self) -> dict[tuple[str, str], str]:
        return {(e, n): t for e, n, t in self._rows("SELECT exercise, name, text FROM files")}

    def snapshot_count(self) -> int:
        return self._rows("SELECT count(*) FROM snapshots")[0][0]

    # -- runs -------------------------------------------------------------------------------

    def start_run(self, kind: str, exercise: str, seed: int | None) -> int:
        return self._write("INSERT INTO runs (at, kind, exercise, status, seed) VALUES (?, ?, ?, 'running', ?)",
                           (now(), kind, exercise, seed))

    def finish_run(self, run_id: int, status: str, outcome: dict):
        self._write("UPDATE runs SET status = ?, outcome = ? WHERE id = ?", (status, json.dumps(outcome), run_id))

    def interrupted(self) -> int:
        """Runs a killed server left running: recorded as interrupted, never lost."""
        with self._lock:
            return self._db.execute("UPDATE runs SET status = 'interrupted', outcome = ? WHERE status = 'running'",
                                    (json.dumps({"error": "the server stopped during this run"}),)).rowcount

    def runs(self) -> list[dict]:
        rows = self._rows("SELECT id, at, kind, exercise, status, seed, outcome FROM runs ORDER BY id")
        return [{"id": i, "at": at, "kind": k, "exercise": e, "status": s, "seed": seed, "outcome": json.loads(o)}
                for i, at, k, e, s, seed, o in rows]

    # -- the interviewer's record: hints sent, observations, notes ---------------------------

    def add_event(self, kind: str, exercise: str, value):
        self._write("INSERT INTO events (at, kind, exercise, value) VALUES (?, ?, ?, ?)",
                    (now(), kind, exercise, json.dumps(value)))

    def events(self, kind: str | None = None) -> list[dict]:
        rows = self._rows("SELECT at, kind, exercise, value FROM events ORDER BY id")
        return [{"at": at, "kind": k, "exercise": e, "value": json.loads(v)}
                for at, k, e, v in rows if kind is None or k == kind]
