"""`kvgrade batch` at scale, with the real command in a real process: a line per finished
submission as it finishes, and a resume after SIGINT or SIGTERM that grades only the rest."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader import catalog
from grader.batch import Manifest, files_digest

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = catalog.KIT_ROOT / "solutions" / "decode_mask.py"
TOP_LEFT = catalog.KIT_ROOT / "solutions" / "mutants" / "decode_mask" / "top_left.py"
CANDIDATES = [f"cand{i}" for i in range(5)]


def cohort(folder: Path, slow_seconds: float = 0.0) -> Path:
    """Correct submissions whose import sleeps: slow enough to interrupt a batch halfway."""
    source = f"import time\ntime.sleep({slow_seconds})\n" + REFERENCE.read_text()
    for name in CANDIDATES:
        (folder / name).mkdir(parents=True)
        (folder / name / "decode_mask.py").write_text(source)
    return folder


def batch_command(folder: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "grader", "batch", "--seed", "0", str(folder), "-e", "decode_mask", "--out", str(out),
            "--jobs", "1"]


def run_batch(folder: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(batch_command(folder, out), capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def recorded(out: Path) -> set[str]:
    try:
        return set(json.loads((out / Manifest.FILE).read_text())["entries"])
    except (OSError, ValueError):
        return set()  # not written yet


def verdict(line: str) -> str:
    """`[3/5] cand2  hire  73% of checks  (1.2 s)` -> `hire  73% of checks`."""
    return line.split("(")[0].split(maxsplit=2)[2].strip()


def streamed(stdout: str) -> dict[str, str]:
    """The per-submission lines: name -> the line."""
    lines = [line for line in stdout.splitlines() if line.startswith("[")]
    return {line.split()[1]: line for line in lines}


@pytest.mark.slow  # grades a cohort twice over
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_batch_resumes_and_grades_only_the_rest(tmp_path, signum):
    folder, out = cohort(tmp_path / "cohort", slow_seconds=1.0), tmp_path / "out"
    batch = subprocess.Popen(batch_command(folder, out), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 120
    while len(recorded(out)) < 2 and batch.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    batch.send_signal(signum)
    stdout, stderr = batch.communicate(timeout=120)
    assert batch.returncode == 130 and "run the same command again" in stderr, stderr
    assert "Traceback" not in stderr
    first = recorded(out)
    assert 2 <= len(first) < len(CANDIDATES) and set(streamed(stdout)) == first, stdout
    assert not (out / "summary.md").exists()  # no ranking of half a cohort

    resumed = run_batch(folder, out)
    assert resumed.returncode == 0, resumed.stderr
    lines = streamed(resumed.stdout)
    assert set(lines) == set(CANDIDATES)
    assert {n for n, line in lines.items() if "unchanged, not regraded" in line} == first
    before = streamed(stdout)
    assert all(verdict(lines[name]) == verdict(before[name]) for name in first)  # the recorded rows, reused
    summary = (out / "summary.md").read_text()
    assert all(f"`{name}`" in summary for name in CANDIDATES)


@pytest.mark.slow  # grades a cohort three times
def test_a_changed_submission_or_seed_is_graded_again(tmp_path):
    folder, out = cohort(tmp_path / "cohort"), tmp_path / "out"
    assert run_batch(folder, out).returncode == 0
    shutil.copyfile(TOP_LEFT, folder / "cand3" / "decode_mask.py")
    again = run_batch(folder, out)
    lines = streamed(again.stdout)
    assert [n for n, line in lines.items() if "unchanged" not in line] == ["cand3"]
    assert lines["cand3"].split()[2] == "weak"
    reseeded = subprocess.run(batch_command(folder, out) + ["--seed", "5"], capture_output=True, text=True,
                              timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert "unchanged" not in reseeded.stdout and len(streamed(reseeded.stdout)) == len(CANDIDATES)


def test_the_files_digest_sees_content_names_and_links_but_never_follows_them(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "decode_mask.py").write_text("x = 1\n")
    before = files_digest(tmp_path / "a")
    (tmp_path / "a" / "decode_mask.py").write_text("x = 2\n")
    changed = files_digest(tmp_path / "a")
    (tmp_path / "a" / "notes.txt").symlink_to("/etc/passwd")
    linked = files_digest(tmp_path / "a")
    os.mkfifo(tmp_path / "a" / "fifo")  # would block a reader that followed it
    assert len({before, changed, linked, files_digest(tmp_path / "a")}) == 4


def test_a_sparse_terabyte_is_fingerprinted_by_its_head_size_and_time_within_a_deadline(tmp_path):
    """Red team 10: the batch read every byte of a 1 TiB sparse file before grading anyone (hours)."""
    (tmp_path / "a").mkdir()
    big = tmp_path / "a" / "blob.bin"
    with open(big, "wb") as f:
        f.truncate(1 << 40)
    script = ("import sys\nfrom pathlib import Path\nfrom grader.batch import files_digest\n"
              "print(files_digest(Path(sys.argv[1])))")
    digests = []
    for change in (None, b"x", b"y"):  # the head's bytes count; so does the size
        if change == b"x":
            with open(big, "r+b") as f:
                f.write(change)
        elif change == b"y":
            with open(big, "ab") as f:
                f.write(change)
        done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "a")], capture_output=True, text=True,
                              timeout=60)  # a deadline, not a speed target: reading it all takes hours
        assert done.returncode == 0, done.stderr
        digests.append(done.stdout.strip())
    assert len(set(digests)) == 3 and "None" not in digests


@pytest.mark.slow
def test_a_cohort_folder_holds_candidate_folders_and_zips_never_links(tmp_path):
    """Batch's rule meets the submission rule: a folder without modules stands for what it holds,
    a subfolder or a .zip per candidate; a returned bundle (modules one folder down) is one."""
    reference = (catalog.KIT_ROOT / "solutions" / "decode_mask.py").read_bytes()
    cohort = tmp_path / "cohort"
    (cohort / "alice" / "bundle").mkdir(parents=True)  # unzipped, worked on: modules one folder down
    (cohort / "alice" / "bundle" / "decode_mask.py").write_bytes(reference)
    work = tmp_path / "bob-work" / "bundle"
    work.mkdir(parents=True)
    (work / "decode_mask.py").write_bytes(reference)
    shutil.make_archive(str(cohort / "bob"), "zip", work.parent)  # cohort/bob.zip
    (cohort / "mallory").symlink_to(tmp_path / "bob-work")  # a link is never a candidate
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "grader", "batch", "--seed", "0", str(cohort), "--out", str(out), "-e",
                           "decode_mask"], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})  # the kit, installed or not
    assert done.returncode == 0, done.stderr
    rows = {json.loads((d / "result.json").read_text())["submission"]: d.name
            for d in out.iterdir() if (d / "result.json").is_file()}
    assert set(rows) == {str(cohort / "alice"), str(cohort / "bob.zip")}
    for submission in rows:
        result = json.loads((out / rows[submission] / "result.json").read_text())
        assert result["exercises"][0]["status"] == "graded", submission


@pytest.mark.slow
def test_candidates_named_like_the_batchs_own_files_or_named_twice_are_graded_once_each(tmp_path):
    """Red team 14: a candidate folder named index.html or manifest.json took the batch's own file's place
    (a traceback, exit 1, later candidates never graded), and one path given three times was graded three
    times into one folder."""
    reference = (catalog.KIT_ROOT / "solutions" / "tree_mask.py").read_bytes()
    cohort = tmp_path / "cohort"
    for name in ("index.html", "manifest.json", "summary.md", "carol"):
        (cohort / name).mkdir(parents=True)
        (cohort / name / "tree_mask.py").write_bytes(reference)
    out = tmp_path / "out"
    carol = str(cohort / "carol")
    done = subprocess.run([sys.executable, "-m", "grader", "batch", "--seed", "0", str(cohort), carol, carol,
                           "--out", str(out), "-e", "tree_mask"], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert (out / "index.html").is_file() and (out / "summary.md").is_file() and (out / "manifest.json").is_file()
    graded = [json.loads((d / "result.json").read_text())["submission"] for d in out.iterdir() if d.is_dir()]
    assert sorted(graded) == sorted(str(cohort / n) for n in ("index.html", "manifest.json", "summary.md", "carol"))
    assert "<html" in (out / "index.html").read_text().lower()
