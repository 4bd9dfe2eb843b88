"""The Markdown report and the terminal summary, against golden files."""
import re

import click

from grader.render import markdown, terminal
from grader.render.common import for_candidate

from .render_helpers import assert_golden, saved_result

HIDDEN = ["decode_causal_mask(5, 11)", "T = 5", "T = 509", "seed = 0"]


def test_markdown_report_matches_golden():
    assert_golden(markdown.render(saved_result()), "report.md")


def test_markdown_report_says_what_a_reader_needs():
    text = markdown.render(saved_result())
    assert text.startswith("# kvgrade report: `candidates/ada`\n\n**Overall: weak**")
    assert "| `tree_mask` Tree attention mask for speculative drafts | **no level** | - | not attempted |" in text
    assert "kvgrade grade candidates/ada -e decode_mask --seed 0 --check random_shapes --feedback detail" in text
    assert "  0  #######....  #..........  .XXXXXX...." in text  # the random_shapes picture
    assert "*Listen for:*" in text and "**Error:** SyntaxError" in text
    assert text.count("```text") == text.count("```") // 2  # every fence is closed


def test_candidate_markdown_hides_hidden_inputs_and_the_interviewer_side():
    text = markdown.render(for_candidate(saved_result()))
    for secret in HIDDEN + ["```", "reproduce:", "Listen for", "to observe"]:
        assert secret not in text
    assert "`random_shapes`: Random T > 1 over S keys" in text  # what the check tries stays
    assert "`top_left_alignment`: The prefill triangle sliced to T rows" in text
    assert "weak" not in text and "level" not in text  # levels hidden unless the interviewer shows them
    shown = markdown.render(for_candidate(saved_result(), show_levels=True))
    assert "`top_left_alignment` (caps at weak): The prefill triangle sliced to T rows" in shown


def test_candidate_text_cannot_become_markdown():
    """Raw HTML, links and fake headings in a candidate's message stay text on their line."""
    result = saved_result()
    check = next(c for c in result.exercise("decode_mask").checks if not c.passed)
    check.message = ("oops\n# Overall: strong hire\n<img src=x onerror=alert(1)> "
                     "[click](javascript:alert(1)) a | b `x` **Overall: strong_hire** ~~weak~~ "
                     "https://appeal.example.com www.appeal.example.com")
    text = markdown.render(result)
    line = next(l for l in text.splitlines() if "oops" in l)
    assert line.startswith("  - what happened: oops")
    assert "\\<img" in line and "\\[click\\](javascript\\:" in line and "a \\| b" in line
    # red team 5: emphasis, strikethrough and GFM autolinks stay text too
    assert "\\*\\*Overall\\: strong\\_hire\\*\\*" in line and "\\~\\~weak\\~\\~" in line
    assert "https\\://appeal" in line and "www\\.appeal" in line
    assert not any(l.startswith("# Overall") for l in text.splitlines())
    assert "<img" not in text.replace("\\<img", "")


def test_terminal_summary_matches_golden_without_colour():
    plain = click.unstyle(terminal.summary(saved_result()))
    assert_golden(plain, "report_terminal.txt")
    assert "\x1b[" in terminal.summary(saved_result())  # click styles it for a TTY


def test_terminal_summary_for_a_candidate_shows_descriptions_only():
    plain = click.unstyle(terminal.summary(for_candidate(saved_result())))
    assert "x random_shapes: Random T > 1 over S keys" in plain
    assert not any(secret in plain for secret in HIDDEN + ["rerun:"])
    assert not re.search(r"^\s+\d+\s+[#.]+\s", plain, re.M)  # no picture
