"""grader.plainfile: the one way the grader opens a file someone else could have planted."""
import os

import pytest

from grader import plainfile


def test_a_regular_file_is_read_up_to_its_cap(tmp_path):
    (tmp_path / "a").write_bytes(b"x" * 100)
    assert plainfile.read_plain_file(tmp_path / "a", 100) == b"x" * 100
    with pytest.raises(plainfile.Oversized, match="over"):
        plainfile.read_plain_file(tmp_path / "a", 99)
    assert plainfile.read_head(tmp_path / "a", 10) == b"x" * 10


def test_a_fifo_is_refused_without_waiting_on_it(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(plainfile.NotPlain, match="not a regular file"):
        plainfile.read_plain_file(tmp_path / "fifo", 10)
    assert plainfile.read_head(tmp_path / "fifo", 10) is None


def test_a_link_is_never_followed(tmp_path):
    (tmp_path / "secret").write_text("s")
    os.symlink(tmp_path / "secret", tmp_path / "link")
    with pytest.raises(OSError):
        plainfile.read_plain_file(tmp_path / "link", 10)
    with pytest.raises(OSError):
        plainfile.read_head(tmp_path / "link", 10)


def test_a_hard_link_is_refused_where_asked_and_nothing_is_truncated(tmp_path):
    (tmp_path / "elsewhere").write_text("keep me")
    os.link(tmp_path / "elsewhere", tmp_path / "log")
    assert plainfile.read_plain_file(tmp_path / "log", 10) == b"keep me"  # reading a shared file is harmless
    with pytest.raises(plainfile.NotPlain, match="hard link"):
        plainfile.open_plain(tmp_path / "log", os.O_WRONLY, single_link=True)
    with pytest.raises(ValueError):
        plainfile.open_plain(tmp_path / "log", os.O_WRONLY | os.O_TRUNC)
    assert (tmp_path / "elsewhere").read_text() == "keep me"


def test_a_refused_open_leaves_no_descriptor_behind(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        with pytest.raises(plainfile.NotPlain):
            plainfile.open_plain(tmp_path / "fifo")
    assert len(os.listdir("/proc/self/fd")) == before


def test_a_fifo_opened_for_writing_is_refused_at_once(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    reader = os.open(tmp_path / "fifo", os.O_RDONLY | os.O_NONBLOCK)  # a reader, so the open itself succeeds
    try:
        with pytest.raises(plainfile.NotPlain, match="not a regular file"):
            plainfile.open_plain(tmp_path / "fifo", os.O_WRONLY | os.O_APPEND)
    finally:
        os.close(reader)


def test_a_file_swapped_for_another_is_not_the_one_named_by_its_inode(tmp_path):
    report = tmp_path / "junit.xml"
    report.write_bytes(b"made by the grader")
    inode = report.stat().st_ino
    assert b"".join(plainfile.head_chunks(report, 100, inode=inode)) == b"made by the grader"
    report.rename(tmp_path / "kept")  # keeps the inode alive, so the new file cannot reuse its number
    report.write_bytes(b"forged by the child")
    with pytest.raises(plainfile.NotPlain, match="replaced"):
        b"".join(plainfile.head_chunks(report, 100, inode=inode))


def test_head_chunks_reads_only_the_head_and_leaves_no_descriptor_behind(tmp_path):
    big = tmp_path / "sparse"
    with open(big, "wb") as f:
        f.truncate(1 << 40)  # a terabyte that holds no blocks: read whole, it would never end
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(5):
        assert sum(map(len, plainfile.head_chunks(big, (3 << 20) + 5))) == (3 << 20) + 5
        started = plainfile.head_chunks(big, 1 << 30)
        next(started)
        started.close()  # a reader that stops early: the generator's descriptor goes with it
    assert len(os.listdir("/proc/self/fd")) == before
