"""Interviewer-facing output: nothing a candidate writes can steer a terminal, a report or a batch."""
import json
import xml.etree.ElementTree as ET

import pytest
from click.testing import CliRunner

from grader import catalog
from grader.cli import main

# OSC 52 (write the clipboard), erase line plus a fake green verdict, a bidi override, a zero-width
# space, a C1 control and non-characters (XML forbids U+FFFE/U+FFFF: red team 10 broke the JUnit
# file with them): each must reach no output as the raw character.
EVIL = ("\x1b]52;c;ZXZpbA==\x07\x1b[2K\r\x1b[32mstrong hire\x1b[0m \u202eevil\u202c zero\u200bwidth \x85c1"
        " non\uffffchar\ufffe \U0010fffe")
RAW = ["\x1b", "\x07", "\r", "\u202e", "\u202c", "\u200b", "\x85", "\uffff", "\ufffe", "\U0010fffe"]


def run(*args, ok=True):
    out = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    if ok:
        assert out.exit_code == 0, out.output
    return out


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """decode_mask raises with the escapes on every call; tree_mask fails to import with them."""
    root = tmp_path_factory.mktemp("hostile")
    (root / "decode_mask.py").write_text(f"def decode_causal_mask(T, S):\n    raise RuntimeError({EVIL!r})\n")
    (root / "tree_mask.py").write_text(f"raise ImportError({EVIL!r})\n")
    return root


@pytest.mark.slow  # whole gradings: the full suite runs it, the fast loop stays under a minute
def test_candidate_escapes_reach_no_output_as_raw_characters(hostile, tmp_path):
    files = {name: tmp_path / name for name in ("r.json", "r.html", "r.md", "j.xml")}
    terminal = run("grade", "--seed", "0", hostile, "-e", "decode_mask,tree_mask", "--json", files["r.json"],
                   "--html", files["r.html"], "--markdown", files["r.md"], "--junit", files["j.xml"]).output
    texts = {"terminal": terminal, **{name: path.read_text() for name, path in files.items()}}
    texts["report"] = run("report", files["r.json"]).output
    for name, text in texts.items():
        for raw in RAW:
            assert raw not in text, (name, repr(raw))
    assert "\\u001b]52;c;" in terminal and "\\u202eevil" in terminal  # shown, as visible escapes
    ET.parse(files["j.xml"])  # control characters or U+FFFF would make the XML invalid
    data = json.loads(files["r.json"].read_text())
    assert {e["id"]: e["status"] for e in data["exercises"]} == {"decode_mask": "graded", "tree_mask": "error"}


@pytest.mark.slow  # grades several submissions in full
def test_batch_names_are_unique_and_stable(tmp_path):
    folder = tmp_path / "candidates"
    names = ("alice smith", "alice_smith", "alice_smith-2")  # the last is what a counter would call the second
    for name in names:
        (folder / name).mkdir(parents=True)
        for module in ("decode_mask.py", "test_decode_mask.py"):
            (folder / name / module).write_text((catalog.KIT_ROOT / "solutions" / module).read_text())
    for name in names[:2]:
        (folder / name / "decode_mask.py").write_text("def decode_causal_mask(T, S):\n    return None\n")
    outs = []
    for run_number in (1, 2):
        out = tmp_path / f"out{run_number}"
        run("batch", "--seed", "0", folder, "-e", "decode_mask", "--out", out, "--jobs", "1")
        outs.append(sorted(p.name for p in out.iterdir() if p.is_dir()))
    assert outs[0] == outs[1] and len(outs[0]) == 3  # one folder each, the same names each time
    levels = sorted(json.loads((tmp_path / "out1" / name / "result.json").read_text())["overall"]["level"]
                    for name in outs[0])
    assert levels == ["strong_hire", "weak", "weak"]  # no report overwrote another


@pytest.mark.slow
def test_grading_other_peoples_code_refuses_the_process_level(tmp_path, monkeypatch):
    monkeypatch.setenv("KVGRADE_ISOLATION", "process")
    monkeypatch.chdir(tmp_path)
    solutions = catalog.KIT_ROOT / "solutions"
    for command in (["batch", solutions], ["grade", solutions, solutions]):
        out = CliRunner().invoke(main, [str(a) for a in command + ["-e", "decode_mask"]])
        assert out.exit_code == 2 and "apt-get install bubblewrap" in out.output and "--trust-submissions" in out.output
        assert "Traceback" not in out.output
    assert list(tmp_path.iterdir()) == []  # refused before anything was written
    trusted = run("batch", "--seed", "0", solutions, "-e", "decode_mask", "--out", tmp_path / "out",
                  "--trust-submissions")
    assert "strong hire" in trusted.output


@pytest.mark.slow
def test_grading_one_folder_unisolated_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("KVGRADE_ISOLATION", "process")
    page = tmp_path / "r.html"
    out = run("grade", "--seed", "0", catalog.KIT_ROOT / "solutions", "-e", "decode_mask", "--html", page)
    assert "not isolated: grade only code you trust" in out.output
    assert "isolation process" in page.read_text() and "Not isolated: grade only code you trust" in page.read_text()
