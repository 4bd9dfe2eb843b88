"""JUnit XML and Gradescope results.json: their structure, their counts, and golden files."""
import json
import re
import xml.etree.ElementTree as ET

from grader.render import gradescope, junit
from grader.render.common import for_candidate

from .render_helpers import assert_golden, saved_result

COUNTS = ("tests", "failures", "errors", "skipped")


def test_junit_structure_and_counts_are_consistent():
    root = ET.fromstring(junit.render(saved_result()))
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["decode_mask", "tree_mask", "tile_classification"]
    for suite in suites:
        cases = suite.findall("testcase")
        assert int(suite.get("tests")) == len(cases)
        assert int(suite.get("failures")) == sum(c.find("failure") is not None for c in cases)
        assert int(suite.get("errors")) == sum(c.find("error") is not None for c in cases)
        assert int(suite.get("skipped")) == sum(c.find("skipped") is not None for c in cases)
        for case in cases:
            assert case.get("classname") == f"kvgrade.{suite.get('name')}" and case.get("name")
            assert float(case.get("time")) >= 0
            assert len([x for x in case if x.tag in ("failure", "error", "skipped")]) <= 1
    for key in COUNTS:
        assert int(root.get(key)) == sum(int(s.get(key)) for s in suites)
    assert [int(root.get(k)) for k in COUNTS] == [12, 6, 1, 1]


def test_junit_failure_carries_the_case_the_reproduce_line_and_the_picture():
    root = ET.fromstring(junit.render(saved_result()))
    case = root.find(".//testcase[@name='random_shapes']")
    failure = case.find("failure")
    assert failure.get("message").startswith("decode_causal_mask(5, 11) differs")
    assert "tried: T = 5, S = 11, seed = 0" in failure.text
    assert "--check random_shapes --feedback detail" in failure.text
    assert "#######...." in failure.text
    props = {p.get("name"): p.get("value") for p in root.find("testsuite").iter("property")}
    assert props["level"] == "weak" and "diagnosis.top_left_alignment" in props


def test_junit_matches_golden():
    assert_golden(junit.render(saved_result()), "report_junit.xml")


def test_gradescope_results_follow_the_autograder_format():
    data = gradescope.render(saved_result())
    json.dumps(data)
    assert set(data) >= {"score", "max_score", "tests", "output", "visibility"}
    for t in data["tests"]:
        assert set(t) == {"name", "score", "max_score", "status", "output", "visibility"}
        assert t["status"] in ("passed", "failed") and t["visibility"] == "visible"
        assert 0 <= t["score"] <= t["max_score"]
        assert (t["score"] == t["max_score"]) == (t["status"] == "passed")
    assert abs(data["score"] - sum(t["score"] for t in data["tests"])) < 1e-6
    assert data["max_score"] == 30.0  # 10 points per exercise in the result
    assert data["score"] == 4.0  # 4 of decode_mask's 10 checks; nothing for the others
    names = [t["name"] for t in data["tests"]]
    assert "decode_mask: random_shapes" in names and "tree_mask" in names


def test_gradescope_for_a_candidate_hides_hidden_inputs():
    text = json.dumps(gradescope.render(for_candidate(saved_result())))
    assert "decode_causal_mask(5, 11)" not in text and "--check" not in text and "T = 5" not in text


def test_gradescope_matches_golden():
    assert_golden(json.dumps(gradescope.render(saved_result()), indent=2) + "\n", "report_gradescope.json")


def test_hidden_levels_take_the_level_explanations_with_them_in_every_format():
    """What the levels work adds (provisional, why, what would raise it, hygiene, the level
    guide, "counts as weak") is level talk: summary feedback without --show-levels shows none of
    it, in any format; with --show-levels the provisional level is still said."""
    import click

    from grader.render import html, markdown, terminal

    result = saved_result()
    decode = result.exercise("decode_mask")
    decode.provisional, decode.to_observe = True, ["names_library_conventions"]
    result.exercise("tree_mask").required = True
    renders = {"terminal": lambda r: click.unstyle(terminal.summary(r)), "markdown": markdown.render,
               "html": html.render, "junit": junit.render, "gradescope": lambda r: json.dumps(gradescope.render(r))}
    level_talk = ["provisional", decode.reason, decode.to_raise, decode.hygiene, "What each level looks like",
                  "counts as weak"]
    assert all(level_talk)
    hidden, shown = for_candidate(result), for_candidate(result, show_levels=True)
    for name, render in renders.items():
        text = re.sub(r"<style>.*?</style>", "", render(hidden), flags=re.S)  # the stylesheet names every level
        assert not [talk for talk in level_talk if talk in text], name
        assert "strong hire" not in text and "weak" not in text, name
        assert "weak (provisional: 1 observation)" in render(shown), name
    assert "not attempted (required)" in renders["terminal"](hidden)
    assert "not attempted (required: counts as weak)" in renders["terminal"](shown)
    assert decode.reason in renders["terminal"](shown) and decode.to_raise in renders["markdown"](shown)
