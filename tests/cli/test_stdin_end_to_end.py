"""`labgang run` streams its standard input to rank 0, end to end against a real `labgang up
--simulate` (through the coordinator and the agent into the rank's input FIFO, as the job's user):
any size, with backpressure, its end the rank's end-of-file; /dev/null is not forwarded."""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import IO, Any

import pytest
from up_harness import REPO, Up, running_up

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def up() -> Iterator[Up]:
    yield from running_up("lgi")


def run(up: Up, *args: str, stdin: int | IO[Any] | None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "labgang.launcher", "run", *args],
        cwd=REPO,
        env=up.env,
        stdin=stdin,
        capture_output=True,
        timeout=120,
    )


def test_piped_stdin_reaches_rank_0(up):
    # echo hello | labgang run -- cat, with a real pipe from another process
    producer = subprocess.Popen(["printf", "hello\\nworld\\n"], stdout=subprocess.PIPE)
    assert producer.stdout is not None
    out = run(up, "--", "cat", stdin=producer.stdout)
    producer.stdout.close()
    assert producer.wait() == 0
    assert out.returncode == 0, out.stderr
    assert out.stdout == b"hello\nworld\n"


def test_a_file_as_stdin_binary_and_only_rank_0_gets_it(up, tmp_path):
    data = bytes(range(256)) * 40
    src = tmp_path / "in.bin"
    src.write_bytes(data)
    with src.open("rb") as fh:
        out = run(up, "-n", "2", "--all-ranks", "--", "sh", "-c", 'echo "$RANK:$(wc -c)"', stdin=fh)
    assert out.returncode == 0, out.stderr
    assert sorted(out.stdout.decode().splitlines()) == [f"0: 0:{len(data)}", "1: 1:0"]  # "R: " prefixes


def test_dev_null_is_not_forwarded(up):
    out = run(up, "--", "sh", "-c", "wc -c", stdin=subprocess.DEVNULL)
    assert (out.returncode, out.stdout.split()) == (0, [b"0"])


def test_ten_mebibytes_stream_through_and_their_end_is_end_of_file(up):
    # yes | head -c 10M | labgang run -- wc -c: far above what one request or the FIFO holds
    pipeline = "yes | head -c 10485760 | " + shlex.join(
        [sys.executable, "-m", "labgang.launcher", "run", "--", "wc", "-c"]
    )
    out = subprocess.run(["sh", "-c", pipeline], cwd=REPO, env=up.env, capture_output=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [b"10485760"]  # wc ended: it read end-of-file after the last byte


def test_a_slow_reader_holds_the_writer_back(up, tmp_path):
    # The rank reads 1 MiB, then sleeps until the producer has stopped writing: backpressure means the
    # producer cannot get ahead by more than the buffers on the way (pipe, FIFO, small parent, one request).
    counter = tmp_path / "written"
    producer = (
        "import os, sys\n"
        f"path = {str(counter)!r}\n"
        "n = 0\n"
        "block = b'x' * 65536\n"
        "while n < 64 * 2**20:\n"
        "    sys.stdout.buffer.write(block); sys.stdout.flush(); n += len(block)\n"
        "    open(path + '.new', 'w').write(str(n)); os.replace(path + '.new', path)\n"  # never seen half written
    )
    rank = "head -c 1048576 > /dev/null; echo read-1MiB; sleep 8; wc -c"
    pipeline = (
        shlex.join([sys.executable, "-c", producer])
        + " | "
        + shlex.join([sys.executable, "-m", "labgang.launcher", "run", "--", "sh", "-c", rank])
    )
    proc = subprocess.Popen(
        ["sh", "-c", pipeline], cwd=REPO, env=up.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"read-1MiB\n"
    # while the rank sleeps, the producer blocks: what it has written stops growing, far below the 64 MiB
    # it wants to write (the buffers on the way: pipe, FIFO, small parent, one request)
    deadline = time.monotonic() + 60
    seen = [-1]
    while True:
        time.sleep(0.5)  # the interval the count must stay still over, not a wait for a condition
        now = int(counter.read_text()) if counter.exists() else 0
        if now == seen[-1] and now > 0:
            break
        seen.append(now)
        assert time.monotonic() < deadline, f"the producer never stopped: {seen}"
    assert now < 16 * 2**20, seen
    rest, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert int(rest.split()[0]) == 64 * 2**20 - 2**20  # then everything arrived, in order, once
