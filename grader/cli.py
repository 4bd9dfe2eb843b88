"""The ``kvgrade`` command line."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from . import __version__, catalog
from .engine import grade as run_grading
from .notes import Notes, NotesError
from .render import terminal
from .submission import SubmissionError


def _exercise_ids(ctx, param, values):
    known = {e.id for e in catalog.exercises()}
    for value in values:
        if value not in known:
            raise click.BadParameter(f"unknown exercise {value!r}; choose from {', '.join(sorted(known))}")
    return list(values)


def _seed(ctx, param, value):
    if value < 0 or value >= 2**63:
        raise click.BadParameter("the seed is a non-negative integer below 2**63")
    return value


def _write_text(target: str, text: str):
    if target == "-":
        click.echo(text)
    else:
        Path(target).write_text(text)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kvgrade")
def main():
    """Interview exercises on attention during decode with a KV cache, and their grader.

    Start with `kvgrade list`, read a prompt with `kvgrade show ID`, and grade a folder of
    solutions with `kvgrade grade PATH`.
    """


@main.command()
@click.argument("path", type=click.Path(path_type=str))
@click.option("-e", "--exercise", "exercises", multiple=True, callback=_exercise_ids,
              help="Grade only this exercise (repeatable). Default: all; missing ones are listed as not attempted.")
@click.option("--seed", type=int, default=0, show_default=True, callback=_seed,
              help="Seed for the hidden tests' random shapes. The same seed gives the same result.")
@click.option("--check", "checks", multiple=True, metavar="CHECK_ID",
              help="Run only this check (repeatable); used by the reproduce lines in reports.")
@click.option("--json", "json_out", metavar="FILE|-", help="Write the result JSON to FILE, or to stdout with '-'.")
@click.option("--notes", "notes_path", type=click.Path(path_type=str),
              help="Interviewer notes (TOML): observed criteria met or missed, free text per exercise.")
@click.option("--feedback", type=click.Choice(["summary", "detail"]), default="detail", show_default=True,
              help="summary: which checks passed, without hidden inputs (for candidates); detail: everything.")
def grade(path, exercises, seed, checks, json_out, notes_path, feedback):
    """Grade a submission folder against the hidden tests.

    PATH holds <id>/<id>.py or <id>.py for each exercise attempted. Exit status is 0 whenever
    grading worked, whatever the level.
    """
    try:
        notes = Notes.load(notes_path) if notes_path else None
    except NotesError as exc:
        raise click.BadParameter(str(exc), param_hint="--notes") from None
    try:
        result = run_grading(path, exercises or None, seed=seed, notes=notes, only_checks=set(checks) or None,
                             progress=_progress)
    except SubmissionError as exc:
        raise click.BadParameter(str(exc), param_hint="PATH") from None
    result.feedback = feedback
    if json_out:
        _write_text(json_out, json.dumps(result.to_dict(), indent=2))
    if json_out != "-":
        click.echo(terminal.summary(result, detail=feedback == "detail"))


def _progress(exercise_id, check):
    if sys.stderr.isatty():
        click.echo(click.style("." if check.passed else "x", fg="green" if check.passed else "red"),
                   nl=False, err=True)


@main.command()
@click.option("-e", "--exercise", "exercises", multiple=True, callback=_exercise_ids,
              help="Verify only this exercise (repeatable).")
@click.option("--seed", type=int, default=0, show_default=True, callback=_seed, help="Seed for the hidden tests.")
def verify(exercises, seed):
    """Check the kit: references reach strong_hire and every known-wrong solution is caught.

    Exit status 1 when any reference falls short or any mutant slips through.
    """
    from .verify import verify as run_verify

    failed = 0
    for outcome in run_verify(exercises or None, seed=seed):
        mark = click.style("ok  ", fg="green") if outcome.ok else click.style("FAIL", fg="red", bold=True)
        click.echo(f"{mark} {outcome.exercise:<20} {outcome.subject:<24} {outcome.line}")
        failed += not outcome.ok
    if failed:
        click.echo(f"{failed} self-check(s) failed")
        sys.exit(1)
    click.echo("all self-checks passed")


@main.command(name="list")
def list_exercises():
    """List the exercises, with their titles."""
    for ex in catalog.exercises():
        click.echo(f"{ex.id:<22} {ex.title}")


@main.command()
@click.argument("exercise_id", metavar="ID")
def show(exercise_id):
    """Print the prompt of exercise ID."""
    try:
        ex = catalog.get(exercise_id)
    except KeyError as exc:
        raise click.BadParameter(exc.args[0], param_hint="ID") from None
    click.echo(ex.prompt_path.read_text())
