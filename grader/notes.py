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

from .rubric import read_toml


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
        raise NotesError(f"notes file {path}: [{exercise_id}] hints {hints}, but its rubric has {offered} hint(s)")


def apply(result, notes: Notes):
    """Record ``notes`` in a saved result: observed criteria, hints, free text, and the levels
    they imply, by ``rubric.judge`` exactly as during grading, from the check results already
    in the result: nothing is graded again.
    """
    from . import catalog
    from .rubric import judge

    for e in result.exercises:
        e.notes = notes.text(e.id)
        e.hints_given = [i + 1 for i in notes.hints(e.id)]
        if e.status != "graded":
            continue
        try:
            exercise_rubric = catalog.get(e.id).rubric
        except KeyError:
            continue
        try:
            e.judged(judge(exercise_rubric, e.checks, e.diagnoses, notes.observed(e.id), notes.hints(e.id)))
        except ValueError as exc:  # a hint number the rubric does not have
            raise NotesError(f"notes for [{e.id}]: {exc}") from None
    return result


def template(result) -> str:
    """A notes file to fill in for the exercises of ``result``, from their rubrics.

    Criteria already recorded in the result are filled in; the others are commented out, so
    a criterion nobody discussed stays "to observe" instead of counting as missed.
    """
    lines = [f"# Interviewer notes for {result.submission} (seed {result.seed}).",
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
    if "\n" in text:
        return '"""\n' + text.replace("\\", "\\\\").replace('"""', '\\"""') + '"""'
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
