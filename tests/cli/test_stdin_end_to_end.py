"""`labgang run` forwards its standard input to rank 0, end to end against a real `labgang up
--simulate` (the rank reads it from a file the agent writes in the rank's root-only folder, as the
job's user); a terminal or /dev/null is not forwarded, and too much input is refused in one line."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import IO, Any

import pytest
from labgang.agent.supervisor.spec import MAX_STDIN_BYTES as AGENT_MAX
from labgang.launcher.stdin_forward import MAX_STDIN_BYTES
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


def test_dev_null_is_not_forwarded_and_too_much_is_refused(up, tmp_path):
    out = run(up, "--", "sh", "-c", "wc -c", stdin=subprocess.DEVNULL)
    assert (out.returncode, out.stdout.split()) == (0, [b"0"])
    big = tmp_path / "big"
    big.write_bytes(b"x" * (MAX_STDIN_BYTES + 1))
    before = up.jobs()
    with big.open("rb") as fh:
        out = run(up, "--", "cat", stdin=fh)
    assert out.returncode == 2
    assert out.stderr.decode().startswith(f"labgang run: standard input: more than {MAX_STDIN_BYTES} bytes")
    assert len(out.stderr.splitlines()) == 1
    assert up.jobs() == before
    assert AGENT_MAX == MAX_STDIN_BYTES  # the agent checks the same bound
