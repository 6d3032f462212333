"""What a new user (a Slurm user) found next, against a real ``labgang up --simulate`` with GPU
sharing on (4 shards per card, MPS): ``logs -f`` of a pending job waits for it and then follows,
``top --once`` shows a share of one GPU as ``queue`` does, and a unit-less ``--gpu-mem`` is read as
MiB with one warning line on stderr."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from up_harness import REPO, Up, next_id, running_up

pytestmark = pytest.mark.slow

CONFIG = """
[sharing]
shards_per_gpu = 4
mps = true

[[queues]]
name = "default"
nominal = { gpu = 8 }
share_gpus = "queue"
"""

WARNING_16 = "--gpu-mem 16 has no unit: read as 16 MiB; write 16G for GiB"


@pytest.fixture(scope="module")
def up() -> Iterator[Up]:
    yield from running_up("lgnu", CONFIG)


def popen(up: Up, *args: str) -> subprocess.Popen[str]:
    """``labgang ARGS`` against ``up``, running, its stdout and stderr piped as text."""
    return subprocess.Popen(
        [sys.executable, "-m", "labgang.launcher", *args],
        cwd=REPO,
        env=up.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_logs_follow_of_a_pending_job_waits_for_it_then_follows_its_output(up: Up) -> None:
    held = up.submit("--hold", "--", "sh", "-c", "echo first; echo second")
    follow = popen(up, "logs", "-f", held)
    try:
        assert follow.stderr is not None
        line = follow.stderr.readline()  # said once, before anything runs: the follower is waiting now
        assert line.startswith(f"labgang logs: job {held} has not started (PENDING: held by "), line
        assert up.job(held)["state"] == "pending"
        assert up.cli("release", held).returncode == 0
        out, err = follow.communicate(timeout=60)
    finally:
        if follow.poll() is None:
            follow.kill()
            follow.wait(10)
    assert (follow.returncode, out, err) == (0, "first\nsecond\n", "")
    assert up.job(held)["state"] == "succeeded"


def test_top_once_shows_a_share_of_one_gpu_as_queue_does(up: Up) -> None:
    shard = up.submit("--shards", "2", "--", "sleep", "300")
    mps = up.submit("--mps", "25", "--", "sleep", "300")
    try:
        for job in (shard, mps):
            up.wait_state(job, {"running"})
        gang = {row.split()[0]: row.split()[5] for row in up.cli("queue").stdout.splitlines()[1:]}
        assert (gang[shard], gang[mps]) == ("1xshard:2", "1xmps:25")
        out = up.cli("top", "--once")
        assert out.returncode == 0, out.stderr
        jobs = out.stdout.split("JOBS (", 1)[1].split("\n\n", 1)[0].splitlines()
        header = jobs[1].split()
        column = header.index("RANKS×DEV")
        rows = {row.split()[0]: row.split() for row in jobs[2:]}
        assert rows[shard][column] == "1×shard:2", jobs
        assert rows[mps][column] == "1×mps:25", jobs
    finally:
        up.cli("cancel", shard, mps)


def test_a_unit_less_gpu_mem_is_read_as_mib_with_one_warning_line(up: Up, tmp_path: Path) -> None:
    out = up.cli("submit", "--json", "--shards", "1", "--gpu-mem", "16", "--", "true")
    assert out.returncode == 0, out.stderr
    assert out.stderr == f"labgang submit: warning: {WARNING_16}\n"
    assert json.loads(out.stdout)["job"]["gpu_mem"] == 16 * 1024**2  # stdout stays JSON alone
    with_unit = up.cli("submit", "--json", "--mps", "20", "--gpu-mem", "16G", "--", "true")
    assert (with_unit.returncode, with_unit.stderr) == (0, "")
    assert json.loads(with_unit.stdout)["job"]["gpu_mem"] == 16 * 1024**3

    ran = up.cli("run", "--shards", "1", "--gpu-mem", "16", "--", "echo", "ok")
    assert (ran.returncode, ran.stdout) == (0, "ok\n"), ran.stderr
    assert ran.stderr.splitlines()[0] == f"labgang run: warning: {WARNING_16}"
    assert ran.stderr.count("warning") == 1

    script = tmp_path / "train.sbatch"
    script.write_text("#!/bin/sh\n#SBATCH --gres=shard:1\n#SBATCH --gpu-mem=16\necho script\n")
    out = up.cli("submit", str(script))
    assert out.returncode == 0, out.stderr
    assert out.stderr == f"labgang submit: warning: {script}:3: #SBATCH --gpu-mem=16: {WARNING_16}\n"
    assert up.wait_state(out.stdout.strip(), {"succeeded"})["gpu_mem"] == 16 * 1024**2


def test_a_job_of_groups_is_named_after_its_first_groups_command_as_slurm_names_a_het_job(up: Up) -> None:
    second = (":", "-n", "2", "-g", "1", "--", "sleep", "1")
    job = up.submit("--hold", "-n", "1", "-g", "0", "--", "python", "launch.py", *second)
    named = up.submit("--hold", "--name", "mine", "-n", "1", "-g", "0", "--", "true", *second)
    try:
        assert up.job(job)["name"] == "launch.py"
        assert up.job(named)["name"] == "mine"  # --name still wins
        assert up.jobs()[job]["name"] == "launch.py"
    finally:
        up.cli("cancel", job, named)


def test_submit_wrap_runs_the_text_as_a_one_line_sh_script_as_sbatch_does(up: Up, tmp_path: Path) -> None:
    job = up.submit("--wrap", 'echo "two words" $((1 + 2)) $0')
    assert up.wait_state(job, {"succeeded"})["name"] == "wrap"
    assert up.cli("logs", job).stdout == "two words 3 /bin/sh\n"
    named = json.loads(up.cli("submit", "--json", "-J", "mine", "--wrap", "exit 3").stdout)["job"]
    assert named["name"] == "mine" and named["argv"] == ["/bin/sh", "-c", "exit 3"]
    assert up.wait_state(named["id"], {"failed"})["exit_status"] == 3

    script = tmp_path / "train.sbatch"
    script.write_text("#!/bin/sh\necho script\n")
    before = next_id(up)
    for refused in (("--wrap", "hostname", "--", "true"), ("--wrap", "hostname", str(script)), ("--wrap", "")):
        out = up.cli("submit", *refused)
        lines = out.stderr.strip().splitlines()
        assert (out.returncode, out.stdout, len(lines)) == (2, "", 1), out.stderr
        assert lines[0].startswith("labgang submit: --wrap: "), lines[0]
    assert next_id(up) == before + 1  # nothing was submitted in between (only next_id's own job)


def test_history_without_a_coordinator_reads_the_store_read_only() -> None:
    with tempfile.TemporaryDirectory(prefix="lgnh", dir="/tmp") as d:
        instance = Up(Path(d))
        try:
            done = instance.submit("--name", "done", "--", "true")
            failed = instance.submit("--name", "bad", "--", "sh", "-c", "exit 4")
            for job in (done, failed):
                instance.wait_state(job, {"succeeded", "failed"})
            served = json.loads(instance.cli("history", "--json").stdout)["jobs"]
            table = instance.cli("history").stdout
            attempts = instance.cli("history", "--attempts", "-u", "all").stdout
            until = time.strftime("%Y-%m-%d %H:%M", time.localtime(time.time() + 120))  # after both ended
            reported = json.loads(instance.cli("report", "--until", until, "--json").stdout)
        finally:
            assert instance.stop() == 0, instance.output()
        store = Path(d) / "labgang.db"
        before = (sorted(p.name for p in Path(d).iterdir()), store.read_bytes())

        out = instance.cli("history", "--json")
        assert out.returncode == 0, out.stderr
        assert out.stderr == (
            f"labgang history: no coordinator answers at {Path(d) / 'labgang.sock'}; "
            f"read its store {store} directly (read-only)\n"
        )
        assert json.loads(out.stdout)["jobs"] == served  # the same rows the coordinator gave
        assert [(j["name"], j["state"], j["exit_status"]) for j in served] == [
            ("done", "succeeded", 0),
            ("bad", "failed", 4),
        ]
        out = instance.cli("history")
        assert (out.returncode, out.stdout) == (0, table)
        assert instance.cli("history", "--attempts", "-u", "all").stdout == attempts
        out = instance.cli("report", "--until", until, "--json")  # as sreport reads slurmdbd alone
        assert out.returncode == 0, out.stderr
        assert out.stderr == (
            f"labgang report: no coordinator answers at {Path(d) / 'labgang.sock'}; "
            f"read its store {store} directly (read-only)\n"
        )
        from_store = json.loads(out.stdout)
        assert from_store.pop("now") >= reported.pop("now")  # when each was made; all else the same
        assert from_store == reported and reported["total"]["attempts"] == 2, (from_store, reported)
        empty = instance.cli("history", "-q", "nope")
        assert empty.returncode == 0 and "note: no job of any user matches queue nope" in empty.stderr
        assert (sorted(p.name for p in Path(d).iterdir()), store.read_bytes()) == before  # nothing written

        broken = Path(d) / "broken"
        broken.mkdir()
        (broken / "labgang.db").write_bytes(b"not a database")
        out = instance.cli("history", "--state-dir", str(broken))
        assert out.returncode == 1 and len(out.stderr.splitlines()) == 1, out.stderr
        assert "cannot read the labgang store" in out.stderr


def test_history_without_a_coordinator_names_a_store_another_user_may_not_read(lab_users) -> None:
    (other, _) = lab_users
    with tempfile.TemporaryDirectory(prefix="lgnr", dir="/tmp") as d:
        Path(d).chmod(0o755)  # reachable by the other user, as /var/lib/labgang is; the store stays 0600
        instance = Up(Path(d))
        try:
            instance.wait_state(instance.submit("--", "true"), {"succeeded"})
        finally:
            assert instance.stop() == 0, instance.output()
        store = Path(d) / "labgang.db"
        before = store.read_bytes()
        out = other.run(["history"], env={"LABGANG_STATE_DIR": d})
        lines = out.stderr.strip().splitlines()
        assert (out.returncode, out.stdout, len(lines)) == (1, "", 1), out.stderr
        assert (
            f"the labgang store {store} is readable only by whoever runs that labgang (file mode 600, owner root)"
            in lines[0]
        )
        assert store.read_bytes() == before
