"""Whatever a child sends back, a result holds plain data and every renderer copes with it.

The fuzzer drives the path a reply takes: into a check's message, case and picture, through the
result model, then out through every format (JSON, HTML, Markdown, terminal, JUnit, Gradescope)
and back in through ``Result.from_dict``. It is seeded (derandomized), so it runs the same
examples each time.
"""
import copy
import os
import json
import re
import xml.etree.ElementTree as ET

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grader import catalog
from grader.checking import grid_picture
from grader.cli import main
from grader.render import gradescope, html, junit, markdown, terminal
from grader.render.common import for_candidate
from grader.result import CheckResult, Diagnosis, Result, plain

from .render_helpers import saved_result

FUZZ = settings(derandomize=True, max_examples=25, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
STYLE = re.compile("\x1b\\[[0-9;]*m")  # the terminal summary's own colours (click.style)
RAW_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200b]")

# every dtype the wire carries (npy bytes of any non-object dtype), and text with every kind of
# character, surrogates and controls included
DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint64", "float16", "float32", "float64",
          "complex64", "complex128", "<U4", "S3", "datetime64[s]"]
texts = st.text(st.characters(blacklist_categories=()), max_size=40)
arrays = hnp.arrays(st.sampled_from(DTYPES), hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5))
huge = st.sampled_from([(10**6, 10**5), (3,) * 30]).map(lambda shape: np.broadcast_to(np.float32(np.nan), shape))
scalars = st.one_of(
    st.sampled_from(DTYPES[:12]).flatmap(lambda d: hnp.from_dtype(np.dtype(d))), st.integers(),
    st.builds(pow, st.just(10), st.just(5000)),  # too long for str(): built, so no repr is needed
    st.sampled_from([-(2**64), float("nan"), float("inf"), -float("inf"), np.float64("nan"), np.int32(7)]),
    st.floats(), st.booleans(), st.none(), texts)
replies = st.recursive(st.one_of(scalars, arrays, huge),
                       lambda inner: st.one_of(st.lists(inner, max_size=80), st.tuples(inner, inner),
                                               st.dictionaries(st.one_of(texts, st.integers()), inner, max_size=6)),
                       max_leaves=30)


@st.composite
def pictures(draw):
    """What a picture can be built from: a real grid_picture of a reply, or a dict made of replies."""
    if draw(st.booleans()):
        shape = draw(hnp.array_shapes(min_dims=2, max_dims=2, min_side=1, max_side=70))
        want = np.ones(shape, bool)
        got = draw(hnp.arrays(st.sampled_from(["bool", "int8", "int64", "float32", "uint8"]), shape))
        with np.errstate(all="ignore"):
            return grid_picture(want, np.nan_to_num(got).astype(np.int64) % 3, draw(texts))
    return {"kind": "grid", "title": draw(replies), "shape": draw(replies), "origin": draw(replies),
            "expected": draw(replies), "submitted": draw(replies), "labels": draw(replies)}


def hostile_result(reply, picture, words) -> Result:
    """The saved top-left result with one failing check and one diagnosis built from the reply."""
    result = saved_result()
    e = result.exercises[0]
    e.checks[0] = CheckResult("plain_decode", False, message=f"returned {words}", description=words,
                              case={"got": reply, words: reply, "T": np.int32(7)}, picture=picture, kind="wrong")
    e.diagnoses.append(Diagnosis("top_left_alignment", words))
    e.error, e.notes, e.module = words, words, words
    e.own_tests = {"caught": [reply], "missed": [words], "score": np.float32(0.5)}
    e.timeline = {"points": reply, "hints_seen": np.int64(2)}
    result.submission, result.skipped_links, result.session = words, [words, reply], {"started": reply}
    return result


def is_plain(value) -> bool:
    if isinstance(value, dict):
        return all(isinstance(k, str) and is_plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(is_plain(v) for v in value)
    if isinstance(value, float):
        return np.isfinite(value)
    return value is None or type(value) in (bool, int, str)


def every_format(result: Result) -> dict[str, str]:
    return {"json": json.dumps(result.to_dict(), allow_nan=False), "html": html.render(result),
            "markdown": markdown.render(result), "terminal": terminal.summary(result),
            "junit": junit.render(result), "gradescope": json.dumps(gradescope.render(result), allow_nan=False)}


@FUZZ
@given(reply=replies, picture=pictures(), words=texts)
def test_any_reply_renders_in_every_format_and_reads_back(reply, picture, words):
    result = hostile_result(reply, picture, words)
    data = result.to_dict()
    assert is_plain(data)
    for shown in (result, for_candidate(result), for_candidate(result, show_levels=True)):
        outputs = every_format(shown)
        ET.fromstring(outputs["junit"])
        for name, text in outputs.items():
            assert not RAW_CONTROLS.search(STYLE.sub("", text)), name
            assert len(text) < 2_000_000, name  # bounded, however large the reply
    again = Result.from_dict(json.loads(json.dumps(data)))
    assert again.to_dict() == data


@FUZZ
@given(reply=replies)
def test_plain_is_json_and_a_fixed_point(reply):
    value = plain(reply)
    assert is_plain(value)
    assert plain(value) == value  # made plain once, it stays the same: a saved result reads back unchanged
    json.dumps(value, allow_nan=False)


def test_each_kind_of_value_is_made_plain():
    assert plain({"T": np.int32(7), 3: np.bool_(True), "x": np.float16(0.5)}) == {"T": 7, "3": True, "x": 0.5}
    assert plain([float("nan"), np.float32("-inf"), 10**400]) == ["nan", "-inf", "an integer of 1329 bits"]
    assert plain(np.arange(4, dtype=np.uint8)) == [0, 1, 2, 3]
    assert plain(np.broadcast_to(np.float32(0), (10**6, 10**5))) == "a float32 array of shape (1000000, 100000)"
    assert plain("evil\x1b[2K\u202e") == "evil\\u001b[2K\\u202e"
    assert plain(list(range(100)))[-1] == "... and 36 more"
    deep = []
    for _ in range(20):
        deep = [deep]
    assert "nested too deep" in json.dumps(plain(deep))


def test_a_picture_that_cannot_be_drawn_is_dropped_and_a_good_one_kept():
    good = grid_picture(np.eye(3, dtype=bool), np.ones((3, 3), np.int32), "t")
    assert CheckResult("c", False, picture=copy.deepcopy(good)).picture == good
    for bad in ({**good, "expected": [[np.nan]]}, {**good, "shape": [3]}, {**good, "labels": {"1": "##"}},
                {**good, "submitted": [[1] * 1000]}, [1, 2], "picture"):
        assert CheckResult("c", False, picture=bad).picture is None


@pytest.mark.slow  # grades a submission through the real CLI
def test_a_wrong_answer_with_numpy_values_in_its_case_grades_and_saves(tmp_path):
    """24.1: a tree mask memoised by parents, forgetting P, made json.dump fail on an int32 in a case."""
    reference = (catalog.KIT_ROOT / "solutions" / "tree_mask.py").read_text()
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "tree_mask.py").write_text(reference + (
        "\n_memo, _right = {}, tree_attention_mask\n\n\n"
        "def tree_attention_mask(parents, P):\n"
        "    key = tuple(int(p) for p in parents)\n"
        "    if key not in _memo:\n"
        "        _memo[key] = _right(parents, P)\n"
        "    return _memo[key].copy()\n"))
    out = {name: tmp_path / name for name in ("r.json", "r.html", "r.md", "r.xml", "g.json")}
    done = CliRunner().invoke(main, ["grade", str(tmp_path / "sub"), "-e", "tree_mask", "--json", str(out["r.json"]),
                                     "--html", str(out["r.html"]), "--markdown", str(out["r.md"]),
                                     "--junit", str(out["r.xml"]), "--gradescope", str(out["g.json"])])
    assert done.exit_code == 0, done.output
    data = json.loads(out["r.json"].read_text())
    assert data["overall"]["level"] == "weak" and is_plain(data)
    assert CliRunner().invoke(main, ["report", str(out["r.json"])]).exit_code == 0


# -- candidate text is inert in every format, one test per field -------------------------------

EVIL = "<img src=x onerror=alert(1)> [click](javascript:alert(1)) <javascript:alert(2)> ![i](javascript:x) # h"


def _put(field):
    def put(result):
        e = result.exercises[0]
        check = next(c for c in e.checks if not c.passed)
        {"submission": lambda: setattr(result, "submission", f"/tmp/{EVIL}/sub"),
         "title": lambda: setattr(e, "title", EVIL),
         "module": lambda: setattr(e, "module", f"/tmp/{EVIL}/decode_mask.py"),
         "error": lambda: setattr(result.exercises[2], "error", EVIL),
         "notes": lambda: setattr(e, "notes", f"{EVIL}\n{EVIL}"),
         "check message": lambda: setattr(check, "message", EVIL),
         "case value": lambda: setattr(check, "case", {"T": EVIL}),
         "case key": lambda: setattr(check, "case", {EVIL: 1}),
         "picture title": lambda: check.picture.update(title=EVIL),
         "diagnosis": lambda: setattr(e.diagnoses[0], "message", EVIL),
         "own tests": lambda: setattr(e, "own_tests", {"score": 0.5, "caught": [EVIL], "missed": [EVIL],
                                                       "set_aside": [EVIL]}),
         "timeline": lambda: setattr(e, "timeline", {"points": [[1, 2, 3]], "diagnoses": [{"id": EVIL, "at": EVIL}]}),
         "session": lambda: setattr(result, "session", {"started": EVIL, "kept_by": EVIL}),
         "skipped links": lambda: setattr(result, "skipped_links", [EVIL]),
         }[field]()
        return result
    return put


FIELDS = ["submission", "title", "module", "error", "notes", "check message", "case value", "case key",
          "picture title", "diagnosis", "own tests", "timeline", "session", "skipped links"]


def markdown_markup(text: str) -> list[str]:
    """What CommonMark would read as markup in ``text``: raw HTML or autolinks (an unescaped
    ``<``), and links, images or references (unescaped ``[...]`` then ``(``, ``[`` or ``:``),
    outside code spans and fences."""
    text = re.sub(r"(?ms)^( *)(`{3,})text\n.*?^\1\2$", "", text)  # fenced blocks: literal
    text = re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", text)  # code spans: literal
    return re.findall(r"(?<!\\)<[A-Za-z/!?]|(?<!\\)\[(?:[^\]\\]|\\.)*(?<!\\)\]\s*[(\[:]", text)


class _Elements(__import__("html.parser").parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.bad = []

    def handle_starttag(self, tag, attrs):
        if tag in ("img", "script", "iframe", "object") or \
                any(k.startswith("on") or (v or "").strip().lower().startswith("javascript:") for k, v in attrs):
            self.bad.append((tag, attrs))


@pytest.mark.parametrize("field", FIELDS)
def test_candidate_text_is_inert_in_every_format(field):
    result = _put(field)(saved_result())
    assert EVIL.split(">")[0][1:] in json.dumps(every_format(result)), "the field was not rendered anywhere"
    md = markdown.render(result)
    assert markdown_markup(md) == [], md
    page = _Elements()
    page.feed(html.render(result))
    assert page.bad == []
    ET.fromstring(junit.render(result))


def test_the_markup_finders_find_markup():
    """The two finders above would catch a raw field: they are not empty by construction."""
    assert len(markdown_markup(f"x {EVIL} `<b>` [ ] done")) == 4  # <img, [click](, <javascript:, [i](
    page = _Elements()
    page.feed('<p><img src=x onerror="alert(1)"><a href="javascript:x">y</a></p>')
    assert len(page.bad) == 2


def batch_rows(evil_link: str) -> list[dict]:
    return [{"rank": 1, "name": EVIL, "level": "hire", "provisional": False, "to_observe": 0, "score": 0.5,
             "exercises": {"decode_mask": {"level": "hire", "status": "graded", "provisional": False,
                                           "required": True, "checks": "3/4"}},
             "report": evil_link, "error": None},
            {"rank": 2, "name": "broken", "level": None, "provisional": False, "score": 0.0, "exercises": {},
             "report": None, "error": EVIL}]


@pytest.mark.parametrize("link", ["javascript:alert(1)", "x/report.html\" onclick=\"alert(1)", "ok/report.html"])
def test_batch_names_errors_and_report_links_are_inert(link):
    rows = batch_rows(link)
    summary = markdown.batch_summary(rows, ["decode_mask"], 0)
    assert markdown_markup(summary.replace("[report](ok/report.html)", "")) == []
    page = _Elements()
    page.feed(html.render_batch(rows, f"kvgrade batch: {EVIL}", 0, ["decode_mask"]))
    assert page.bad == []
    assert ('href="ok/report.html"' in html.render_batch(rows, "t", 0, ["decode_mask"])) == (link == "ok/report.html")


@pytest.mark.slow  # grades a submission three times through the real CLI
def test_the_replay_line_reproduces_a_failure_that_depends_on_earlier_calls(tmp_path):
    """24.10: a module with state across calls (right for its first 12 calls, top-left after) fails
    incremental_attention in the full run and passes it alone; the report's replay line, which runs
    the checks before it in the same order, fails it the same way."""
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "decode_mask.py").write_text((catalog.KIT_ROOT / "solutions" / "decode_mask.py").read_text() + (
        "\n_calls, _right = [0], decode_causal_mask\n\n\n"
        "def decode_causal_mask(T, S):\n"
        "    _calls[0] += 1\n"
        "    mask = _right(T, S)  # validates\n"
        "    return mask if _calls[0] <= 12 else np.tril(np.ones((T, S), dtype=bool))\n"))
    page = tmp_path / "r.md"
    assert CliRunner().invoke(main, ["grade", str(sub), "-e", "decode_mask", "--markdown", str(page)]).exit_code == 0
    lines = page.read_text().splitlines()
    rerun = next(line for line in lines if "--check incremental_attention --feedback" in line and "reproduce" in line)
    replay = next(line for line in lines if "replays those calls" in line)

    def outcome(line):
        done = CliRunner().invoke(main, [*line.split("`")[-2].split()[1:], "--json", "-"])
        assert done.exit_code == 0, done.output
        return {c["id"]: c["passed"] for c in json.loads(done.output)["exercises"][0]["checks"]}

    assert outcome(rerun) == {"incremental_attention": True}  # alone it passes: why the replay line exists
    replayed = outcome(replay)
    assert replayed["incremental_attention"] is False
    assert replayed["same_answer_in_any_order"] is False  # the general rule sees the state too


@pytest.mark.parametrize("kind", ["fifo", "device", "huge_int"])
def test_a_result_or_notes_file_of_any_kind_is_one_line_and_exit_2(tmp_path, kind):
    """Red team 14: report and --notes read any file whole: a FIFO hung, /dev/zero grew without end, and a
    401-digit number overflowed math.isfinite into a traceback. Both now read through plainfile, under a cap."""
    good = tmp_path / "good.json"
    good.write_text(json.dumps(saved_result().to_dict()))
    if kind == "fifo":
        os.mkfifo(tmp_path / "planted")
        bad = str(tmp_path / "planted")
    elif kind == "device":
        bad = "/dev/zero"
    else:
        data = json.loads(good.read_text())
        data["exercises"][0]["checks"][0]["seconds"] = int("9" * 401)
        (tmp_path / "huge.json").write_text(json.dumps(data))
        bad = str(tmp_path / "huge.json")
    for args in (["report", bad], *([] if kind == "huge_int" else [["report", str(good), "--notes", bad]])):
        done = CliRunner().invoke(main, args)
        assert done.exit_code in (0, 2), done.output  # shown, or refused in one line: never a traceback
        assert done.exception is None or isinstance(done.exception, SystemExit), repr(done.exception)
        if kind != "huge_int":
            assert done.exit_code == 2 and "not a regular file" in done.output, done.output


def test_a_result_repeating_an_exercise_is_refused_in_one_line(tmp_path):
    """Red team 26: 3000 copies of one exercise in a 51 MiB result took report 2.5 minutes and 685 MB; one
    grading holds each exercise once, so a repeat is not a result."""
    data = saved_result().to_dict()
    data["exercises"] = data["exercises"] * 3
    bad = tmp_path / "repeated.json"
    bad.write_text(json.dumps(data))
    done = CliRunner().invoke(main, ["report", str(bad)])
    assert done.exit_code == 2 and "repeats the exercise" in done.output and "\n" not in done.output.strip()


@given(st.text())
@settings(max_examples=300, deadline=None, derandomize=True)
def test_any_note_text_reads_back_from_the_notes_template_as_itself(text):
    """Red team 14: a multi-line note ending in four quotes made notes.toml unreadable; a control character
    did too. Every text now reads back as itself."""
    import tomllib

    from grader.notes import _toml_string
    assert tomllib.loads("note = " + _toml_string(text))["note"] == text
