"""One self-contained HTML report (inline CSS and SVG, no network), rendered with Jinja."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import jinja2
from markupsafe import Markup

from ..result import Result, plural
from . import interview, pictures
from .common import (CRITERION_MARKS, NOT_ISOLATED, REPLAY_NOTE, case_text, caveats, exercise_level, explanation,
                     failure_parts, level_word, levels_shown, overall_level, own_tests_text, replay, report_link,
                     run_notes, shows_detail, status_text)

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)),
                             autoescape=jinja2.select_autoescape(["html", "html.j2"]),
                             trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)
    env.filters["level"] = level_word
    env.filters["case"] = case_text
    env.filters["level_letter"] = lambda level: {"strong_hire": "S", "hire": "H", "weak": "W"}.get(level, "?")
    env.filters["short_id"] = short_id
    env.filters["own_tests"] = own_tests_text
    env.globals.update(status_text=status_text, criterion_mark=CRITERION_MARKS, caveats=caveats,
                       report_link=report_link, not_isolated=NOT_ISOLATED, run_notes=run_notes, replay_note=REPLAY_NOTE,
                       picture_svg=lambda p: Markup(pictures.svg(p)),
                       picture_legend=pictures.svg_legend, picture_extent=pictures.extent,
                       differing_cells=pictures.differing_cells, exercise_level=exercise_level,
                       overall_level=overall_level, explanation=explanation, plural=plural)
    env.globals.update(timeline_svg=lambda e: Markup(interview.timeline_svg(e)),
                       timeline_lines=interview.timeline_lines, diagnoses_met=interview.diagnoses_met,
                       session_lines=interview.session_lines, points=interview.points, hint_cost=_hint_cost)
    return env


def _hint_cost(caps) -> str:
    from ..interview import cost

    return cost(caps) if caps in ("weak", "hire", "strong_hire") else ""


def render(result: Result) -> str:
    template = environment().get_template("report.html.j2")
    return template.render(result=result, detail=shows_detail(result), levels=levels_shown(result), css=Markup(_css()),
                           failure_parts=lambda e, c: failure_parts(result, e.id, c),
                           replay=lambda e: replay(result, e),
                           hints_of=lambda e: interview.hint_lines(e, not shows_detail(result),
                                                                   interview.hint_workspace(result, e)))


def short_id(exercise_id: str, width: int = 24) -> str:
    """An exercise id short enough for a rotated column head: words cut to their first letters
    from the left until it fits (``ring_buffer_window`` -> ``r_b_window``)."""
    words = exercise_id.split("_")
    for i in range(len(words)):
        short = "_".join([w[0] for w in words[:i]] + words[i:])
        if len(short) <= width:
            return short
    return short[:width - 1] + "…"


def render_batch(rows: list[dict], title: str, seed: int, exercises: list[str]) -> str:
    """The ranking table of a batch, each row linking to its candidate's report."""
    template = environment().get_template("batch.html.j2")
    return template.render(rows=rows, title=title, seed=seed, exercises=exercises, css=Markup(_css()))


@lru_cache(maxsize=1)
def _css() -> str:
    return (TEMPLATES / "report.css").read_text()
