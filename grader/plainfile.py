"""Opening a file someone else could have planted: the one place the grader does it.

Submissions, a child's report files, a workspace's logs and a batch's folders are all written by
people or processes the grader does not trust. So a file is opened without following a link
(``O_NOFOLLOW``) and without waiting on a FIFO (``O_NONBLOCK``), then judged by ``fstat`` on the
descriptor it was opened as (never by its name again, which could have been swapped since): a
regular file, and where the caller asks, not a hard link that shares its bytes with a file elsewhere.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

SAFE_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class NotPlain(OSError):
    """A file that is not a regular file of at most the size read; ``str()`` says why."""


class Oversized(NotPlain):
    pass


def open_plain(path: Path | str, flags: int = os.O_RDONLY, *, single_link: bool = False, mode: int = 0o644,
               dir_fd: int | None = None, shown: str | None = None, inode: int | None = None) -> int:
    """A descriptor on the regular file at ``path`` (``flags`` plus :data:`SAFE_FLAGS`); NotPlain, with
    nothing left open, if it is anything else, (``single_link``) has another name elsewhere, or (``inode``)
    is not the very file the grader made there. Never pass ``O_TRUNC``: truncate after this returns, so a
    planted hard link cannot empty another file."""
    if flags & os.O_TRUNC:
        raise ValueError("open_plain never truncates before it has looked at the file")
    fd = os.open(path, flags | SAFE_FLAGS, mode, dir_fd=dir_fd)
    try:
        info = judge(fd, shown or Path(path).name, single_link)
        if inode is not None and info.st_ino != inode:
            raise NotPlain(f"{shown or Path(path).name} was replaced")
    except BaseException:
        os.close(fd)
        raise
    return fd


def judge(fd: int, name: str, single_link: bool = False) -> os.stat_result:
    """``fstat(fd)`` when it is a regular file (and, with ``single_link``, its only name); else NotPlain."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise NotPlain(f"{name} is not a regular file")
    if single_link and info.st_nlink > 1:
        raise NotPlain(f"{name} is a hard link")
    return info


def read_descriptor(fd: int, name: str, cap: int) -> bytes:
    """All of the file :func:`open_plain` gave as ``fd`` (closed here), when it is at most ``cap``
    bytes; Oversized otherwise."""
    try:
        data = os.read(fd, cap + 1)
    finally:
        os.close(fd)
    if len(data) > cap:
        raise Oversized(f"{name} is over {cap // 1024:,} KiB")
    return data


def read_plain_file(path: Path | str, cap: int) -> bytes:
    """The bytes of a regular file of at most ``cap`` bytes (NotPlain, or Oversized, otherwise)."""
    return read_descriptor(open_plain(path), Path(path).name, cap)


def read_head(path: Path | str, cap: int) -> bytes | None:
    """The first ``cap`` bytes of a regular file (the rest is not read); None if it is anything else."""
    try:
        return b"".join(head_chunks(path, cap))
    except NotPlain:
        return None


def head_chunks(path: Path | str, cap: int, *, inode: int | None = None):
    """The first ``cap`` bytes of the regular file at ``path``, a MiB at a time, so a huge (or sparse) file
    is never held whole; the descriptor is this generator's own. NotPlain (as :func:`open_plain` says)
    when iteration starts, before any bytes."""
    fd = open_plain(path, inode=inode)
    try:
        left = cap
        while left > 0 and (chunk := os.read(fd, min(1 << 20, left))):
            yield chunk
            left -= len(chunk)
    finally:
        os.close(fd)
