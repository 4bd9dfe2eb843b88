"""One interview session: its folder, what each side may do, and one grading at a time.

The web layer (``app.py``) only parses requests and calls these methods; every rule of the
room (who may change what, sizes, the queue, the end) lives here, so it is tested without a
browser. Whatever a method changes is in SQLite before it returns, then every open page is
told (``listen``) and fetches its own view again.
"""
from __future__ import annotations

import logging
import queue
import secrets
import shutil
import threading
from datetime import datetime
from pathlib import Path

from .. import catalog
from ..api import fresh_seed
from . import finish, grading, views
from .views import RUN_KINDS, files_of, own_tests_file
from .store import Store, now

log = logging.getLogger("kvgrade.room")

MAX_FILE_BYTES = 64 << 10  # one file of the candidate's, as UTF-8
MAX_NOTE_BYTES = 16 << 10
MAX_QUEUED = 1  # candidate runs waiting or running at once: a second click is refused, not piled up
MAX_STREAMS = 8  # open event streams per side: a page holds one; reloads and a second tab a few more
JOB_SECONDS = 900.0  # a whole grading process, as a last resort (the sandbox bounds each call far tighter)
FEEDBACK = ("none", "summary", "detail")
CANDIDATE, INTERVIEWER = "candidate", "interviewer"


class RoomError(Exception):
    """A request the room refuses: ``status`` is its HTTP status, the message says why."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def starting_text(exercise: catalog.Exercise, name: str) -> str:
    """The stub, or for the candidate's own tests a file holding no tests: only a comment saying what goes
    there. (It once opened as the kit's public tests, word for word, and those earned the own-test criteria
    for work nobody did; the public tests are shown read-only beside it, see ``views.public_files``.)"""
    if name == exercise.stub_path.name:
        return exercise.stub_path.read_text()
    public = ", ".join(p.name for p in exercise.public_tests) or "the public tests"
    return (f"# Your own pytest tests for {exercise.stub_path.name} go here (the prompt's \"Your own tests\").\n"
            f"# \"Run my tests\" runs this file against your module; \"Submit\" grades it too.\n"
            f"# The kit's public tests are in the read-only tab {public}.\n")


def time_box(exercises: list[catalog.Exercise]) -> int:
    """The session's minutes from the rubrics' time boxes (30 where one has none)."""
    return sum(e.rubric.time_box_minutes or 30 for e in exercises)


class Listener:
    """One open event stream: its side, how to wake it, and whether a newer stream of its side ended it."""

    def __init__(self, role: str, notify):
        self.role, self.notify, self.ended = role, notify, False


class Room:
    def __init__(self, folder: Path, exercise_ids: list[str] | None = None, minutes: int | None = None,
                 feedback: str | None = None):
        """Open the session in ``folder``: resume it, or create it from the options given."""
        self.folder = Path(folder).resolve()  # grading processes start elsewhere
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.store = Store(self.folder)
        self.meta = self._settings(exercise_ids, minutes, feedback)
        self.exercises = {e: catalog.get(e) for e in self.meta["exercises"]}
        self.store.interrupted()
        saved = self.store.files()
        for ex in self.exercises.values():
            for name in files_of(ex):
                if (ex.id, name) not in saved:
                    self.store.save_file(ex.id, name, starting_text(ex, name))
        self._listeners: list = []
        self.closing = threading.Event()  # the server is stopping: event streams end
        self._lock = threading.Lock()
        self._queued = 0
        self._jobs: queue.Queue = queue.Queue()
        threading.Thread(target=self._work, name="kvgrade-room-jobs", daemon=True).start()

    def _settings(self, exercise_ids, minutes, feedback) -> dict:
        meta = self.store.meta()
        if not meta:
            if not exercise_ids:
                raise RoomError(f"{self.folder} holds no session yet: say which exercises with -e ID[,ID]")
            chosen = [catalog.get(e) for e in exercise_ids]
            self.store.create(list(exercise_ids), minutes or time_box(chosen), feedback or "summary")
            return self.store.meta()
        asked = {"exercises": list(exercise_ids) if exercise_ids else None, "minutes": minutes, "feedback": feedback}
        differ = [f"{key} {','.join(meta[key]) if isinstance(meta[key], list) else meta[key]}"
                  for key, value in asked.items() if value is not None and value != meta[key]]
        if differ:
            raise RoomError(f"{self.folder} is a session already started with {', '.join(differ)}; "
                            "resume it without those options, or start another folder")
        return meta

    def close(self):
        self._jobs.put(None)
        self.store.close()

    # -- tokens and listeners ---------------------------------------------------------------

    def role(self, token: str | None) -> str | None:
        """Whose token this is, compared in constant time; None for anything else."""
        for role in (CANDIDATE, INTERVIEWER):
            if token and secrets.compare_digest(token.encode(), self.meta[f"{role}_token"].encode()):
                return role
        return None

    def listen(self, role: str, notify) -> Listener:
        """Call ``notify()`` (from any thread) whenever ``role``'s view may have changed. A side holds at most
        ``MAX_STREAMS``: a newer stream ends its oldest (``ended``, then notified), so neither side can
        exhaust the server's connections and files (a red team wedged it with 244 streams)."""
        entry = Listener(role, notify)
        mine = [old for old in self._listeners if old.role == role]
        for old in mine[:max(0, len(mine) + 1 - MAX_STREAMS)]:
            old.ended = True
            self.unlisten(old)
            old.notify()
        self._listeners.append(entry)
        return entry

    def unlisten(self, entry: Listener):
        if entry in self._listeners:
            self._listeners.remove(entry)

    def stop_streams(self):
        """End every open event stream now, so a stopping server does not wait on them."""
        self.closing.set()
        self._changed()

    def _changed(self, *roles: str):
        for entry in list(self._listeners):
            if entry.role in (roles or (CANDIDATE, INTERVIEWER)):
                entry.notify()

    @property
    def ended(self) -> bool:
        return self.store.meta().get("ended") is not None

    # -- the candidate's side ---------------------------------------------------------------

    def save(self, exercise: str, name: str, text):
        self._writable(exercise, name, text)
        self.store.save_file(exercise, name, text)
        self._changed(INTERVIEWER)  # another candidate tab keeps its own text until it reloads

    def run(self, exercise: str, kind: str, files: dict | None = None) -> int:
        """Queue a run of ``exercise`` (saving ``files`` first): ``public`` (the kit's public tests), ``own``
        (the candidate's own tests, where the exercise asks for some) or ``submit`` (a grading)."""
        if kind not in RUN_KINDS:
            raise RoomError("kind must be 'public' (run the kit's public tests), 'own' (run your own tests) "
                            "or 'submit' (grade)")
        self._open()
        if own_tests_file(self._exercise(exercise)) is None and kind == "own":
            raise RoomError(f"{exercise} asks for no tests of your own: run its public tests instead")
        files = files or {}
        if not isinstance(files, dict):
            raise RoomError("files must map file names to their text")
        for name, text in files.items():
            self._writable(exercise, name, text)
        with self._lock:
            if self._queued >= MAX_QUEUED:
                raise RoomError("a run is already going: wait for its result, then run again", 429)
            self._queued += 1
        try:  # the slot is the worker's to free once queued; until then, any failure frees it here
            for name, text in files.items():
                self.store.save_file(exercise, name, text)
            run_id = self.store.start_run(kind, exercise, fresh_seed() if kind == "submit" else None)
            self._jobs.put(("run", run_id, kind, exercise))
        except BaseException:
            with self._lock:
                self._queued -= 1
            raise
        self._changed()
        return run_id

    def _open(self):
        if self.ended:
            raise RoomError("the interview has ended: nothing can change any more", 409)

    def _exercise(self, exercise) -> catalog.Exercise:
        if not isinstance(exercise, str) or exercise not in self.exercises:
            raise RoomError(f"no exercise {str(exercise)[:64]!r} in this interview", 404)
        return self.exercises[exercise]

    def _writable(self, exercise, name, text):
        self._open()
        if not isinstance(name, str) or name not in files_of(self._exercise(exercise)):
            raise RoomError(f"no file {str(name)[:64]!r} in {exercise}", 404)
        if not _unicode(text):
            raise RoomError("a file's text must be a string of Unicode text (no lone surrogates)")
        if len(text.encode("utf-8")) > MAX_FILE_BYTES:
            raise RoomError(f"{name} is over {MAX_FILE_BYTES // 1024} KiB: the room keeps files smaller than that",
                            413)

    # -- the interviewer's side -------------------------------------------------------------

    def send_hint(self, exercise: str, number) -> None:
        hints = self._exercise(exercise).rubric.hints
        if type(number) is not int or not 1 <= number <= len(hints):
            raise RoomError(f"{exercise} has hints 1 to {len(hints)}")
        self._open()
        self.store.add_event("hint", exercise, number)
        self._changed()

    def observe(self, exercise: str, criterion, value) -> None:
        """Record an observed criterion as met (true), missed (false), or not yet seen (null)."""
        observable = {c.id for c in self._exercise(exercise).rubric.criteria if c.observed}
        if not isinstance(criterion, str) or criterion not in observable:
            raise RoomError(f"{exercise} has no observed criterion {str(criterion)[:64]!r}")
        if value not in (True, False, None):
            raise RoomError("an observation is true, false or null")
        self.store.add_event("observed", exercise, {"criterion": criterion, "value": value})
        self._record_changed()

    def note(self, exercise: str, text) -> None:
        self._exercise(exercise)
        if not _unicode(text) or len(text.encode("utf-8")) > MAX_NOTE_BYTES:
            raise RoomError(f"notes are a string of Unicode text of at most {MAX_NOTE_BYTES // 1024} KiB")
        self.store.add_event("note", exercise, text)
        self._record_changed()

    def _record_changed(self):
        """After the end, the reports follow the interviewer's record (nothing is graded again)."""
        final = [r for r in self.store.runs() if r["kind"] == "final" and r["status"] == "done"]
        if self.ended and final:
            finish.write_reports(self, final[-1]["outcome"])
        self._changed(INTERVIEWER)

    def end(self) -> None:
        """Freeze the candidate's page now; grade the final code and write the reports next."""
        self._open()
        self.store.set_meta(ended=now())
        self._jobs.put(("end",))
        self._changed()

    # -- what each side sees ----------------------------------------------------------------

    def candidate_view(self) -> dict:
        return views.candidate(self)

    def interviewer_view(self) -> dict:
        return views.interviewer(self)

    def remaining_seconds(self) -> float:
        meta = self.store.meta()
        stop = datetime.fromisoformat(meta["ended"]) if meta.get("ended") else datetime.fromisoformat(now())
        return meta["minutes"] * 60 - (stop - datetime.fromisoformat(meta["started"])).total_seconds()

    # -- one job at a time, in a grading process of its own --------------------------------

    def _work(self):
        while (job := self._jobs.get()) is not None:
            try:
                self._run_job(job[1], job[2], job[3]) if job[0] == "run" else self._final()
            except Exception:  # a bug or a full disk: logged, and the next job still runs
                log.exception("the room's job %s failed", job[0])
            finally:
                if job[0] == "run":
                    with self._lock:
                        self._queued -= 1
                self._changed()

    def _run_job(self, run_id: int, kind: str, exercise: str):
        folder = self._snapshot_submission(f"run-{run_id}", [exercise])
        try:
            if kind == "public":
                outcome = grading.run_job("public_tests", str(folder), exercise, timeout=JOB_SECONDS)
            elif kind == "own":
                outcome = grading.run_job("own_tests", str(folder), exercise, timeout=JOB_SECONDS)
            else:
                seed = next(r["seed"] for r in self.store.runs() if r["id"] == run_id)
                outcome = grading.run_job("grade", str(folder), [exercise], seed, timeout=JOB_SECONDS)
            self.store.finish_run(run_id, "done", outcome)
        except grading.JobFailed as exc:  # the run says so, and the room goes on
            self.store.finish_run(run_id, "error", {"error": f"the run could not finish: {exc}"})

    def _snapshot_submission(self, name: str, exercises: list[str]) -> Path:
        """The files now, as a submission in the session's private folder."""
        folder = self.folder / "submissions" / name
        shutil.rmtree(folder, ignore_errors=True)  # a run the server was killed in
        (self.folder / "submissions").mkdir(mode=0o700, exist_ok=True)
        files = self.store.files()
        return grading.write_submission(folder, {e: {n: files[(e, n)] for n in files_of(self.exercises[e])}
                                                 for e in exercises})

    def _final(self):
        ids = list(self.exercises)
        folder = self._snapshot_submission("final", ids)
        seed = fresh_seed()  # the CLI's seeds: short in a rerun line, too many to tabulate
        run_id = self.store.start_run("final", ",".join(ids), seed)
        self._changed(INTERVIEWER)
        try:
            outcome = grading.run_job("grade", str(folder), ids, seed, timeout=JOB_SECONDS)
            self.store.finish_run(run_id, "done", outcome)
            finish.write_reports(self, outcome)
        except grading.JobFailed as exc:
            self.store.finish_run(run_id, "error", {"error": f"the final grading failed: {exc}"})


def _unicode(text) -> bool:
    """A string the store can keep: JSON lets a lone surrogate (``"\\ud800"``) through, UTF-8 does not."""
    if not isinstance(text, str):
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
