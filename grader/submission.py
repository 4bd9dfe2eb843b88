"""Where a submission keeps each exercise, and reading its files without being turned against
the grader.

A submission is a folder, or a ``.zip`` of one. Exercise ``<id>`` lives at
``<root>/<id>/<id>.py`` or else ``<root>/<id>.py``. Only regular files inside the submission
are read: every path is walked one component at a time with ``O_NOFOLLOW``, the final file is
opened with ``O_NONBLOCK`` (a FIFO cannot hang us) and checked with ``fstat`` on the
descriptor, and at most ``MAX_FILE_BYTES`` are read from that descriptor. A link, device,
FIFO or folder where a module, its tests or a file copied beside them would be read refuses
that exercise (:class:`Refused`, one line). Links anywhere else (a ``.venv``) are never
followed; :func:`skipped_links` lists them.

**The top folder rule, and batch's rule.** A folder (or zip) that holds no exercise module
itself but holds a single top folder (``__MACOSX`` and dotfiles ignored) is looked through:
a bundle unzipped, worked on and zipped back grades as if the modules sat at the top.
Batch's rule "a folder without modules stands for its subfolders" asks
:func:`has_modules`, which applies the same look-through first: a folder whose single top
folder holds modules is one candidate; only a folder with neither modules nor such a single
top folder stands for its subfolders. A batch folder holding exactly one candidate folder is
therefore graded as that one candidate.
"""
from __future__ import annotations

import contextlib
import lzma
import os
import stat
import struct
import tempfile
import zipfile
import zlib
from pathlib import Path

from .plainfile import NotPlain, Oversized, open_plain, read_descriptor

MAX_FILE_BYTES = 1 << 20
MAX_FILES = 50
MAX_ZIP_BYTES = 64 << 20  # everything a zip may unpack to
MAX_ZIP_ENTRIES = 2000
MAX_ZIP_DIRECTORY_BYTES = 4 << 20  # the central directory zipfile reads whole: 2,000 entries with long names
# Everything a malformed archive raises while it is read (a corrupt deflate stream is a zlib.error)
UNREADABLE_ZIP = (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, EOFError, zlib.error,
                  lzma.LZMAError, struct.error, ValueError)
IGNORED_TOP = "__MACOSX"


UNPACKED_PREFIX = "kvgrade-zip-"  # the private folder a zip is unpacked into, removed afterwards


class SubmissionError(Exception):
    """The submission path itself is unusable (missing, not a folder, unreadable, empty)."""


class Refused(Exception):
    """A file the grader would read is not a regular file inside the submission; ``str()`` is one line."""


class TooLarge(Refused):
    """A regular file over the size the grader reads."""


def _exercise_ids() -> list[str]:
    from . import catalog
    return [e.id for e in catalog.exercises()]


# -- reading -----------------------------------------------------------------------------------


def _open_inside(root: Path, relative: Path, shown: str) -> int:
    """A descriptor on the regular file ``root / relative`` with no other name, walked one component
    at a time, following no link (NotPlain if it is anything else)."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(root, flags | os.O_DIRECTORY)
    try:
        for part in relative.parts[:-1]:
            child = os.open(part, flags | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        return open_plain(relative.parts[-1], dir_fd=fd, shown=shown, single_link=True)
    finally:
        os.close(fd)


def read_regular(root: Path, path: Path, cap: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of ``path``, a regular file inside ``root`` of at most ``cap`` bytes; else Refused."""
    shown = _shown(root, path)
    try:
        fd = _open_inside(root, Path(path).relative_to(root), shown)
    except ValueError:
        raise Refused(f"{shown} lies outside the submission; it was not read") from None
    except NotPlain as exc:
        raise Refused(f"{exc}; only regular files inside the submission are read") from None
    except OSError as exc:
        raise Refused(f"{shown} is a link or cannot be opened ({exc.strerror}); only regular files "
                      "inside the submission are read") from None
    try:
        return read_descriptor(fd, shown, cap)
    except Oversized as exc:
        raise TooLarge(f"{exc}; the grader reads files up to that size") from None
    except OSError as exc:
        raise Refused(f"{shown} could not be read ({exc.strerror}); it was not graded") from None


def _shown(root: Path, path: Path) -> str:
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return Path(path).name


def _lstat(path: Path):
    try:
        return os.lstat(path)
    except OSError:
        return None


# -- finding modules ---------------------------------------------------------------------------


def check_root(root: Path) -> Path:
    if not root.exists():
        raise SubmissionError(f"{root} does not exist")
    if not root.is_dir():
        raise SubmissionError(f"{root} is not a folder or a .zip; a submission is a folder of modules")
    try:
        empty = next(root.iterdir(), None) is None
    except OSError as exc:
        raise SubmissionError(f"{root} cannot be read: {exc.strerror}") from None
    if empty:
        raise SubmissionError(f"{root} is empty; a submission holds <id>/<id>.py or <id>.py "
                              "for each exercise attempted")
    return root


def locate(root: Path, exercise_id: str) -> Path | None:
    """``<root>/<id>/<id>.py``, or else ``<root>/<id>.py``; None when neither is there.

    A path that is there but is a link or not a regular file is returned all the same: reading
    it (:func:`candidate_files`) refuses the exercise with one line, so it counts against the
    candidate instead of passing for "not attempted" or being followed.
    """
    folder = root / exercise_id
    info = _lstat(folder)
    if info is not None and stat.S_ISLNK(info.st_mode):
        return folder / f"{exercise_id}.py"  # a linked exercise folder: refused when read
    for path in (folder / f"{exercise_id}.py", root / f"{exercise_id}.py"):
        if _lstat(path) is not None:
            return path
    return None


def _holds_module(folder: Path) -> bool:
    return any(locate(folder, eid) is not None for eid in _exercise_ids())


def _top_entries(folder: Path) -> list[os.DirEntry]:
    """What the top folder rule counts: entries other than dotfiles and ``__MACOSX``."""
    try:
        return sorted((e for e in os.scandir(folder) if not e.name.startswith(".") and e.name != IGNORED_TOP),
                      key=lambda e: e.name)
    except OSError:
        return []


def _single_top_folder(folder: Path) -> Path | None:
    entries = _top_entries(folder)
    if len(entries) == 1 and entries[0].is_dir(follow_symlinks=False):
        return Path(entries[0].path)
    return None


def _why_no_module(folder: Path) -> str:
    """When links or several top folders hide the modules: which they are, and the rule that applies."""
    entries = _top_entries(folder)
    links = [e.name for e in entries if e.is_symlink()]
    if links:
        return (f"; {', '.join(links[:5])}{', ...' if len(links) > 5 else ''} "
                f"{'is a link' if len(links) == 1 else 'are links'}, and links are never followed")
    folders = [e.name for e in entries if e.is_dir(follow_symlinks=False)]
    if len(entries) < 2 or not folders:
        return ""
    holding = [name for name in folders if _holds_module(folder / name)]
    named = ", ".join(f"{n}/" for n in holding)
    found = f"; {named} {'holds' if len(holding) == 1 else 'hold'} exercise modules" if holding else ""
    return (f"; its top holds {len(entries)} entries ({', '.join(e.name + '/' * e.is_dir() for e in entries[:5])}"
            f"{', ...' if len(entries) > 5 else ''}), and only a single top folder is looked through{found}: "
            "submit the folder you mean on its own, or a zip that holds it alone"
            + ("; to grade each as a submission of its own, use kvgrade batch" if len(holding) > 1 else ""))


def exercise_root(folder: Path) -> Path:
    """The folder whose modules are graded: ``folder``, or its single top folder (module docstring)."""
    if not _holds_module(folder):
        inner = _single_top_folder(folder)
        if inner is not None and _holds_module(inner):
            return inner
    return folder


def has_modules(path: Path) -> bool:
    """Does ``path`` (a folder) hold a submission, looking through a single top folder? For batch."""
    path = Path(path)
    return path.is_dir() and _holds_module(exercise_root(path))


def candidate_files(module: Path, other_modules: dict[str, Path], root: Path) -> list[tuple[str, bytes]]:
    """The files copied beside the candidate's module in the child, as (name, bytes).

    Every ``.py`` in the module's folder (its own helpers), then the submission's modules of
    the other exercises by their ids, so a fused kernel may import the candidate's own tile
    classification whichever layout the submission uses. Tests are read (to refuse a link
    there) but not copied; files past ``MAX_FILES`` or over ``MAX_FILE_BYTES`` are left out.
    The module itself comes last so nothing shadows it. Raises :class:`Refused` for the first
    file that is not a regular file inside ``root``.
    """
    beside = sorted(p for p in module.parent.glob("*.py") if p != module)[:MAX_FILES]
    files = []
    for path in beside:
        try:
            data = read_regular(root, path)
        except TooLarge:
            continue  # a big helper is left out, as it always was; only the module must fit
        if not path.name.startswith("test_"):
            files.append((path.name, data))
    files += [(f"{eid}.py", read_regular(root, path)) for eid, path in sorted(other_modules.items())
              if path != module]
    files.append((module.name, read_regular(root, module)))
    return files


def skipped_links(root: Path) -> list[str]:
    """Links in the submission (e.g. a ``.venv``), which the grader never follows; relative paths."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):  # os.walk does not descend into links
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            if path.is_symlink():
                found.append(str(path.relative_to(root)))
        if len(found) >= 100:
            break
    return sorted(found)[:100]


# -- opening a submission: a folder or a zip ---------------------------------------------------


@contextlib.contextmanager
def open_submission(path: str | Path, expected: list[str] | None = None):
    """Yield the root folder to grade: ``path`` itself, or a private copy of a zip's contents
    (removed on exit); a single top folder is looked through. Raises SubmissionError, naming the
    ``expected`` exercise ids (the interview set) or else every one."""
    path = Path(path)
    if path.suffix.lower() == ".zip" and path.is_file():
        with tempfile.TemporaryDirectory(prefix=UNPACKED_PREFIX) as unpacked:
            _unzip(path, Path(unpacked))
            yield _with_modules(Path(unpacked), path, expected)
        return
    yield _with_modules(check_root(path).resolve(), path, expected)


def shown_path(path: Path, root: Path, submission: str | Path) -> str:
    """``path`` (under ``root``, from :func:`open_submission`) as the reader knows it: inside the
    submission as given (``cand.zip/take_home/decode_mask.py``), never a temporary folder."""
    unpacked = (p for p in (root, *root.parents) if p.name.startswith(UNPACKED_PREFIX))
    base = next(unpacked, None) if Path(submission).suffix.lower() == ".zip" else None
    if base is None:  # a folder: its own path is the one to show
        return str(path)
    return str(Path(submission) / Path(path).relative_to(base))


def _with_modules(folder: Path, shown: Path, expected: list[str] | None = None) -> Path:
    if next(folder.iterdir(), None) is None:  # an empty zip (an empty folder is refused by check_root alike)
        raise SubmissionError(f"{shown} is empty; a submission holds <id>/<id>.py or <id>.py "
                              "for each exercise attempted")
    root = exercise_root(folder)
    if not _holds_module(root):
        ids = expected or _exercise_ids()
        raise SubmissionError(f"{shown} holds no exercise module (expected <id>.py or <id>/<id>.py, "
                              f"for <id> {'one of ' if len(ids) > 1 else ''}{', '.join(ids)}){_why_no_module(folder)}")
    return root


def _unzip(archive: Path, target: Path):
    try:
        _check_directory(archive)
        with zipfile.ZipFile(archive) as zf:
            entries = zf.infolist()
            if len(entries) > MAX_ZIP_ENTRIES:
                raise SubmissionError(f"{archive} holds {len(entries):,} entries; at most {MAX_ZIP_ENTRIES:,} are read")
            budget = MAX_ZIP_BYTES
            for info in entries:
                budget -= _extract(zf, info, target, archive, budget)
    except UNREADABLE_ZIP as exc:
        raise SubmissionError(f"{archive} is not a readable zip: {_one_line(exc)}") from None
    except OSError as exc:
        raise SubmissionError(f"{archive} cannot be unpacked: {exc.strerror or _one_line(exc)}") from None


def _check_directory(archive: Path):
    """Refuse, from the end-of-central-directory record alone, a zip whose directory is too
    large to parse: Python's zipfile would read and parse all of it before we could count."""
    with open(archive, "rb") as fp:
        end = zipfile._EndRecData(fp)  # the record zipfile itself reads (zip64 too), from the file's tail
    if end is None:
        raise zipfile.BadZipFile("no end-of-central-directory record")
    entries, size = end[zipfile._ECD_ENTRIES_TOTAL], end[zipfile._ECD_SIZE]
    if entries > MAX_ZIP_ENTRIES or size > MAX_ZIP_DIRECTORY_BYTES:
        raise SubmissionError(f"{archive} holds {entries:,} entries in a directory of {size:,} bytes; at most "
                              f"{MAX_ZIP_ENTRIES:,} entries ({MAX_ZIP_DIRECTORY_BYTES >> 20} MiB) are read")


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200] or type(exc).__name__


def _extract(zf: zipfile.ZipFile, info: zipfile.ZipInfo, target: Path, archive: Path, budget: int) -> int:
    """Write one entry under ``target``; returns the bytes written. Refuses unsafe entries."""
    name = info.filename
    parts = Path(name).parts
    if name.startswith(("/", "\\")) or ".." in parts or (parts and ":" in parts[0]) or "\\" in name:
        raise SubmissionError(f"{archive} holds an entry outside its folder ({name[:100]!r}); refused")
    if stat.S_ISLNK(info.external_attr >> 16):
        raise SubmissionError(f"{archive} holds a symbolic link ({name[:100]!r}); refused")
    if not parts or any(p.startswith(".") or p == IGNORED_TOP for p in parts):
        return 0
    dest = target.joinpath(*parts)
    if info.is_dir():
        dest.mkdir(parents=True, exist_ok=True)
        return 0
    if info.flag_bits & 0x1:
        raise SubmissionError(f"{archive} holds an encrypted entry ({name[:100]!r}); zip it without a password")
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    written = 0
    with zf.open(info) as src, os.fdopen(fd, "wb") as out:
        while chunk := src.read(1 << 16):
            written += len(chunk)
            if written > budget:
                raise SubmissionError(f"{archive} unpacks to more than {MAX_ZIP_BYTES >> 20} MiB; refused")
            out.write(chunk)
    return written
