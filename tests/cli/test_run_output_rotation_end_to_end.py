"""`labgang run` against a real ``labgang up --simulate`` whose agent rotates rank logs at 1 MiB
(``LABGANG_LOG_MAX_BYTES``): every byte a rank writes reaches run's stdout (and stderr) once, in order,
across many rotations, with no labgang text among them; ``| head`` gets 141 however much output was
left; and a reader that comes after two rotations (``labgang logs`` of a batch job) is told on stderr
how many bytes were discarded, never silently."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from up_harness import REPO, Up

pytestmark = pytest.mark.slow

CAP = 1 << 20
"""The agent's rank log cap for these tests: the outputs below are several times it."""

STARTS = {
    "fast": ["-m", "labgang.launcher"],
    "click": ["-c", "from labgang.launcher.cli.main import main; main()"],
}
"""How a test starts the CLI: the fast path (quick.py) or the click command it hands over to."""


@pytest.fixture(scope="module")
def up() -> Iterator[Up]:
    with tempfile.TemporaryDirectory(prefix="lgrot", dir="/tmp") as d:
        instance = Up(Path(d), start=False)
        instance.env["LABGANG_LOG_MAX_BYTES"] = str(CAP)
        instance.start()
        try:
            yield instance
        finally:
            code = instance.stop()
        assert code == 0, instance.output()


def run(up: Up, *argv: str, path: str = "fast") -> subprocess.CompletedProcess[bytes]:
    """``labgang run -- ARGV``; output as bytes."""
    return subprocess.run(
        [sys.executable, *STARTS[path], "run", "--", *argv],
        cwd=REPO,
        env=up.env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=180,
    )


def numbers(first: int, last: int) -> bytes:
    """What ``seq FIRST LAST`` prints."""
    return b"".join(b"%d\n" % i for i in range(first, last + 1))


@pytest.mark.parametrize("path", ["fast", "click"])
def test_every_byte_of_a_stream_many_times_the_cap_arrives_in_order(up: Up, path: str) -> None:
    """seq writes ~8 MB (eight rotations' worth) faster than run's first poll: with the rotation held
    for run's follower, none of it is dropped, and no rotation line is on stdout or stderr."""
    done = run(up, "seq", "1", "1200000", path=path)
    assert done.returncode == 0, done.stderr
    assert len(done.stdout) > 7 * CAP
    assert done.stdout == numbers(1, 1200000)
    assert b"rotat" not in done.stderr and b"discarded" not in done.stderr, done.stderr


def test_stdout_and_stderr_stay_apart_and_whole_across_rotations(up: Up) -> None:
    """Both streams of a rank, interleaved, each several caps long: run's stdout is exactly the
    rank's stdout, and its stderr holds exactly the rank's stderr between labgang's own lines."""
    script = "for i in 1 2 3; do seq 1 200000; seq 500000 700000 >&2; done"
    done = run(up, "sh", "-c", script)
    assert done.returncode == 0, done.stderr
    assert done.stdout == numbers(1, 200000) * 3
    rank_err = b"".join(line for line in done.stderr.splitlines(keepends=True) if not line.startswith(b"labgang"))
    assert rank_err == numbers(500000, 700000) * 3
    assert b"rotat" not in done.stderr


def test_the_first_line_is_the_ranks_even_after_rotations(up: Up) -> None:
    """``labgang run -- yes | head -1`` printed the rotation's marker line first: the rank's first
    line is what comes first now (2 MB of ``y``, two rotations, before run reads anything)."""
    done = run(up, "sh", "-c", "yes | head -n 1000000")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split(b"\n", 1)[0] == b"y"
    assert done.stdout == b"y\n" * 1000000


@pytest.mark.parametrize("count", [100000, 200000])
def test_head_leaving_early_gets_141_whatever_the_output_size(up: Up, count: int) -> None:
    """``run -- seq 1 N | head -2``: with N = 100000 (~590 kB, the whole log in one read) run's write
    into the pipe came back short when head left and the rest was dropped without a word: exit 0.
    It is 141 now, as for N = 200000, with the line naming the job."""
    script = f'"{sys.executable}" -m labgang.launcher run -- seq 1 {count} | head -2; echo "status ${{PIPESTATUS[0]}}"'
    done = subprocess.run(
        ["bash", "-c", script], cwd=REPO, env=up.env, stdin=subprocess.DEVNULL, capture_output=True, timeout=180
    )
    assert done.stdout.decode().splitlines() == ["1", "2", "status 141"], done.stderr
    assert b"output closed (broken pipe)" in done.stderr


def test_a_late_reader_is_told_how_many_bytes_rotation_discarded(up: Up) -> None:
    """A batch job (no run attached: its log rotates at the cap as before) writes ~3.4 caps; once it
    ended, ``labgang logs`` prints what the two files hold, in order, and says on stderr how many
    bytes before them were discarded; that count and what it printed add up to all of it."""
    job_id = up.submit("--", "seq", "1", "500000")
    assert up.wait_state(job_id, {"succeeded", "failed"}, timeout=120)["state"] == "succeeded"
    done = up.cli("logs", job_id)
    assert done.returncode == 0, done.stderr
    whole = numbers(1, 500000).decode()
    lost_line = [line for line in done.stderr.splitlines() if "discarded by log rotation" in line]
    assert len(lost_line) == 1, done.stderr
    lost = int(lost_line[0].split("the first ")[1].split(" bytes")[0])
    assert lost > 0 and lost + len(done.stdout) == len(whole)
    assert done.stdout == whole[lost:]


@pytest.mark.parametrize("value", ["12", "lots"])
def test_a_bad_log_cap_is_one_line_exit_2_and_nothing_made(tmp_path: Path, value: str) -> None:
    """``LABGANG_LOG_MAX_BYTES`` below the agent's 1024 bytes, or not a number: ``labgang up`` says so in
    one line naming the setting and what it allows, exits 2 and makes no state directory."""
    state_dir = tmp_path / "state"
    env = {**Up(state_dir, start=False).env, "LABGANG_LOG_MAX_BYTES": value}
    done = subprocess.run(
        [sys.executable, "-m", "labgang.launcher", "up", "--simulate", str(REPO / "config/sim/h100x8.toml")],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"labgang up: LABGANG_LOG_MAX_BYTES: {value!r} is not a log size (allowed: integer bytes >= 1024)"
    ]
    assert not state_dir.exists()
