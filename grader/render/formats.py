"""Every output format by name, and the one rule of what a reader sees: summary feedback is
redacted before it is rendered, and a student-facing format (Gradescope) is summary unless
detail is asked for. Results arrive neutralised (``engine.grade``, ``api.load``)."""
from __future__ import annotations

import json

from ..result import Result
from .common import for_candidate

FORMATS = ("json", "html", "markdown", "junit", "gradescope")
STUDENT_FACING = ("gradescope",)  # read by the candidate: summary feedback unless detail is asked for


def shown(result: Result, feedback: str | None = None, show_levels: bool = False, fmt: str = "") -> Result:
    """The result as this reader may see it: redacted for summary feedback."""
    summary = feedback == "summary" or (feedback is None and fmt in STUDENT_FACING)
    return for_candidate(result, show_levels) if summary else result


def render(result: Result, fmt: str, feedback: str | None = None, show_levels: bool = False) -> str:
    """``result`` as the text of format ``fmt`` (one of FORMATS), redacted as ``feedback`` says."""
    from . import gradescope, html, junit, markdown  # html pulls in jinja2: only when asked

    writers = {"json": lambda r: json.dumps(r.to_dict(), indent=2), "html": html.render,
               "markdown": markdown.render, "junit": junit.render,
               "gradescope": lambda r: json.dumps(gradescope.render(r), indent=2)}
    if fmt not in writers:
        raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
    return writers[fmt](shown(result, feedback, show_levels, fmt))
