"""Output files of the CLI (``-o``): pipeline.io.storage.open_output, the one writer behind export and thresholds.

``-`` is standard output; a FIFO or device is written straight into (never renamed over: `export -o /dev/stdout`
run as root replaced the /dev/stdout link with a regular file); a symbolic link stays a link and its target gets
the content; a regular file is replaced atomically (a failed write leaves the old one).
"""
from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading

import pytest

from pipeline.io.storage import open_output, output_target
from tests.conftest import ROOT, subprocess_env


def test_dash_is_stdout(capfd):
    with open_output("-") as f:
        f.write("a\tb\n")
    with open_output("-", "wb") as f:
        f.write(b"c\n")
    out, _ = capfd.readouterr()
    assert out == "a\tb\nc\n"
    assert not os.path.exists("-")
    assert output_target("/dev/stdout") == ("stdout", "-")


def test_symlink_stays_a_link(tmp_path):
    target = tmp_path / "data" / "real.tsv"
    target.parent.mkdir()
    target.write_text("old\n")
    target.chmod(0o640)
    link = tmp_path / "link.tsv"
    link.symlink_to(target)
    with open_output(str(link)) as f:
        f.write("new\n")
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == "new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640          # the old file's permissions kept
    assert sorted(os.listdir(target.parent)) == ["real.tsv"]     # written beside the target, then renamed


def test_dangling_symlink_creates_its_target(tmp_path):
    link = tmp_path / "link.bed"
    link.symlink_to(tmp_path / "later.bed")
    with open_output(str(link)) as f:
        f.write("x\n")
    assert link.is_symlink() and (tmp_path / "later.bed").read_text() == "x\n"


def test_fifo_written_straight_into(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo).read()))
    reader.start()
    with open_output(str(fifo)) as f:
        f.write("through the pipe\n")
    reader.join(10)
    assert got == ["through the pipe\n"]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)                  # still a FIFO, nothing renamed over it
    assert sorted(os.listdir(tmp_path)) == ["pipe"]


def test_device_and_folder(tmp_path):
    with open_output("/dev/null") as f:
        f.write("gone\n")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    with pytest.raises(IsADirectoryError, match="is a folder"):
        with open_output(str(tmp_path)) as f:
            f.write("x")


def test_failed_write_keeps_the_old_file(tmp_path):
    p = tmp_path / "t.tsv"
    p.write_text("old\n")
    with pytest.raises(RuntimeError):
        with open_output(str(p)) as f:
            f.write("half")
            raise RuntimeError("interrupted")
    assert p.read_text() == "old\n" and os.listdir(tmp_path) == ["t.tsv"]


def test_dev_stdout_in_a_process_stays_a_link():
    """`-o /dev/stdout` in a child whose standard output is a pipe: the data arrives there, /dev/stdout is not
    replaced (as root the old writer renamed a regular file over it)."""
    code = ("from pipeline.io.storage import open_output\n"
            "with open_output('/dev/stdout') as f:\n    f.write('to stdout\\n')\n")
    before = os.lstat("/dev/stdout")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT,
                       env=subprocess_env())
    assert r.returncode == 0, r.stderr
    assert r.stdout == "to stdout\n"
    after = os.lstat("/dev/stdout")
    assert stat.S_ISLNK(after.st_mode) == stat.S_ISLNK(before.st_mode) and after.st_ino == before.st_ino


def test_dev_stderr_redirected_to_a_file_is_written_into(tmp_path):
    """/dev/stderr (and a link to it) of a process whose stderr is a regular file: the data goes into that file
    through the descriptor, the file is not replaced (a rename onto realpath's answer would have replaced it)."""
    log = tmp_path / "err.log"
    link = tmp_path / "to_stderr"
    link.symlink_to("/dev/stderr")
    code = ("import sys\nfrom pipeline.io.storage import open_output, output_target\n"
            "assert output_target(sys.argv[1])[0] == 'stream', output_target(sys.argv[1])\n"
            "with open_output(sys.argv[1]) as f:\n    f.write('into the log\\n')\n")
    for dest in ("/dev/stderr", str(link)):
        with open(log, "w") as err:
            ino = os.fstat(err.fileno()).st_ino
            r = subprocess.run([sys.executable, "-c", code, dest], stderr=err, stdout=subprocess.PIPE, text=True,
                               timeout=60, cwd=ROOT, env=subprocess_env())
        assert r.returncode == 0, log.read_text()
        assert log.read_text() == "into the log\n" and log.stat().st_ino == ino
        assert sorted(os.listdir(tmp_path)) == ["err.log", "to_stderr"]
