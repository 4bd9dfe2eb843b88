"""Grade many submissions (one folder per candidate) in parallel, and rank them.

Each submission is graded in a worker process of its own pool slot; whatever goes wrong with
one (a missing folder, a grader crash, a dead worker) becomes that candidate's row with the
error, and the batch goes on. Every candidate gets ``OUT/<name>/`` with ``result.json``,
``report.html`` and ``report.md``; ``OUT/index.html`` and ``OUT/summary.md`` rank them.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import re
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


def _names(paths: list[Path]) -> list[str]:
    names, seen = [], {}
    for path in paths:
        base = re.sub(r"[^A-Za-z0-9._-]+", "_", path.name) or "submission"
        seen[base] = seen.get(base, 0) + 1
        names.append(base if seen[base] == 1 else f"{base}-{seen[base]}")
    return names


def grade_many(paths: list[Path], out: str | Path, exercise_ids: list[str] | None = None, seed: int = 0,
               feedback: str = "detail", jobs: int | None = None, on_done=None) -> list[dict]:
    """Grade every path into ``out``; returns the rows, ranked (best first, broken ones last)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(paths) or 1))
    rows = []
    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(grade_one, str(path), str(out / name), name, exercise_ids, seed, feedback):
                   (name, path) for name, path in zip(_names(paths), paths)}
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
    return {"name": name, "path": str(path), "level": None, "provisional": False, "score": 0.0, "exercises": {},
            "report": None, "error": error, "seconds": 0.0}


def grade_one(path: str, out: str, name: str, exercise_ids, seed: int, feedback: str) -> dict:
    """Grade one submission and write its reports (runs in a worker process)."""
    from .engine import grade
    from .render import html, markdown
    from .render.common import for_candidate

    try:
        result = grade(path, exercise_ids, seed=seed)
    except Exception as exc:
        return _broken(name, path, f"{type(exc).__name__}: {exc}")
    if feedback == "summary":
        result = for_candidate(result)
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "result.json").write_text(json.dumps(result.to_dict(), indent=2))
    (folder / "report.html").write_text(html.render(result))
    (folder / "report.md").write_text(markdown.render(result))
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
    from .render import html
    from .render.common import level_phrase, level_word

    (out / "index.html").write_text(html.render_batch(rows, f"kvgrade batch: {out}", seed, exercise_ids))
    head = ["rank", "candidate", "overall", *exercise_ids, "checks passed", "report"]
    lines = [f"# kvgrade batch ({len(rows)} submissions, seed {seed})", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        per = [_exercise_cell(r["exercises"].get(e), level_word) for e in exercise_ids]
        overall = (f"broken: {r['error']}" if r["error"] else
                   f"**{level_phrase(r['level'], r.get('provisional'), range(r.get('to_observe', 0)))}**")
        report = f"[report]({r['report']})" if r["report"] else "-"
        cells = [str(r["rank"]), f"`{r['name']}`", overall.replace("|", "\\|"), *per, f"{r['score']:.0%}", report]
        lines.append("| " + " | ".join(cells) + " |")
    (out / "summary.md").write_text("\n".join(lines) + "\n")


def _exercise_cell(entry: dict | None, level_word) -> str:
    if entry is None:
        return "-"
    if entry["status"] == "not_attempted":
        return "not attempted" + (" (weak: required)" if entry.get("required") else "")
    return level_word(entry["level"]) + (" (error)" if entry["status"] == "error" else "")
