"""Grade many submissions (one folder per candidate) in parallel, and rank them.

Each submission is graded in a worker process of its own pool slot; whatever goes wrong with
one (a missing folder, a grader crash, a dead worker) becomes that candidate's row with the
error, and the batch goes on. Every candidate gets ``OUT/<name>/`` with ``result.json``,
``report.html`` and ``report.md``; ``OUT/index.html`` and ``OUT/summary.md`` rank them.
"""
from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import re
from collections import Counter
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from . import catalog
from .result import level_rank
from .submission import locate


def submissions(paths: list[str]) -> list[Path]:
    """The folders to grade: a path holding exercise modules is one submission; any other
    folder stands for its subfolders (one per candidate). Anything else is kept, to be
    reported as broken rather than silently dropped."""
    ids = [e.id for e in catalog.exercises()]
    found = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir() and not any(locate(path, eid) for eid in ids):
            found += sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
        else:
            found.append(path)
    return found


def names(paths: list[Path]) -> list[str]:
    """A folder name per submission, unique and stable: a name that is already safe and shared
    with no other submission is kept; any other gets a short digest of its full path, so
    "alice smith" and "alice_smith" never write into one folder, whatever the order."""
    bases = [re.sub(r"[^A-Za-z0-9._-]+", "_", p.name).lstrip(".") or "submission" for p in paths]
    counts = Counter(bases)
    return [base if base == path.name and counts[base] == 1 else f"{base}-{_digest(path)}"
            for base, path in zip(bases, paths)]


def _digest(path: Path) -> str:
    return hashlib.sha256(str(path.absolute()).encode()).hexdigest()[:8]


def grade_many(paths: list[Path], out: str | Path, exercise_ids: list[str] | None = None, seed: int = 0,
               feedback: str = "detail", jobs: int | None = None, on_done=None,
               show_levels: bool = False) -> list[dict]:
    """Grade every path into ``out``; returns the rows, ranked (best first, broken ones last)."""
    out = Path(out)
    out.mkdir(exist_ok=True)  # its parent must exist: the CLI checked it
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(paths) or 1))
    rows = []
    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(grade_one, str(path), str(out / name), name, exercise_ids, seed, feedback, show_levels):
                   (name, path) for name, path in zip(names(paths), paths)}
        for future in as_completed(futures):
            name, path = futures[future]
            try:
                row = future.result()
            except Exception as exc:  # the worker itself died: still one row, never the batch
                row = _broken(name, path, f"the grading worker failed: {type(exc).__name__}: {exc}")
            rows.append(row)
            if on_done:
                on_done(row)
    rows.sort(key=ranking)
    for rank, row in enumerate(rows, 1):
        row["rank"] = rank
    write_summaries(rows, out, exercise_ids or sorted({e for r in rows for e in r["exercises"]}), seed)
    return rows


def ranking(row: dict) -> tuple:
    """Best first: level, then confirmed before provisional, then the share of checks passed
    over all counted exercises (a required one not attempted adds 0); broken rows last."""
    return (row["error"] is not None, -level_rank(row["level"]), bool(row.get("provisional")),
            -row["score"], row["name"])


def _broken(name: str, path, error: str) -> dict:
    from .render.common import neutral

    return {"name": name, "path": neutral(str(path)), "level": None, "provisional": False, "score": 0.0,
            "exercises": {}, "report": None, "error": neutral(error), "seconds": 0.0}


def grade_one(path: str, out: str, name: str, exercise_ids, seed: int, feedback: str,
              show_levels: bool = False) -> dict:
    """Grade one submission and write its reports (runs in a worker process).

    The row is the interviewer's and comes from the full result; the reports follow ``feedback``.
    """
    from .engine import grade
    from .render import html, markdown
    from .render.common import for_candidate, neutralized

    try:
        result = neutralized(grade(path, exercise_ids, seed=seed))
    except Exception as exc:
        return _broken(name, path, f"{type(exc).__name__}: {exc}")
    shown = for_candidate(result, show_levels) if feedback == "summary" else result
    folder = Path(out)
    folder.mkdir(exist_ok=True)
    (folder / "result.json").write_text(json.dumps(shown.to_dict(), indent=2))
    (folder / "report.html").write_text(html.render(shown))
    (folder / "report.md").write_text(markdown.render(shown))
    errors = [f"{e.id}: {e.error}" for e in result.exercises if e.status == "error"]
    return {"name": name, "path": path, "level": result.overall_level, "score": result.score,
            "provisional": result.overall_provisional, "to_observe": len(result.overall_to_observe),
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
