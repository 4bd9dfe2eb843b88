"""Interviewer notes: which observed criteria were met, and free text, per exercise.

A TOML file such as::

    [decode_mask]
    notes = "Derived the offset from positions; needed a hint on T = 1."

    hints = 2            # the rubric's first two hints were given (they are given in order);
                         # or a list of hint numbers from 1, such as [1, 3]

    [decode_mask.observed]
    explains_why_decode_hides_the_bug = true
    names_library_conventions = false
"""
from __future__ import annotations

from pathlib import Path

from .result import plural
from .rubric import RubricError, read_toml


class NotesError(Exception):
    pass


class Notes:
    def __init__(self, data: dict):
        self.data = data

    @classmethod
    def load(cls, path: str | Path) -> "Notes":
        try:
            data = read_toml(path)
        except ValueError as exc:
            raise NotesError(f"notes file {path}: {exc}") from None
        for key, section in data.items():
            if not isinstance(section, dict):
                raise NotesError(f"notes file {path}: [{key}] should be a table for one exercise")
            observed = section.get("observed", {})
            if not isinstance(observed, dict) or not all(isinstance(v, bool) for v in observed.values()):
                raise NotesError(f"notes file {path}: [{key}.observed] should map criteria to true/false")
            hints = _hint_numbers(section.get("hints", []))
            if hints is None:
                raise NotesError(f"notes file {path}: [{key}] hints should be a count (hints = 2) "
                                 "or a list of hint numbers (1, 2, ...)")
            _check_hints_exist(path, key, hints)
            _check_observed_exist(path, key, list(observed))
        return cls(data)

    def observed(self, exercise_id: str) -> dict[str, bool]:
        return dict(self.data.get(exercise_id, {}).get("observed", {}))

    def hints(self, exercise_id: str) -> tuple[int, ...]:
        """Indices into the rubric's hints of those given (the file numbers them from 1)."""
        return tuple(h - 1 for h in _hint_numbers(self.data.get(exercise_id, {}).get("hints", [])) or [])

    def text(self, exercise_id: str) -> str:
        return str(self.data.get(exercise_id, {}).get("notes", ""))

    def problems(self, result) -> list[str]:
        """Sentences for notes that match nothing in ``result`` (a typo would otherwise be ignored)."""
        out = []
        by_id = {e.id: e for e in result.exercises}
        for key, section in self.data.items():
            if key not in by_id:
                out.append(f"notes for [{key}], which is not in this result")
                continue
            observable = {c.id for c in by_id[key].criteria if c.kind == "observed"}
            out += [f"[{key}.observed] {name} is not an observed criterion of {key}"
                    for name in section.get("observed", {}) if observable and name not in observable]
        return out


def _hint_numbers(value) -> list[int] | None:
    """``hints = N`` means the first N (hints are given in order); a list names them. None: malformed."""
    if type(value) is int:
        return list(range(1, value + 1)) if 0 <= value <= 100 else None
    if isinstance(value, list) and all(type(h) is int and h >= 1 for h in value):
        return value
    return None


def _check_hints_exist(path, exercise_id: str, hints: list[int]):
    from . import catalog

    try:
        offered = len(catalog.get(exercise_id).rubric.hints)
    except KeyError:
        return  # notes for an exercise this kit lacks: reported by Notes.problems
    if any(h > offered for h in hints):
        raise NotesError(f"notes file {path}: [{exercise_id}] hints {hints}, "
                         f"but its rubric has {plural(offered, 'hint')}")


def _check_observed_exist(path, exercise_id: str, names: list[str]):
    """Every name under ``[ID.observed]`` is a criterion an interviewer can record for ID, as an unknown
    exercise, check or hint number is: a misspelt one was a warning, and the observation silently did not
    count. Those are the rubric's observed criteria, and its validation criteria (observed when graded live)."""
    from . import catalog
    from .own_tests import rubric_for

    try:
        rubric = rubric_for(catalog.get(exercise_id))
    except KeyError:
        return  # notes for an exercise this kit lacks: reported by Notes.problems
    observed = [c.id for c in rubric.criteria if c.observed]
    live = [c.id for c in rubric.criteria if c.validation and not c.observed]
    unknown = [name for name in names if name not in observed + live]
    if unknown:
        valid = ", ".join(observed) + (f" (graded live, also {', '.join(live)})" if live else "")
        raise NotesError(f"notes file {path}: [{exercise_id}.observed] {unknown[0]} is not an observed criterion "
                         f"of {exercise_id}; its observed criteria: {valid}")


def apply(result, notes: Notes):
    """Record ``notes`` in a saved result: observed criteria, hints, free text, and the levels
    they imply, by ``rubric.judge`` exactly as during grading, from the check results already
    in the result and the rubric it stores: nothing is graded again.
    """
    for e in result.exercises:
        e.notes = notes.text(e.id)
        e.hints_given = [i + 1 for i in notes.hints(e.id)]
        if e.status == "graded" and not result.levels_hidden:
            try:
                _rejudge(e, notes.observed(e.id), notes.hints(e.id), result.live)
            except ValueError as exc:  # a hint number the rubric does not have
                raise NotesError(f"notes for [{e.id}]: {exc}") from None
    return result


def reread(data):
    """A saved result (parsed JSON) made ready to report again, or a ``ValueError`` naming the
    first field that is not what a result holds.

    Every level is re-derived from the checks and the rubric the result stores (``judge`` is
    pure), never taken from the file; where the file said otherwise, or the kit's rubric has
    changed since, ``caveats`` says so, and every report shows it first.
    """
    from .result import Result

    result = Result.from_dict(data)
    if result.levels_hidden:  # a candidate's copy: its levels were blanked on purpose, so none may be filled in
        _refuse_levels(data, result)
        return result
    caveats = []
    for e in result.exercises:
        saved = e.level
        caveats += _restore(e)
        try:
            _rederive(e, result.live)
        except (ValueError, RubricError) as exc:
            raise ValueError(f"{e.id}: {exc}") from None
        if e.level != saved:
            caveats.append(f"{e.id}: the file says {_word(saved)}, but its checks and stored rubric give "
                           f"{_word(e.level)}; the re-derived level is shown")
    overall = data.get("overall") if isinstance(data.get("overall"), dict) else {}
    if "level" in overall and overall["level"] != result.overall_level:
        caveats.append(f"overall: the file says {_word(overall['level'])}, but its exercises give "
                       f"{_word(result.overall_level)}; the re-derived level is shown")
    result.caveats = caveats
    return result


def _refuse_levels(data, result):
    """A candidate's copy holds no level: one written into it (a red team filled in strong_hire, which
    --show-levels then printed) cannot be re-derived from what the copy keeps, so it is refused."""
    overall = data.get("overall") if isinstance(data.get("overall"), dict) else {}
    given = [e.id for e in result.exercises if e.level is not None] + (["overall"] if overall.get("level") else [])
    if given:
        raise ValueError(f"levels_hidden: a candidate's copy holds no level, but this one gives {given[0]} one "
                         f"({len(given)} in all); grade again for a result with levels")


def _word(level) -> str:
    return str(level).replace("_", " ") if level else "no level"


def _rederive(e, live: bool):
    """An exercise's level from what the result holds: judged checks, or its status."""
    if e.status == "graded":
        observed = {c.id: c.status == "met" for c in e.criteria if c.kind == "observed" and c.status != "to_observe"}
        _rejudge(e, observed, [h - 1 for h in e.hints_given], live)
        return
    e.level = None if e.kit_error or (e.status == "not_attempted" and not e.required) else "weak"
    e.provisional, e.to_observe, e.criteria = False, [], []


def _rejudge(e, observed: dict, hints, live: bool):
    """Judge ``e`` again with the rubric it stores, keeping the criteria's words it holds."""
    from .rubric import LIVE_ASK, from_record, judge

    rubric = from_record(e.rubric)
    words = {c.id: c.text.removeprefix(LIVE_ASK) for c in e.criteria}
    for d in e.diagnoses:
        d.caps = rubric.diagnosis(d.id).caps
    e.judged(judge(rubric, e.checks, e.diagnoses, observed, hints, live=live))
    for c in e.criteria:
        if c.text in ("", LIVE_ASK):
            c.text += words.get(c.id, "")


def _restore(e) -> list[str]:
    """The rubric's words for the interviewer, which a result does not store, from the kit; a
    result saved before rubrics were stored is judged with the kit's current one. Says when the
    kit's rubric is not the one the result was judged with."""
    from . import catalog, interview
    from .own_tests import judged_record

    try:
        exercise = catalog.get(e.id)
    except KeyError:
        return [f"{e.id}: this kit has no such exercise; its report lacks the rubric's words"] if e.rubric else []
    current = judged_record(exercise)
    words = {c.id: c.text for c in exercise.rubric.criteria}
    for c in e.criteria:
        c.text = c.text or words.get(c.id, "")
    if not e.about:
        e.about, e.level_guide = exercise.rubric.summary, dict(exercise.rubric.levels)
        e.follow_ups = [{"ask": f.ask, "listen_for": f.listen_for} for f in exercise.rubric.follow_ups]
        e.interviewer = interview.sheet(exercise)
    if not e.rubric:
        e.rubric = current
        return [f"{e.id}: the result stores no rubric; judged with the kit's current one"]
    if e.rubric.get("sha256") != current["sha256"]:
        sha = str(e.rubric.get("sha256"))[:12]
        return [f"{e.id}: judged with the rubric stored in the result (sha256 {sha}), which differs from the kit's"]
    if e.rubric != current:  # the same file by its hash, other rules: the result was edited
        return [f"{e.id}: judged with the rules stored in the result, edited: not the kit's rubric of that sha256"]
    return []


def template(result) -> str:
    """A notes file to fill in for the exercises of ``result``, from their rubrics.

    Criteria already recorded in the result are filled in; the others are commented out, so
    a criterion nobody discussed stays "to observe" instead of counting as missed.
    """
    lines = [f"# Interviewer notes for {result.label} (seed {result.seed}).",
             "# For each observed criterion: uncomment it and write true (seen) or false (not seen);",
             "# leave it commented out if it never came up. Then re-render without grading again:",
             "#   kvgrade report RESULT.json --notes THIS_FILE --html report.html --markdown report.md", ""]
    for e in result.exercises:
        if e.status == "not_attempted":
            lines += [f"# {e.id}: not attempted", ""]
            continue
        lines += [f"[{e.id}]  # {e.title}", f"notes = {_toml_string(e.notes)}", *_hints_line(e), "",
                  f"[{e.id}.observed]"]
        for c in (c for c in e.criteria if c.kind == "observed"):
            lines.append(f"# ({c.level.replace('_', ' ')}) {' '.join(c.text.split())}")
            value = {"met": "true", "missed": "false"}.get(c.status)
            lines.append(f"{c.id} = {value}" if value else f"# {c.id} = true")
        lines.append("")
    return "\n".join(lines)


def _hints_line(e) -> list[str]:
    """The hints given, or a commented line saying how to record them (`kvgrade show ID --interviewer`)."""
    if e.hints_given:
        return [f"hints = {list(e.hints_given)}"]
    if e.hints_offered:
        return [f"# hints = [2]  # which of the {e.hints_offered} staged hints you gave "
                f"(kvgrade show {e.id} --interviewer); they can cap the level"]
    return []


def _toml_string(text: str) -> str:
    """``text`` as a TOML basic string that reads back as itself: every quote, backslash and control
    character escaped (a note ending in four quotes, or holding a bell, once made the file unreadable);
    multi-line when it has lines."""
    multi = "\n" in text
    body = "".join(_toml_char(c, multi) for c in text)
    return '"""\n' + body + '"""' if multi else '"' + body + '"'


def _toml_char(c: str, multi: bool) -> str:
    if c in '"\\':
        return "\\" + c
    if c == "\n" and multi or c == "\t":
        return c
    return f"\\u{ord(c):04x}" if ord(c) < 0x20 or ord(c) == 0x7F else c
