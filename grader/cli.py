"""The ``kvgrade`` command line."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from . import __version__, catalog
from .engine import grade as run_grading
from .notes import Notes, NotesError, apply as apply_notes, template as write_notes_template
from .render import terminal
from .render.common import for_candidate
from .result import Result
from .sandbox.launch import IsolationError
from .submission import SubmissionError


def _exercise_ids(ctx, param, values):
    known = {e.id for e in catalog.exercises()}
    values = [v.strip() for value in values for v in value.split(",") if v.strip()]
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
        return
    try:
        Path(target).write_text(text)
    except OSError as exc:
        raise click.UsageError(f"cannot write {target}: {exc.strerror or exc}") from None


def _check_outputs(*targets):
    """Refuse an output file whose folder does not exist before any work is done (exit 2)."""
    for target in targets:
        if target and target != "-" and not Path(target).parent.is_dir():
            raise click.UsageError(f"cannot write {target}: {Path(target).parent} is not a folder")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kvgrade")
def main():
    """Interview exercises on attention during decode with a KV cache, and their grader.

    Start with `kvgrade list`, read a prompt with `kvgrade show ID`, and grade a folder of
    solutions with `kvgrade grade PATH`.
    """


OUTPUTS = [
    click.option("--json", "json_out", metavar="FILE|-", help="Write the result JSON to FILE, or to stdout with '-'."),
    click.option("--html", "html_out", metavar="FILE", help="Write a self-contained HTML report (opens offline, prints well)."),
    click.option("--markdown", "markdown_out", metavar="FILE|-", help="Write a Markdown report, for a hiring system or an issue."),
    click.option("--junit", "junit_out", metavar="FILE", help="Write JUnit XML (one testcase per hidden check), for CI."),
    click.option("--gradescope", "gradescope_out", metavar="FILE",
                 help="Write Gradescope's results.json, to use the kit as a course autograder."),
]
FEEDBACK = click.option(
    "--feedback", type=click.Choice(["summary", "detail"]), default=None,
    help="summary: which checks passed and what each tries, no hidden inputs (for candidates); "
         "detail: everything, with cases, pictures and reproduce lines. Default: detail.")


def _options(options):
    def decorate(fn):
        for option in reversed(options):
            fn = option(fn)
        return fn
    return decorate


def _load_notes(notes_path):
    try:
        return Notes.load(notes_path) if notes_path else None
    except NotesError as exc:
        raise click.BadParameter(str(exc), param_hint="--notes") from None


def _emit(result, json_out=None, html_out=None, markdown_out=None, junit_out=None, gradescope_out=None):
    """Write every requested format from the one result; the terminal summary unless stdout is taken."""
    from .render import gradescope, html, junit, markdown

    if json_out:
        _write_text(json_out, json.dumps(result.to_dict(), indent=2))
    if html_out:
        _write_text(html_out, html.render(result))
    if markdown_out:
        _write_text(markdown_out, markdown.render(result))
    if junit_out:
        _write_text(junit_out, junit.render(result))
    if gradescope_out:
        _write_text(gradescope_out, json.dumps(gradescope.render(result), indent=2))
    if "-" not in (json_out, html_out, markdown_out, junit_out, gradescope_out):
        click.echo(terminal.summary(result))


@main.command()
@click.argument("paths", metavar="PATH...", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("-e", "--exercise", "exercises", multiple=True, callback=_exercise_ids,
              help="Grade only this exercise (repeatable, or comma-separated): the interview set. "
                   "Default: all; exercises not attempted are listed, never counted against the candidate.")
@click.option("--seed", type=int, default=0, show_default=True, callback=_seed,
              help="Seed for the hidden tests' random shapes. The same seed gives the same result.")
@click.option("--check", "checks", multiple=True, metavar="CHECK_ID",
              help="Run only this check (repeatable); used by the reproduce lines in reports.")
@_options(OUTPUTS)
@click.option("--notes", "notes_path", type=click.Path(path_type=str),
              help="Interviewer notes (TOML): observed criteria met or missed, free text per exercise.")
@FEEDBACK
@click.option("--out", "out_dir", metavar="DIR", help="With several PATHs: the batch folder (default: kvgrade-batch).")
@click.option("--jobs", type=click.IntRange(min=1), default=None,
              help="With several PATHs: submissions graded at once (default: the number of cores).")
def grade(paths, exercises, seed, checks, json_out, html_out, markdown_out, junit_out, gradescope_out,
          notes_path, feedback, out_dir, jobs):
    """Grade a submission folder against the hidden tests.

    PATH holds <id>/<id>.py or <id>.py for each exercise attempted. Give several PATHs (or use
    `kvgrade batch`) to grade many candidates at once into a ranked summary. Exit status is 0
    whenever grading worked, whatever the level.
    """
    feedback = feedback or "detail"
    if len(paths) > 1:
        single = {"--json": json_out, "--html": html_out, "--markdown": markdown_out, "--junit": junit_out,
                  "--gradescope": gradescope_out, "--notes": notes_path, "--check": checks}
        used = [name for name, value in single.items() if value]
        if used:
            raise click.UsageError(f"{', '.join(used)} apply to one submission; a batch writes every "
                                   "candidate's reports into --out")
        _run_batch(paths, exercises, seed, feedback, out_dir or "kvgrade-batch", jobs)
        return
    _check_outputs(json_out, html_out, markdown_out, junit_out, gradescope_out)
    notes = _load_notes(notes_path)
    try:
        result = run_grading(paths[0], exercises or None, seed=seed, notes=notes,
                             only_checks=set(checks) or None, progress=_progress)
    except SubmissionError as exc:
        raise click.BadParameter(str(exc), param_hint="PATH") from None
    except IsolationError as exc:
        raise click.UsageError(str(exc)) from None
    result.feedback = "detail"
    if not checks:
        _log_attempt(paths[0], result)
    _warn_about(notes, result)
    if feedback == "summary":
        result = for_candidate(result)
    _emit(result, json_out, html_out, markdown_out, junit_out, gradescope_out)


@main.command()
@click.argument("paths", metavar="FOLDER...", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("-e", "--exercise", "exercises", multiple=True, callback=_exercise_ids,
              help="Grade only this exercise (repeatable, or comma-separated): the interview set.")
@click.option("--seed", type=int, default=0, show_default=True, callback=_seed, help="Seed for the hidden tests.")
@click.option("--out", "out_dir", default="kvgrade-batch", show_default=True, metavar="DIR",
              help="Where each candidate's reports and the ranked summary go.")
@click.option("--jobs", type=click.IntRange(min=1), default=None,
              help="Submissions graded at once (default: the number of cores).")
@FEEDBACK
def batch(paths, exercises, seed, out_dir, jobs, feedback):
    """Grade many submissions in parallel and rank them.

    Each FOLDER is a submission, or a folder of submissions (one subfolder per candidate).
    Writes DIR/<name>/{result.json,report.html,report.md}, DIR/index.html and DIR/summary.md.
    A broken submission becomes a row with its error; the batch always finishes.
    """
    _run_batch(paths, exercises, seed, feedback or "detail", out_dir, jobs)


def _run_batch(paths, exercises, seed, feedback, out_dir, jobs):
    from .batch import grade_many, submissions

    found = submissions(list(paths))
    if not found:
        raise click.BadParameter("no submission folders found", param_hint="FOLDER")
    with click.progressbar(length=len(found), label=f"grading {len(found)} submissions", file=sys.stderr,
                           show_pos=True) as bar:
        rows = grade_many(found, out_dir, exercises or None, seed=seed, feedback=feedback, jobs=jobs,
                          on_done=lambda row: bar.update(1))
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        verdict = click.style("broken", fg="red") + f"  {r['error']}" if r["error"] else \
            f"{terminal.level_text(r['level'], r['provisional'], range(r.get('to_observe', 0)))}  {r['score']:.0%} of checks"
        click.echo(f"{r['rank']:>3}. {r['name']:<{width}}  {verdict}")
    click.echo(f"summary: {Path(out_dir) / 'index.html'} and {Path(out_dir) / 'summary.md'}")


@main.command()
@click.argument("result_path", metavar="RESULT.json", type=click.Path(exists=True, dir_okay=False, path_type=str))
@click.option("--notes", "notes_path", type=click.Path(path_type=str),
              help="Interviewer notes (TOML) to record: observed criteria and free text per exercise.")
@_options(OUTPUTS)
@FEEDBACK
def report(result_path, notes_path, json_out, html_out, markdown_out, junit_out, gradescope_out, feedback):
    """Re-render reports from a saved result, without grading again.

    With --notes, the observed criteria and the levels they imply are recorded first (levels
    follow the rubric from the saved check results). --feedback summary turns a detailed
    result into the candidate's version.
    """
    _check_outputs(json_out, html_out, markdown_out, junit_out, gradescope_out)
    result = _load_result(result_path)
    notes = _load_notes(notes_path)
    if notes:
        if result.feedback == "summary":
            raise click.BadParameter("this result was saved with --feedback summary; add notes to the detailed one",
                                     param_hint="--notes")
        _warn_about(notes, result)
        apply_notes(result, notes)
    if feedback == "summary":
        result = for_candidate(result)
    _emit(result, json_out, html_out, markdown_out, junit_out, gradescope_out)


@main.command(name="notes")
@click.argument("result_path", metavar="RESULT.json", type=click.Path(exists=True, dir_okay=False, path_type=str))
def notes_template(result_path):
    """Print a notes template (TOML) for the graded exercises of a saved result.

    Fill it in during or after the interview, then `kvgrade report RESULT.json --notes FILE`.
    """
    click.echo(write_notes_template(_load_result(result_path)), nl=False)


def _warn_about(notes, result):
    for problem in notes.problems(result) if notes else []:
        click.echo(click.style("warning: ", fg="yellow") + problem, err=True)


def _load_result(path: str) -> Result:
    try:
        return Result.from_dict(json.loads(Path(path).read_text()))
    except (ValueError, TypeError, KeyError) as exc:
        raise click.BadParameter(f"{path} is not a kvgrade result: {exc}", param_hint="RESULT.json") from None


@main.command()
@click.argument("directory", metavar="DIR", type=click.Path(path_type=str))
@click.option("-e", "--exercise", "exercises", multiple=True, callback=_exercise_ids,
              help="Only this exercise (repeatable, or comma-separated). Default: all.")
@click.option("--minutes", type=click.IntRange(1, 24 * 60), default=None,
              help="A time box for the session; reports show the time used against it.")
def start(directory, exercises, minutes):
    """Make a fresh workspace: prompts, stubs and public tests.

    Then `python -m pytest DIR` runs the public tests and `kvgrade grade DIR` the hidden ones;
    each grading run inside DIR is logged (DIR/.kvgrade/) and the report shows the timeline.
    `kvgrade hint ID DIR` prints the next hint when stuck.
    """
    from .workspace import WorkspaceError, start as make_workspace

    try:
        chosen = make_workspace(directory, exercises or None, minutes)
    except WorkspaceError as exc:
        raise click.BadParameter(str(exc), param_hint="DIR") from None
    click.echo(f"workspace {directory}: {', '.join(e.id for e in chosen)}"
               + (f" (time box {minutes} min)" if minutes else ""))
    click.echo(f"  read {directory}/README.md; public tests: python -m pytest {directory}; "
               f"hidden tests: kvgrade grade {directory}")


@main.command()
@click.argument("out", metavar="OUT")
@click.option("-e", "--exercise", "exercises", multiple=True, callback=_exercise_ids,
              help="Only this exercise (repeatable, or comma-separated): the interview set. Default: all.")
def bundle(out, exercises):
    """Build what an interviewer sends a candidate: a folder, or a zip if OUT ends in .zip.

    Prompts, stubs, public tests, kit helper files and a README on how to work and submit;
    never solutions, known-wrong versions, hidden tests or rubrics.
    """
    from .workspace import WorkspaceError, bundle as make_bundle

    try:
        chosen = make_bundle(out, exercises or None)
    except WorkspaceError as exc:
        raise click.BadParameter(str(exc), param_hint="OUT") from None
    click.echo(f"bundle {out}: {', '.join(e.id for e in chosen)}")


def _progress(exercise_id, check):
    if sys.stderr.isatty():
        click.echo(click.style("." if check.passed else "x", fg="green" if check.passed else "red"),
                   nl=False, err=True)


@main.command()
@click.option("-e", "--exercise", "exercises", multiple=True, callback=_exercise_ids,
              help="Verify only this exercise (repeatable).")
@click.option("--seed", type=int, default=0, show_default=True, callback=_seed, help="Seed for the hidden tests.")
def verify(exercises, seed):
    """Check the kit: rubrics follow the calibration, references reach strong_hire, every
    known-wrong solution is caught.

    References reach strong_hire provisionally (no interviewer notes). Exit status 1 when a
    rubric breaks the calibration, a reference falls short or a mutant slips through.
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
@click.option("--interviewer", is_flag=True,
              help="Print the interviewer's sheet instead: time box and checkpoints, hints and what each "
                   "costs, observed criteria, follow-ups, and which exercises fit a 45-60 minute slot.")
def show(exercise_id, interviewer):
    """Print the prompt of exercise ID."""
    from . import interview

    ex = _exercise(exercise_id)
    click.echo(interview.text(ex) if interviewer else ex.prompt_path.read_text())


def _exercise(exercise_id: str):
    try:
        return catalog.get(exercise_id)
    except KeyError as exc:
        raise click.BadParameter(exc.args[0], param_hint="ID") from None


@main.command()
@click.argument("exercise_id", metavar="ID")
@click.argument("directory", metavar="[DIR]", default=".", type=click.Path(path_type=str))
def hint(exercise_id, directory):
    """Print the next staged hint for exercise ID and log it.

    Hints go from a nudge to near the answer; each one printed is logged in
    DIR/.kvgrade/hints.jsonl (DIR: your workspace, default the current folder). The log is yours and never changes a level; in an interview, only hints the interviewer
    records in the notes file count.
    """
    from . import timeline

    ex = _exercise(exercise_id)
    if not Path(directory).is_dir():
        raise click.BadParameter(f"{directory} is not a folder", param_hint="DIR")
    hints, shown = ex.rubric.hints, timeline.hints_seen(Path(directory)).get(ex.id, 0)
    if not hints:
        click.echo(f"{ex.id} has no staged hints yet.")
        return
    if shown >= len(hints):
        click.echo(f"All {len(hints)} hints for {ex.id} were shown already:")
        for i, h in enumerate(hints, 1):
            click.echo(f"  {i}. {' '.join(h.text.split())}")
        return
    try:
        timeline.record_hint(Path(directory), ex.id, shown + 1)
    except timeline.LogError as exc:
        raise click.UsageError(str(exc)) from None
    click.echo(f"hint {shown + 1} of {len(hints)} for {ex.id}: {' '.join(hints[shown].text.split())}")


def _log_attempt(path: str, result):
    """In a workspace made by `kvgrade start`: log this run, and give the result the timeline."""
    from . import timeline

    root = Path(path)
    if not timeline.is_workspace(root):
        return
    try:
        timeline.record_attempt(root, result)
    except timeline.LogError as exc:
        click.echo(click.style("warning: ", fg="yellow") + f"attempt not logged: {exc}", err=True)
    session = timeline.summarise(root, result)
    if session is None:  # the workspace record went away mid-run
        return
    for e in result.exercises:
        e.timeline = session["exercises"].get(e.id, {})
    result.session = {k: v for k, v in session.items() if k != "exercises"}
