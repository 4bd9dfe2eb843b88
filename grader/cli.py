"""The ``kvgrade`` command line."""
from __future__ import annotations

import contextlib
import dataclasses
import json
import signal
import sys
import threading
from pathlib import Path

import click

from . import __version__, api, catalog
from .render import terminal
from .render.formats import FORMATS
from .result import LEVELS, level_rank, plural
from .sandbox import NOT_ISOLATED


def _exercise_ids(ctx, param, values):
    known = {e.id for e in catalog.exercises()}
    values = [v.strip() for value in values for v in value.split(",") if v.strip()]
    for value in values:
        if value not in known:
            raise click.BadParameter(f"unknown exercise {value!r}; choose from {', '.join(sorted(known))}")
    return list(dict.fromkeys(values))  # -e X -e X is the set {X}: one result per exercise, in the order given


def _seed(ctx, param, value):
    if value is not None and (value < 0 or value >= 2**63):
        raise click.BadParameter("the seed is a non-negative integer below 2**63")
    return value


def _seed_words(seed) -> str:
    return "fresh for each grading" if seed is None else str(seed)


# -- options, each declared once ---------------------------------------------------------------

def _exercises_option(what: str, default: str):
    return click.option("-e", "--exercise", "exercises", multiple=True, callback=_exercise_ids, metavar="ID[,ID]",
                        help=f"{what} (repeatable, or comma-separated). {default}")


# -e and --seed say what they mean to each command: a newcomer read "the interview set" under verify
EXERCISES = _exercises_option("Only these exercises, each one required: the interview set",
                              "Default: every one found (in a workspace, its own), none required.")
KIT_EXERCISES = _exercises_option("Only these exercises", "Default: all.")
ASSIGNMENT_EXERCISES = _exercises_option("The assignment's exercises, each one required", "Default: all.")
ROOM_EXERCISES = _exercises_option("The interview set", "Required to start a session; a resumed one keeps its own.")


def _seed_option(default: str, kept: str = "in the result and in every rerun line"):
    return click.option("--seed", type=int, default=None, callback=_seed,
                        help="Seed for the hidden tests' random shapes. The same seed gives the same result. "
                             f"Default: {default}, recorded {kept}.")


SEED = _seed_option("a fresh, unpredictable seed for each grading")
BATCH_SEED = _seed_option("one fresh, unpredictable seed for the whole batch (every submission meets the same cases)")
ASSIGNMENT_SEED = _seed_option("a fresh, unpredictable seed for each submission", "in each result")
VERIFY_SEED = _seed_option("a fresh, unpredictable seed for each grading", "in the output")
OUTPUTS = [
    click.option("--json", "json_out", metavar="FILE|-",
                 help="Write the result JSON to FILE, or to stdout with '-'."),
    click.option("--html", "html_out", metavar="FILE",
                 help="Write a self-contained HTML report (opens offline, prints well)."),
    click.option("--markdown", "markdown_out", metavar="FILE|-",
                 help="Write a Markdown report, for a hiring system or an issue."),
    click.option("--junit", "junit_out", metavar="FILE",
                 help="Write JUnit XML (one testcase per hidden check), for CI."),
    click.option("--gradescope", "gradescope_out", metavar="FILE",
                 help="Write Gradescope's results.json (student-facing: summary feedback unless --feedback detail)."),
]
SHOW_LEVELS = click.option("--show-levels", is_flag=True,
                           help="With summary feedback, show the levels too (hidden by default: a candidate sees "
                                "checks).")


def _feedback(default: str):
    """--feedback and --show-levels; ``default`` says what no --feedback means for this command."""
    return [click.option("--feedback", type=click.Choice(["summary", "detail"]), default=None,
                         help="summary: which checks passed and what each tries, no hidden inputs (for "
                              "candidates); detail: everything, with cases, pictures and reproduce lines. "
                              f"Default: {default}."),
            SHOW_LEVELS]


FEEDBACK = _feedback("detail (summary for --gradescope)")
BATCH_FEEDBACK = _feedback("detail")


def _fail_under(default=None, why="Exit 1 when the overall level is below LEVEL or there is none: for CI."):
    """--fail-under LEVEL: a bar on the overall level (grade checks it; classroom bakes it into CI)."""
    return click.option("--fail-under", "fail_under", type=click.Choice(LEVELS), default=default,
                        show_default=default is not None, metavar="LEVEL", help=f"{why} LEVEL: {', '.join(LEVELS)}.")


NOTES = click.option("--notes", "notes_path", type=click.Path(path_type=str),
                     help="Interviewer notes (TOML): observed criteria met or missed, free text per exercise.")
TRUST = click.option("--trust-submissions", is_flag=True,
                     help="Run without bubblewrap or a separate uid (the process level): only for code you trust.")
BATCH = [
    click.option("--out", "out_dir", metavar="DIR", default=None,
                 help="Where each candidate's reports and the ranked summary go (default: kvgrade-batch)."),
    click.option("--jobs", type=click.IntRange(min=1), default=None,
                 help="Submissions graded at once (default: the number of cores)."),
    TRUST,
]


def _options(*groups):
    """Apply click options (or lists of them) in the order written."""
    options = [o for g in groups for o in (g if isinstance(g, list) else [g])]

    def decorate(fn):
        for option in reversed(options):
            fn = option(fn)
        return fn
    return decorate


# -- output paths: one rule for every command ---------------------------------------------------

def _check_outputs(*targets):
    """The one rule for every output path, checked before any work is done: its folder must
    already exist (nothing creates parent folders), and at most one output goes to stdout."""
    if sum(target == "-" for target in targets) > 1:
        raise click.UsageError("only one output can go to stdout ('-'); write the others to files")
    for target in targets:
        if target and target != "-" and not Path(target).parent.is_dir():
            raise click.UsageError(f"cannot write {target}: {Path(target).parent} is not a folder")


def _write_text(target: str, text: str):
    if target == "-":
        click.echo(text)
        return
    try:
        Path(target).write_text(text)
    except OSError as exc:
        raise click.UsageError(f"cannot write {target}: {exc.strerror or exc}") from None


class Refused(click.ClickException):
    """The command cannot do its job here (no sandbox for other people's code, a bad file): exit 2,
    as for bad input, with no usage text."""
    exit_code = 2


class _OneLineErrors(click.Group):
    """Every error is one line on stderr, `Error: ...`, never click's usage block."""

    def main(self, args=None, prog_name=None, **extra):
        try:
            return super().main(args, prog_name, standalone_mode=False, **extra)
        except click.ClickException as exc:
            click.echo(f"Error: {' '.join(exc.format_message().split())}", err=True)
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:  # Ctrl-C or SIGTERM: 130, as a shell reports SIGINT (1 is a verdict's)
            click.echo("Aborted!", err=True)
            sys.exit(130)


@click.group(cls=_OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kvgrade")
def main():
    """Interview exercises on attention during decode with a KV cache, and their grader.

    Start with `kvgrade list`, read a prompt with `kvgrade show ID`, and grade a folder of
    solutions with `kvgrade grade PATH`.
    """


def _load_notes(notes_path):
    try:
        return api.Notes.load(notes_path) if notes_path else None
    except api.NotesError as exc:
        raise click.BadParameter(str(exc), param_hint="--notes") from None


def _warn(line: str):
    click.echo(click.style("warning: ", fg="yellow") + line, err=True)


def _emit(result, outputs: dict, feedback=None, show_levels=False, only_check=None, saved=False):
    """Write every requested format from the one result; the terminal summary unless stdout is taken.

    ``feedback`` None means detail, except for student-facing formats (Gradescope): summary.
    """
    for fmt in FORMATS:
        if outputs.get(f"{fmt}_out"):
            _write_text(outputs[f"{fmt}_out"], api.report(result, fmt, feedback=feedback, show_levels=show_levels))
    if "-" in outputs.values():
        if result.isolation == "process":
            _warn(NOT_ISOLATED)
        return
    shown = api.shown(result, feedback, show_levels)
    click.echo(terminal.single_check(shown, only_check) if only_check else terminal.summary(shown, saved=saved))


def _check_ids(exercises, checks):
    """--check needs exactly one exercise and ids that exist in it (a usage error otherwise)."""
    if not checks:
        return None
    if len(exercises) != 1:
        raise click.UsageError("--check needs exactly one -e ID: check ids belong to one exercise")
    known = catalog.get(exercises[0]).checks
    for check in checks:
        if check not in known:
            raise click.BadParameter(f"no check {check!r} in {exercises[0]}; its checks: {', '.join(known)}",
                                     param_hint="--check")
    return set(checks)


@main.command()
@click.argument("paths", metavar="PATH...", nargs=-1, type=click.Path(path_type=str))
@click.option("--solutions", is_flag=True, help="Grade the kit's reference solutions (PATH not needed).")
@_options(EXERCISES, SEED)
@click.option("--check", "checks", multiple=True, metavar="CHECK_ID",
              help="Run only this check of the one exercise given with -e (repeatable); "
                   "used by the reproduce lines in reports. `kvgrade show ID --checks` lists them.")
@_options(OUTPUTS, NOTES, FEEDBACK, BATCH, _fail_under())
@click.option("--live", is_flag=True, help="A live interview (the interviewer says so): validation beyond the "
              "prompt's cases becomes something to observe, not a cap (rubrics/README.md).")
def grade(paths, solutions, exercises, seed, checks, notes_path, feedback, show_levels, out_dir, jobs,
          trust_submissions, fail_under, live, **outputs):
    """Grade a submission folder or .zip against the hidden tests.

    PATH holds <id>/<id>.py or <id>.py for each exercise attempted. With several PATHs this is
    `kvgrade batch PATH...`, which takes -e, --seed, --feedback, --show-levels, --out, --jobs and
    --trust-submissions, and writes every candidate's reports into --out. In a workspace made by
    `kvgrade start` only its exercises are shown, unless -e says otherwise. Exit status is 0 whenever grading
    worked, whatever the level (1 below --fail-under LEVEL); 2 for bad input.
    """
    paths = _grade_paths(paths, solutions)
    if len(paths) > 1:
        _check_exist(paths, "PATH")  # first: an option's value taken for a PATH shows here
        _refuse({**{f"--{key.removesuffix('_out')}": value for key, value in outputs.items()},
                 "--notes": notes_path, "--check": checks},
                "to one submission; a batch writes every candidate's reports into --out")
        _refuse({"--fail-under": fail_under}, "to one submission")
        _refuse({"--live": live}, "to one submission")
        _run_batch(paths, exercises, seed, feedback, show_levels, out_dir, jobs, trust_submissions)
        return
    _refuse({"--out": out_dir, "--jobs": jobs, "--trust-submissions": trust_submissions},
            "to several PATHs (a batch); one PATH is your own code, graded with or without isolation")
    _check_outputs(*outputs.values())
    only = _check_ids(exercises, checks)
    progress = _Progress()
    try:
        result = api.grade(paths[0], exercises, seed=seed, notes=_load_notes(notes_path), checks=only,
                           progress=progress, warn=_warn, live=live)
    except api.SubmissionError as exc:
        raise click.BadParameter(str(exc), param_hint="PATH") from None
    except api.IsolationError as exc:
        raise Refused(str(exc)) from None
    finally:
        progress.end()
    _emit(result, outputs, feedback, show_levels, only_check=checks[0] if only else None)
    if fail_under and level_rank(result.overall_level) < level_rank(fail_under):
        click.echo(f"level {result.overall_level or 'none'} is below --fail-under {fail_under}", err=True)
        sys.exit(1)


def _refuse(options: dict, scope: str):
    """A usage error naming the options given here that only apply ``scope``."""
    used = [name for name, value in options.items() if value]
    if used:
        raise click.UsageError(f"{', '.join(used)} {'apply' if len(used) > 1 else 'applies'} {scope}")


def _grade_paths(paths, solutions) -> tuple:
    if solutions and paths:
        raise click.UsageError("give PATH or --solutions, not both")
    if solutions:
        return (str(catalog.KIT_ROOT / "solutions"),)
    if not paths:
        raise click.UsageError("missing PATH (a submission folder), or --solutions for the references")
    return paths


@main.command()
@click.argument("paths", metavar="FOLDER...", nargs=-1, required=True, type=click.Path(path_type=str))
@_options(EXERCISES, BATCH_SEED, BATCH_FEEDBACK, BATCH)
def batch(paths, exercises, seed, feedback, show_levels, out_dir, jobs, trust_submissions):
    """Grade many submissions in parallel and rank them: `kvgrade grade PATH PATH...`, kept as an alias.

    Each FOLDER is a submission, or a folder of submissions (one subfolder per candidate), so one
    FOLDER of submissions is a batch here. Writes DIR/<name>/{result.json,report.html,report.md},
    DIR/index.html and DIR/summary.md. A broken submission becomes a row with its error; the
    batch always finishes. It grades other people's code, so it needs bubblewrap or a separate
    uid unless --trust-submissions.
    """
    _run_batch(paths, exercises, seed, feedback, show_levels, out_dir, jobs, trust_submissions)


def _run_batch(paths, exercises, seed, feedback, show_levels, out_dir, jobs, trust_submissions):
    from .batch import Interrupted

    out_dir = out_dir or "kvgrade-batch"
    _check_batch_paths(paths, out_dir)
    stream = _BatchStream()
    try:
        with _stop_on_signals() as stop:
            rows = api.batch(paths, out_dir, exercises, seed=seed, feedback=feedback or "detail",
                             show_levels=show_levels, jobs=jobs, trust_submissions=trust_submissions,
                             on_start=stream.start, on_done=stream, stop=stop)
    except api.SubmissionError as exc:
        raise click.BadParameter(str(exc), param_hint="FOLDER") from None
    except api.IsolationError as exc:
        raise Refused(str(exc)) from None
    except Interrupted:
        click.echo(f"interrupted after {stream.done} of {stream.total} submissions; run the same command again "
                   f"to grade the rest", err=True)
        sys.exit(130)
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        click.echo(f"{r['rank']:>3}. {r['name']:<{width}}  {_verdict(r)}")
    click.echo(f"summary: {Path(out_dir) / 'index.html'} and {Path(out_dir) / 'summary.md'}")


class _BatchStream:
    """One line per finished submission, as it finishes: `[3/200] alice  hire  80% of checks`."""

    def __init__(self):
        self.total, self.done = 0, 0

    def start(self, total: int, out_dir):
        self.total = total
        click.echo(f"grading {plural(total, 'submission')} into {out_dir} (unchanged ones already graded there are "
                   "skipped)", err=True)

    def __call__(self, row: dict):
        self.done += 1
        how = "unchanged, not regraded" if row.get("reused") else f"{row.get('seconds', 0):.1f} s"
        click.echo(f"[{self.done}/{self.total}] {row['name']}  {_verdict(row)}  ({how})")


def _verdict(row: dict) -> str:
    if row["error"]:
        return click.style("broken", fg="red") + f"  {row['error']}"
    level = terminal.level_text(row["level"], row["provisional"], range(row.get("to_observe", 0)))
    return f"{level}  {row['score']:.0%} of checks"


@contextlib.contextmanager
def _stop_on_signals():
    """Ctrl-C or SIGTERM asks a batch to stop: what runs finishes and is recorded for a resume.
    A second one stops at once (the handlers before are back)."""
    stop = threading.Event()
    signals = (signal.SIGINT, signal.SIGTERM)
    previous = {signum: signal.getsignal(signum) for signum in signals}

    def ask_to_stop(signum, frame):
        stop.set()
        for other, handler in previous.items():
            signal.signal(other, handler)
        click.echo("stopping: the running submissions finish first (again to stop at once)", err=True)
    for signum in signals:
        signal.signal(signum, ask_to_stop)
    try:
        yield stop
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _check_exist(paths, hint: str):
    missing = [p for p in paths if not Path(p).exists()]
    if missing:
        raise click.BadParameter(f"{missing[0]} does not exist", param_hint=hint)


def _check_batch_paths(paths, out_dir):
    """Before anything is written: every path exists, and the batch folder can be made."""
    _check_exist(paths, "FOLDER")
    _check_outputs(out_dir)
    if Path(out_dir).exists() and not Path(out_dir).is_dir():
        raise click.UsageError(f"cannot write {out_dir}: it is not a folder")


@main.command()
@click.argument("result_path", metavar="RESULT.json", type=click.Path(exists=True, dir_okay=False, path_type=str))
@_options(NOTES, OUTPUTS, _feedback("as the result was saved; summary for --gradescope"))
def report(result_path, notes_path, feedback, show_levels, **outputs):
    """Re-render reports from a saved result, without grading again.

    With --notes, the observed criteria and the levels they imply are recorded first (levels
    follow the rubric from the saved check results). --feedback summary turns a detailed
    result into the candidate's version.
    """
    _check_outputs(*outputs.values())
    result, notes = _load_result(result_path), _load_notes(notes_path)
    for problem in notes.problems(result) if notes else []:
        _warn(problem)
    try:
        api.record_notes(result, notes)
    except api.NotesError as exc:
        raise click.BadParameter(str(exc), param_hint="--notes") from None
    _emit(result, outputs, feedback, show_levels, saved=True)


@main.command(name="notes")
@click.argument("result_path", metavar="RESULT.json", type=click.Path(exists=True, dir_okay=False, path_type=str))
def notes_template(result_path):
    """Print a notes template (TOML) for the graded exercises of a saved result.

    Fill it in during or after the interview, then `kvgrade report RESULT.json --notes FILE`.
    """
    click.echo(api.notes_template(_load_result(result_path)), nl=False)


def _load_result(path: str):
    try:
        return api.load(path)
    except api.ResultError as exc:
        raise click.BadParameter(str(exc), param_hint="RESULT.json") from None


@main.command()
@click.argument("directory", metavar="DIR", type=click.Path(path_type=str))
@_options(KIT_EXERCISES)
@click.option("--minutes", type=click.IntRange(1, 24 * 60), default=None,
              help="A time box for the session; reports show the time used against it.")
def start(directory, exercises, minutes):
    """Make a fresh workspace: prompts, stubs and public tests.

    Then `python -m pytest DIR` runs the public tests and `kvgrade grade DIR` the hidden ones;
    each grading run inside DIR is logged (DIR/.kvgrade/) and the report shows the timeline.
    `kvgrade hint ID DIR` prints the next hint when stuck.
    """
    from .workspace import WorkspaceError, start as make_workspace

    _check_outputs(directory)
    try:
        chosen = make_workspace(directory, exercises or None, minutes)
    except WorkspaceError as exc:
        raise click.BadParameter(str(exc), param_hint="DIR") from None
    click.echo(f"workspace {directory}: {', '.join(e.id for e in chosen)}"
               + (f" (time box {minutes} min)" if minutes else ""))
    click.echo(f"  read {directory}/README.md; public tests: python -m pytest {directory}; "
               f"hidden tests: kvgrade grade {directory}")


@main.command()
@click.argument("directory", metavar="DIR", type=click.Path(file_okay=False, path_type=str))
@_options(ROOM_EXERCISES)
@click.option("--minutes", type=click.IntRange(1, 24 * 60), default=None,
              help="The time box (default: the rubrics' time boxes, summed).")
@click.option("--feedback", type=click.Choice(["none", "summary", "detail"]), default=None,
              help="What the candidate sees of a submission: none; summary (default: which checks pass and "
                   "what each tries); detail (messages and diagnoses too).")
@click.option("--host", default="127.0.0.1", show_default=True, help="The address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=None,
              help="The port (0: a free one). Default: the session's own port when resumed, else a free one.")
@TRUST
def serve(directory, exercises, minutes, feedback, host, port, trust_submissions):
    """Run a live interview room: a candidate page and an interviewer page, in the browser.

    DIR is the session folder: created when the session starts (a refused start leaves nothing), resumed when
    it exists (same links).
    Prints the two links; send the candidate link only. Needs `pip install 'kvgrade[room]'`. Refuses to run
    without bubblewrap or a separate uid unless --trust-submissions: the room runs the candidate's code.
    """
    from .room import MissingExtra, RoomError
    from .room import serve as serve_room

    try:
        serve_room(directory, exercises or None, minutes, feedback, host, port, echo=click.echo,
                   trust=trust_submissions)
    except api.IsolationError as exc:
        raise Refused(str(exc)) from None
    except MissingExtra as exc:
        click.echo(str(exc), err=True)
        sys.exit(2)
    except RoomError as exc:
        raise click.UsageError(str(exc)) from None


# `kvgrade room`: the name newcomers guess for the live room (the README calls it so); hidden from the list.
main.add_command(click.Command("room", params=serve.params, callback=serve.callback, help=serve.help, hidden=True))


@main.command()
@click.argument("out", metavar="OUT")
@_options(KIT_EXERCISES)
def bundle(out, exercises):
    """Build what an interviewer sends a candidate: a folder, or a zip if OUT ends in .zip.

    Prompts, stubs, public tests, kit helper files and a README on how to work and submit;
    never solutions, known-wrong versions, hidden tests or rubrics. Grade what comes back with
    -e naming the same exercises (the command is printed): each then counts, as the bundle's
    README tells the candidate, and one not attempted counts as weak.
    """
    from .workspace import WorkspaceError, bundle as make_bundle

    _check_outputs(out)
    try:
        chosen = make_bundle(out, exercises or None)
    except WorkspaceError as exc:
        raise click.BadParameter(str(exc), param_hint="OUT") from None
    click.echo(f"bundle {out}: {', '.join(e.id for e in chosen)}")
    click.echo(f"grade what comes back with: kvgrade grade PATH -e {','.join(e.id for e in chosen)} "
               "(each then counts; one not attempted counts as weak)")


@main.command()
@click.argument("out", metavar="OUT.zip")
@_options(ASSIGNMENT_EXERCISES, ASSIGNMENT_SEED, SHOW_LEVELS)
@click.option("--after-published", is_flag=True,
              help="Tests visible to students only once grades are published (Gradescope's after_published).")
def autograder(out, exercises, seed, show_levels, after_published):
    """Build a Gradescope autograder zip: setup.sh, run_autograder and this kit, pinned.

    Upload OUT.zip as the assignment's autograder (Ubuntu 24.04 base). Each submission is
    graded at the chosen interview set and seed, with summary feedback.
    """
    from .platforms.gradescope_package import PackageError, build

    if not out.endswith(".zip"):
        raise click.BadParameter(f"{out} must end in .zip: Gradescope takes a zip", param_hint="OUT.zip")
    _check_outputs(out)
    try:
        build(out, exercises or None, seed, show_levels, after_published)
    except PackageError as exc:
        raise Refused(str(exc)) from None
    except OSError as exc:
        raise Refused(f"cannot write {out}: {exc.strerror or exc}") from None
    click.echo(f"autograder {out}: {', '.join(exercises) or 'every exercise'}, seed {_seed_words(seed)}")


@main.command()
@click.argument("directory", metavar="OUT_DIR", type=click.Path(path_type=str))
@_options(ASSIGNMENT_EXERCISES, ASSIGNMENT_SEED)
@_options(_fail_under("hire", "The level a student's repository must reach for the workflow to pass."))
@click.option("--install", metavar="SPEC", default=None,
              help="Required: what the workflow pip-installs, pinned to one build (name==VERSION, a URL ending "
                   "in #sha256=DIGEST, or git+https://...@COMMIT): the grader-only build you published "
                   "(python -m grader.platforms.grader_only OUT_DIR writes it).")
def classroom(directory, exercises, seed, fail_under, install):
    """Write a GitHub Classroom starter repository: the workspace and its autograding workflow.

    Push OUT_DIR as the assignment's template repository; every push is graded at the chosen
    interview set and seed, and the workflow fails below --fail-under.
    """
    from .platforms.classroom import write_starter
    from .platforms.gradescope_package import PackageError
    from .workspace import WorkspaceError

    _check_outputs(directory)
    try:
        chosen = write_starter(directory, exercises or None, seed, fail_under, install)
    except WorkspaceError as exc:
        raise click.BadParameter(str(exc), param_hint="OUT_DIR") from None
    except PackageError as exc:
        raise Refused(str(exc)) from None
    click.echo(f"classroom starter {directory}: {', '.join(e.id for e in chosen)}, seed {_seed_words(seed)}, "
               f"passes at {fail_under}")


@main.command(name="new")
@click.argument("exercise_id", metavar="ID")
def new_exercise(exercise_id):
    """Add exercise ID to this checkout: every part, from a small working template.

    Prompt, stub and public test; reference, a known-wrong version and a correct variant;
    rubric; hidden checks and oracle; the oracle's test. Then replace each part's text
    (README: Adding an exercise) and run `python3 -m pytest` and `kvgrade verify -e ID`.
    """
    from .scaffold import ScaffoldError, new_exercise as scaffold

    try:
        written = scaffold(exercise_id)
    except ScaffoldError as exc:
        raise click.BadParameter(str(exc), param_hint="ID") from None
    root = catalog.KIT_ROOT
    click.echo(f"exercise {exercise_id}: {len(written)} files")
    for path in written:
        click.echo(f"  {path.relative_to(root)}")


class _Progress:
    """A dot per check on a terminal's stderr, ended with a newline before anything else prints."""

    def __init__(self):
        self.dots = 0

    def __call__(self, exercise_id, check):
        if sys.stderr.isatty():
            click.echo(click.style("." if check.passed else "x", fg="green" if check.passed else "red"),
                       nl=False, err=True)
            self.dots += 1

    def end(self):
        if self.dots:
            click.echo("", err=True)
            self.dots = 0


JSON_FLAG = click.option("--json", "as_json", is_flag=True, help="Print JSON (for scripts) instead of text.")


@main.command()
@_options(KIT_EXERCISES, VERIFY_SEED, JSON_FLAG)
def verify(exercises, seed, as_json):
    """Check the kit: rubrics follow the calibration, references reach strong_hire, every
    known-wrong solution is caught, correct variants pass.

    References reach strong_hire provisionally (no interviewer notes). Exit status 1 when a
    rubric breaks the calibration, a reference falls short, a mutant slips through or a
    correct variant is judged below hire (or below the level it states).
    """
    from .verify import verify as run_verify

    seed = api.fresh_seed() if seed is None else seed  # one seed for every subject, said at the end
    outcomes = []
    # closed however the loop ends (Ctrl-C while a line prints, too): its pool's workers end with it
    with contextlib.closing(run_verify(exercises or None, seed=seed)) as running:
        for outcome in running:
            outcomes.append(outcome)
            if not as_json:
                mark = click.style("ok  ", fg="green") if outcome.ok else click.style("FAIL", fg="red", bold=True)
                click.echo(f"{mark} {outcome.exercise:<20} {outcome.subject:<24} {outcome.line}")
    failed = sum(not o.ok for o in outcomes)
    if as_json:
        click.echo(json.dumps({"ok": not failed, "seed": seed, "outcomes": [dataclasses.asdict(o) for o in outcomes]},
                              indent=2))
    else:
        click.echo(f"{plural(failed, 'self-check')} failed at seed {seed}" if failed
                   else f"all self-checks passed at seed {seed}")
    if failed:
        sys.exit(1)


@main.command(name="list")
@_options(JSON_FLAG)
def list_exercises(as_json):
    """List the exercises: id, time box (from the rubrics) and title."""
    listed = [{"id": ex.id, "minutes": ex.rubric.time_box_minutes, "title": ex.title} for ex in catalog.exercises()]
    if as_json:
        click.echo(json.dumps(listed, indent=2))
        return
    for ex in listed:
        click.echo(f"{ex['id']:<22} {_minutes(ex['minutes']):>8}  {ex['title']}")


def _minutes(minutes) -> str:
    return f"{minutes} min" if minutes else "-"


@main.command()
@click.argument("exercise_id", metavar="ID")
@click.option("--checks", "list_checks", is_flag=True, help="List the hidden check ids and what each tries.")
@click.option("--interviewer", is_flag=True,
              help="Print the interviewer's sheet instead: time box and checkpoints, hints and what each "
                   "costs, observed criteria, follow-ups, and which exercises fit a 45-60 minute slot.")
@_options(JSON_FLAG)
def show(exercise_id, list_checks, interviewer, as_json):
    """Print the prompt of exercise ID (or, with --checks, its hidden checks; with --interviewer,
    the interviewer's sheet)."""
    from . import interview

    if list_checks and interviewer:
        raise click.UsageError("--checks and --interviewer print different things; give one")
    if as_json and not list_checks:
        raise click.UsageError("--json goes with --checks")
    ex = _exercise(exercise_id)
    if interviewer:
        click.echo(interview.text(ex))
    elif not list_checks:
        click.echo(ex.prompt_path.read_text())
    elif as_json:
        click.echo(json.dumps([{"id": check, "tries": what} for check, what in ex.checks.items()], indent=2))
    else:
        width = max(len(c) for c in ex.checks)
        for check, what in ex.checks.items():
            click.echo(f"{check:<{width}}  {what}")


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
    DIR/.kvgrade/hints.jsonl (DIR: your workspace from `kvgrade start`, default the current
    folder). The log is yours and never changes a level; in an interview, only hints the
    interviewer records in the notes file count.
    """
    from . import timeline
    from .workspace import exercises_shown

    ex = _exercise(exercise_id)
    if not Path(directory).is_dir():
        raise click.BadParameter(f"{directory} is not a folder", param_hint="DIR")
    # from one exercise's folder of a workspace too, as `grade` takes it (a newcomer pass)
    directory = exercises_shown(Path(directory))[0] or Path(directory)
    workspace = timeline.read_workspace(directory)
    if workspace is None:
        raise click.BadParameter(f"{directory} is not a workspace made by `kvgrade start`, where hints are counted "
                                 f"and logged: run this from yours, or name it (kvgrade hint {ex.id} WORKSPACE)",
                                 param_hint="DIR")
    if workspace["exercises"] and ex.id not in workspace["exercises"]:  # a typo must not spend a hint
        raise click.BadParameter(f"{directory} holds no {ex.id} (its exercises: {', '.join(workspace['exercises'])})",
                                 param_hint="ID")
    hints, shown = ex.rubric.hints, timeline.hints_seen(directory).get(ex.id, 0)
    if not hints:
        click.echo(f"{ex.id} has no staged hints yet.")
        return
    if shown >= len(hints):
        click.echo(f"All {len(hints)} hints for {ex.id} were shown already:")
        for i, h in enumerate(hints, 1):
            click.echo(f"  {i}. {' '.join(h.text.split())}")
        return
    try:
        timeline.record_hint(directory, ex.id, shown + 1)
    except timeline.LogError as exc:
        raise Refused(str(exc)) from None
    click.echo(f"hint {shown + 1} of {len(hints)} for {ex.id}: {' '.join(hints[shown].text.split())}")
