"""Installing the kit like any Python tool, and the README's commands as a fresh machine runs them."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
VENV_PREFIX = "python3 -m venv .venv && . .venv/bin/activate && "


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def test_the_readme_commands_work_on_a_fresh_machine_and_ci_runs_the_second():
    """Each starts with its own virtual environment (a system Python refuses pip installs), and
    .ci/run runs the test command exactly as written."""
    install, tests = readme_commands()
    assert install.startswith(VENV_PREFIX) and tests.startswith(VENV_PREFIX)
    assert install.endswith("kvgrade grade solutions") and tests.endswith("python3 -m pytest")
    assert "python3-venv" in (ROOT / "README.md").read_text()
    printed = subprocess.run([str(ROOT / ".ci" / "readme_test_command")], capture_output=True, text=True,
                             check=True, timeout=30).stdout.strip()
    assert printed == tests
    assert 'eval "$(.ci/readme_test_command)"' in (ROOT / ".ci" / "run").read_text()


def clean_env() -> dict:
    """No PYTHONPATH: the venv must find the kit it installed, not a checkout."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


def kvgrade(venv: Path, *args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(venv / "bin" / "kvgrade"), *args], capture_output=True, text=True, cwd=cwd,
                          env=clean_env(), timeout=300)


@pytest.mark.slow
def test_a_wheel_installed_in_a_fresh_venv_works_from_any_folder(tmp_path):
    """pip install . (not -e): the wheel carries exercises/, rubrics/ and solutions/."""
    source = tmp_path / "source"  # build from a copy, so the checkout gets no build/ folder
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", "__pycache__",
                                                                ".venv", "kvgrade-batch"))
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps",
                    "-q", "-w", str(wheels)], check=True, capture_output=True, timeout=300)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=120)
    (wheel,) = wheels.glob("kvgrade-*.whl")
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall",
                    str(wheel)], check=True, capture_output=True, timeout=300, env=clean_env())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    listed = kvgrade(venv, "list", cwd=elsewhere)
    assert listed.returncode == 0 and "decode_mask" in listed.stdout, listed.stderr
    graded = kvgrade(venv, "grade", "--seed", "0", "--solutions", "-e", "decode_mask", cwd=elsewhere)
    assert graded.returncode == 0, graded.stderr
    assert "strong hire" in graded.stdout and str(venv) in graded.stdout  # the references inside the venv
    started = kvgrade(venv, "start", "ws", "-e", "decode_mask", cwd=elsewhere)
    assert started.returncode == 0 and (elsewhere / "ws" / "decode_mask" / "decode_mask.py").is_file()
