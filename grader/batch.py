"""Grade many submissions (one folder per candidate) in parallel, and rank them.

Each submission is graded in a worker process of its own pool slot; whatever goes wrong with
one (a missing folder, a grader crash, a dead worker) becomes that candidate's row with the
error, and the batch goes on. Every candidate gets ``OUT/<name>/`` with ``result.json``,
``report.html`` and ``report.md``; ``OUT/index.html`` and ``OUT/summary.md`` rank them.

At scale: rows stream out (``on_done``) as submissions finish; only a few submissions are in
flight at once, and the parent keeps one small row per submission, never a full result.
``OUT/manifest.json`` (rewritten atomically after each submission) records every finished
one, so a batch that was interrupted and run again skips a submission whose files, seed,
interview set, feedback and kit version are unchanged, and grades only the rest (without a
seed given, it goes on at the seed the manifest recorded).
"""
from __future__ import annotations

import hashlib
import itertools
import json
import multiprocessing
import os
import re
import signal
import stat
import threading
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path

from . import __version__, plainfile
from .result import level_rank
from .submission import MAX_ZIP_BYTES, has_modules


def submissions(paths: list[str]) -> list[Path]:
    """What to grade: a path holding exercise modules (looking through a single top folder, as
    ``grade`` does) or a ``.zip`` is one submission; any other folder stands for what it holds,
    one candidate per subfolder or ``.zip`` (links are never followed, dotfiles skipped).
    Anything else is kept, to be reported as broken rather than silently dropped, and so is a named
    folder that holds no candidate (an empty one among others once vanished from the ranking)."""
    found = []
    for raw in paths:
        path = Path(raw)
        found += _candidates_in(path) or [path]
    return list({os.path.abspath(p): p for p in found}.values())  # one candidate named twice is graded once


def holds_no_candidate(path: Path) -> bool:
    """A folder of candidates with none in it: batch refuses it when nothing else is given."""
    return path.is_dir() and not has_modules(path) and not _candidates_in(path)


def _candidates_in(path: Path) -> list[Path]:
    """The candidates a folder of them stands for (none for a submission, or for anything else)."""
    if not path.is_dir() or has_modules(path):
        return []
    return sorted(p for p in path.iterdir() if not p.name.startswith((".", "_")) and not p.is_symlink()
                  and (p.is_dir() or p.suffix.lower() == ".zip"))


BATCH_FILES = {"index.html", "summary.md", "manifest.json"}  # the batch's own files beside the candidates' folders


def names(paths: list[Path]) -> list[str]:
    """A folder name per submission, unique and stable: a name that is already safe, shared with no
    other submission and none of the batch's own files is kept; any other gets a short digest of its
    full path, so "alice smith" and "alice_smith" never write into one folder, whatever the order, and
    a candidate named ``index.html`` never takes the ranking's place."""
    bases = [re.sub(r"[^A-Za-z0-9._-]+", "_", p.name).lstrip(".") or "submission" for p in paths]
    counts = Counter(bases)
    return [base if base == path.name and counts[base] == 1 and base.lower() not in BATCH_FILES
            else f"{base}-{_digest(path)}" for base, path in zip(bases, paths)]


def _digest(path: Path) -> str:
    return hashlib.sha256(str(path.absolute()).encode()).hexdigest()[:8]


class Interrupted(Exception):
    """``stop`` was set: what was running finished and is recorded; the rest waits for a resume."""


def grade_many(paths: list[Path], out: str | Path, exercise_ids: list[str] | None = None, seed: int | None = None,
               feedback: str = "detail", jobs: int | None = None, on_done=None,
               show_levels: bool = False, stop: threading.Event | None = None) -> list[dict]:
    """Grade every path into ``out``; returns the rows, ranked (best first, broken ones last).

    ``on_done(row)`` is called as each submission finishes; a row reused from the manifest
    (unchanged since it was graded) has ``"reused": True``. Once ``stop`` is set (by a signal
    handler: a flag, never an exception thrown into the middle of the bookkeeping), nothing new
    starts, what runs finishes and is recorded, and :class:`Interrupted` is raised.

    ``seed`` None: the seed this ``out`` was graded at before (so a batch run again resumes),
    else a fresh one; every submission of the batch is graded at that one seed.
    """
    from .engine import fresh_seed

    out = Path(out)
    out.mkdir(exist_ok=True)  # its parent must exist: the CLI checked it
    manifest = Manifest(out)
    if seed is None:
        seed = manifest.seed if manifest.seed is not None else fresh_seed()
    manifest.seed = seed
    settings = {"seed": seed, "exercises": exercise_ids, "feedback": feedback, "show_levels": show_levels}
    named = list(zip(names(paths), paths))
    todo = []
    for name, path in named:
        if stop is not None and stop.is_set():  # a stop while fingerprinting: nothing graded yet is lost
            raise Interrupted
        key = grading_key(path, settings)
        row = manifest.reusable(name, key)
        if row is None:
            todo.append((name, path, key))
        elif on_done:
            on_done({**row, "reused": True})
    _grade_todo(todo, out, manifest, settings, jobs, on_done, stop or threading.Event())
    rows = [manifest.row(name) or _broken(name, path, "not graded") for name, path in named]
    rows.sort(key=ranking)
    for rank, row in enumerate(rows, 1):
        row["rank"] = rank
    write_summaries(rows, out, exercise_ids or sorted({e for r in rows for e in r["exercises"]}), seed)
    return rows


def _grade_todo(todo: list[tuple], out: Path, manifest: "Manifest", settings: dict, jobs, on_done,
                stop: threading.Event):
    """Grade ``todo``, one submission handed to each worker at a time (so a stop waits for no
    more than ``jobs`` of them), recording and reporting each as it ends."""
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(todo) or 1))
    waiting = iter(todo)
    running = {}
    # Workers ignore Ctrl-C (the terminal sends it to them too): the parent decides what stops.
    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"),
                             initializer=signal.signal, initargs=(signal.SIGINT, signal.SIG_IGN)) as pool:
        while True:
            while len(running) < jobs and not stop.is_set() and (item := next(waiting, None)):
                name, path, key = item
                running[pool.submit(grade_one, str(path), str(out / name), name, settings["exercises"],
                                    settings["seed"], settings["feedback"], settings["show_levels"])] = item
            if not running:
                break
            done, _ = wait(running, timeout=0.2, return_when=FIRST_COMPLETED)  # a timeout, to see ``stop``
            for future in done:
                _finish(future, *running.pop(future), manifest, on_done)
    if stop.is_set() and next(waiting, None) is not None:
        raise Interrupted


def _finish(future, name: str, path, key: str, manifest: "Manifest", on_done):
    try:
        row = future.result()
    except Exception as exc:  # noqa: BLE001  the worker itself died: still one row, never the batch; never reused
        row, key = _broken(name, path, f"the grading worker failed: {type(exc).__name__}: {exc}"), None
    manifest.record(name, key, row)
    if on_done:
        on_done(row)


def grading_key(path: Path, settings: dict) -> str:
    """What decides a submission's result: its files, the settings and the kit's version."""
    text = json.dumps({"files": files_digest(path), "kvgrade": __version__, **settings}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


DIGEST_ENTRIES = 10_000  # entries of one submission fingerprinted; a submission is at most 50 modules


def files_digest(path: Path) -> str | None:
    """A digest of every regular file under ``path`` (or of the file itself), by relative name;
    links count by their target's name, never followed. None when nothing can be read.

    Bounded, since a submission is hostile data read before any sandbox: of each file, its size,
    its modification time and at most the bytes a grading may read of it (``MAX_ZIP_BYTES``), so a
    sparse terabyte costs what 64 MiB does; past ``DIGEST_ENTRIES`` entries the rest is not read."""
    digest = hashlib.sha256()
    try:
        entries = [path] if not path.is_dir() or path.is_symlink() else \
            sorted(p for p in itertools.islice(path.rglob("*"), DIGEST_ENTRIES + 1) if "__pycache__" not in p.parts)
        for entry in entries[:DIGEST_ENTRIES]:
            found = entry.lstat()
            digest.update(str(entry.relative_to(path) if entry != path else entry.name).encode() + b"\0")
            if stat.S_ISLNK(found.st_mode):
                digest.update(b"link:" + os.readlink(entry).encode(errors="surrogateescape"))
            elif stat.S_ISREG(found.st_mode):
                digest.update(f"{found.st_size}:{found.st_mtime_ns}:".encode())
                _digest_head(entry, digest)
            digest.update(b"\0")
        if len(entries) > DIGEST_ENTRIES:
            digest.update(b"more entries")
    except OSError:
        return None
    return digest.hexdigest()


def _digest_head(entry: Path, digest) -> None:
    """The first ``MAX_ZIP_BYTES`` of a regular file into ``digest``, read as plainfile says (a FIFO or
    link swapped in since it was listed is skipped)."""
    try:
        for chunk in plainfile.head_chunks(entry, MAX_ZIP_BYTES):
            digest.update(chunk)
    except plainfile.NotPlain:  # raised before any chunk: the digest is untouched
        return


class Manifest:
    """``OUT/manifest.json``: per submission name, the key it was graded under and its row."""

    FILE = "manifest.json"
    SCHEMA = "kvgrade.batch-manifest/1"
    ROW_FIELDS = {"name", "path", "level", "provisional", "score", "exercises", "report", "error"}

    def __init__(self, out: Path):
        self.path = out / self.FILE
        data = self._load()
        self.entries = {name: entry for name, entry in data.get("entries", {}).items()
                        if isinstance(entry, dict) and isinstance(entry.get("row"), dict)}
        seed = data.get("seed")
        self.seed = seed if type(seed) is int and seed >= 0 else None  # the seed the batch was graded at

    def _load(self) -> dict:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}  # none yet, or unreadable: grade everything again
        ok = isinstance(data, dict) and data.get("schema") == self.SCHEMA and isinstance(data.get("entries"), dict)
        return data if ok else {}

    def reusable(self, name: str, key: str) -> dict | None:
        """The recorded row when ``name`` was graded under ``key`` and its reports are still there."""
        entry = self.entries.get(name)
        if not entry or entry.get("key") != key or not (self.path.parent / name / "result.json").is_file():
            return None
        row = entry["row"]
        return row if self.ROW_FIELDS <= row.keys() and row["name"] == name else None  # else regrade

    def row(self, name: str) -> dict | None:
        entry = self.entries.get(name)
        return dict(entry["row"]) if entry else None

    def record(self, name: str, key: str | None, row: dict):
        """Keep ``row``; a None key is never reused (a failure of the grader, not of the submission)."""
        self.entries[name] = {"key": key, "row": row}
        partial = self.path.with_name(f".{self.FILE}.partial")
        partial.write_text(json.dumps({"schema": self.SCHEMA, "seed": self.seed, "entries": self.entries}))
        os.replace(partial, self.path)


def ranking(row: dict) -> tuple:
    """Best first: level, then confirmed before provisional, then the share of checks passed
    over all counted exercises (a required one not attempted adds 0); broken rows last."""
    return (row["error"] is not None, -level_rank(row["level"]), bool(row.get("provisional")),
            -row["score"], row["name"])


def _broken(name: str, path, error: str) -> dict:
    from .result import neutral

    return {"name": name, "path": neutral(str(path)), "level": None, "provisional": False, "score": 0.0,
            "exercises": {}, "report": None, "error": neutral(error), "seconds": 0.0}


def grade_one(path: str, out: str, name: str, exercise_ids, seed: int, feedback: str,
              show_levels: bool = False) -> dict:
    """Grade one submission and write its reports (runs in a worker process).

    The row is the interviewer's and comes from the full result; the reports follow ``feedback``.
    """
    from .engine import grade
    from .render.formats import render
    from .submission import SubmissionError
    from .workspace import exercises_shown, keep_shown

    try:
        result = grade(path, exercise_ids, seed=seed)  # candidate text already made safe
    except SubmissionError as exc:  # a bad submission: its one line, as `grade` prints it
        return _broken(name, path, str(exc))
    except Exception as exc:  # noqa: BLE001  anything else a grading raised: one broken row, never the batch
        return _broken(name, path, f"{type(exc).__name__}: {exc}")
    # as `kvgrade grade` shows a workspace (never logged: not our folder)
    keep_shown(result, exercises_shown(Path(path)), exercise_ids)
    folder = Path(out)
    folder.mkdir(exist_ok=True)
    for fmt, file in (("json", "result.json"), ("html", "report.html"), ("markdown", "report.md")):
        (folder / file).write_text(render(result, fmt, feedback, show_levels))
    errors = [f"{e.id}: {e.error}" for e in result.exercises if e.status == "error"]
    return {"name": name, "path": path, "level": result.overall_level, "score": result.score,
            "provisional": result.overall_provisional, "to_observe": len(result.overall_to_observe),
            "reason": result.overall_reason,
            "exercises": {e.id: {"level": e.level, "status": e.status, "provisional": e.provisional,
                                 "required": e.required,
                                 "checks": f"{e.passed_checks}/{len(e.checks)}" if e.checks else ""}
                          for e in result.exercises},
            "report": f"{folder.name}/report.html", "error": None, "problems": errors,
            "seconds": round(result.seconds, 2)}


def write_summaries(rows: list[dict], out: Path, exercise_ids: list[str], seed: int):
    from .render import html, markdown

    (out / "index.html").write_text(html.render_batch(rows, f"kvgrade batch: {out}", seed, exercise_ids))
    (out / "summary.md").write_text(markdown.batch_summary(rows, exercise_ids, seed))
