"""Interviewer notes: which observed criteria were met, and free text, per exercise.

A TOML file such as::

    [decode_mask]
    notes = "Derived the offset from positions; needed a hint on T = 1."

    [decode_mask.observed]
    explains_why_decode_hides_the_bug = true
    names_library_conventions = false
"""
from __future__ import annotations

import tomllib
from pathlib import Path


class NotesError(Exception):
    pass


class Notes:
    def __init__(self, data: dict):
        self.data = data

    @classmethod
    def load(cls, path: str | Path) -> "Notes":
        try:
            with open(path, "rb") as fh:
                data = tomllib.load(fh)
        except OSError as exc:
            raise NotesError(f"cannot read notes file {path}: {exc.strerror}") from None
        except tomllib.TOMLDecodeError as exc:
            raise NotesError(f"notes file {path} is not valid TOML: {exc}") from None
        for key, section in data.items():
            if not isinstance(section, dict):
                raise NotesError(f"notes file {path}: [{key}] should be a table for one exercise")
            observed = section.get("observed", {})
            if not isinstance(observed, dict) or not all(isinstance(v, bool) for v in observed.values()):
                raise NotesError(f"notes file {path}: [{key}.observed] should map criteria to true/false")
        return cls(data)

    def observed(self, exercise_id: str) -> dict[str, bool]:
        return dict(self.data.get(exercise_id, {}).get("observed", {}))

    def text(self, exercise_id: str) -> str:
        return str(self.data.get(exercise_id, {}).get("notes", ""))
