"""End to end with real processes: `labgang up --simulate` in the background, the shell commands
against it, and real torch.distributed gangs (gloo on CPU) launched by its agent.

One `labgang up` serves the whole module (starting one costs a second or two on the CI
machines); every test leaves no job holding devices behind it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
needs_torch = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None,
    reason="examples/ddp_allreduce.py needs the [torch] extra: pip install -e '.[torch]'",
)

REPO = Path(__file__).resolve().parents[2]
MACHINE = REPO / "config" / "sim" / "h100x8.toml"
STARTUP_S = 90.0  # a bound for a loaded machine; a healthy start takes one or two seconds


def _env(state_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["LABGANG_STATE_DIR"] = str(state_dir)
    # Jobs inherit this environment: `python` must be the interpreter that has torch.
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return env


class Labgang:
    """A running `labgang up` and a way to call the CLI against it."""

    def __init__(self, state_dir: Path, *up_flags: str) -> None:
        self.state_dir = state_dir
        self.env = _env(state_dir)
        self.log = open(state_dir / "up.log", "a+b")  # noqa: SIM115 - open while `labgang up` runs; closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "labgang.launcher", "up", "--simulate", str(MACHINE), *up_flags],
            cwd=REPO,
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def output(self) -> str:
        return (self.state_dir / "up.log").read_text(errors="replace")

    def wait_ready(self) -> None:
        deadline = time.monotonic() + STARTUP_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"labgang up exited with {self.proc.returncode}:\n{self.output()}")
            if self.cli("queues").returncode == 0:
                return
            time.sleep(0.2)
        raise AssertionError(f"labgang up did not answer within {STARTUP_S} s:\n{self.output()}")

    def cli(self, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "labgang.launcher", *args],
            cwd=REPO,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def popen(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "labgang.launcher", *args],
            cwd=REPO,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def job(self, job_id: str) -> dict:
        out = self.cli("show", "--json", job_id)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)["job"]

    def jobs(self) -> list[dict]:
        out = self.cli("queue", "--all", "--json")
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)["jobs"]

    def wait_state(self, job_id: str, states: set[str], timeout: float = 60.0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            job = self.job(job_id)
            if job["state"] in states:
                return job
            if time.monotonic() > deadline:
                raise AssertionError(f"job {job_id} stayed {job['state']}, wanted {states}: {job}")
            time.sleep(0.1)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
                raise AssertionError(f"labgang up did not stop on Ctrl-C:\n{self.output()}") from None
        self.log.close()
        return self.proc.returncode


@pytest.fixture(scope="module")
def lg():
    with tempfile.TemporaryDirectory(prefix="lge", dir="/tmp") as d:
        instance = Labgang(Path(d))
        try:
            instance.wait_ready()
            yield instance
        finally:
            code = instance.stop()
        assert code == 0, instance.output()


def test_up_says_where_it_is_and_what_to_try(lg):
    text = lg.output()
    assert str(lg.state_dir / "labgang.sock") in text
    assert "labgang run -n 4 -g 2 -- " in text
    [tcp] = re.findall(r"^  tcp: +127\.0\.0\.1:(\d+) \(agent link and read-only API\)$", text, flags=re.M)
    assert f"  metrics:   http://127.0.0.1:{tcp}/metrics\n" in text
    with urllib.request.urlopen(f"http://127.0.0.1:{tcp}/metrics", timeout=10) as reply:
        assert b"labgang_build_info" in reply.read()
    assert "  queue:     default (gpu=8; within queue: lower-priority; starvation after 300 s)" in text


@needs_torch
def test_run_a_4x2_ddp_gang(lg):
    out = lg.cli("run", "-n", "4", "-g", "2", "--", "python", "examples/ddp_allreduce.py")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "ddp_allreduce: ok: 4 ranks (gloo), all-reduce sum 10 == 10, 8 distinct devices" in out.stdout
    job_id = out.stderr.split("submitted job ", 1)[1].split()[0]
    job = lg.job(job_id)
    assert job["state"] == "succeeded" and job["exit_status"] == 0
    devices = [d for r in job["ranks"] for d in r["devices"]]
    assert len(devices) == 8 and len(set(devices)) == 8 and all(d.startswith("GPU-") for d in devices)
    logs = lg.cli("logs", job_id)
    assert logs.returncode == 0 and "ddp_allreduce: ok: 4 ranks" in logs.stdout


def test_run_all_ranks_prefixes_each_line_and_logs_reads_one_rank(lg):
    code = "import os; print('hello from rank', os.environ['RANK'])"
    out = lg.cli("run", "-n", "2", "-g", "1", "--all-ranks", "--", "python", "-c", code)
    assert out.returncode == 0, out.stderr
    assert sorted(out.stdout.splitlines()) == ["0: hello from rank 0", "1: hello from rank 1"]
    job_id = out.stderr.split("submitted job ", 1)[1].split()[0]
    one = lg.cli("logs", job_id, "--rank", "1")
    assert (one.returncode, one.stdout) == (0, "hello from rank 1\n")
    bad = lg.cli("logs", job_id, "--rank", "2")
    assert bad.returncode == 2 and "--rank" in bad.stderr


def test_run_exits_with_the_failing_rank_status(lg):
    out = lg.cli(
        "run", "-n", "2", "--", "python", "-c", "import os, sys; sys.exit(3 if os.environ['RANK'] == '1' else 0)"
    )
    assert out.returncode == 3, out.stderr
    assert "failed" in out.stderr


@needs_torch
def test_two_4x2_gangs_one_runs_whole_the_other_waits_whole(lg, tmp_path):
    gate = tmp_path / "go"
    wait_then_ddp = f"while [ ! -e {gate} ]; do sleep 0.05; done; exec python examples/ddp_allreduce.py"
    # The second gang's ranks only report their devices: the all-reduce itself is covered above,
    # and two torch gangs back to back cost CI twice the seconds.
    report = "import os; print(os.environ['RANK'], os.environ['CUDA_VISIBLE_DEVICES'])"
    first = lg.cli("submit", "-n", "4", "-g", "2", "--name", "first", "--", "sh", "-c", wait_then_ddp)
    second = lg.cli("submit", "-n", "4", "-g", "2", "--name", "second", "--", "python", "-c", report)
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    a, b = first.stdout.strip(), second.stdout.strip()
    assert len(_rank_pids(lg, a)) == 4
    pending = lg.job(b)
    assert pending["state"] == "pending"
    assert pending["reason"] and pending["reason"]["message"]
    assert not any(r.get("pid") for r in pending.get("ranks") or [])
    table = lg.cli("queue")
    row_b = next(line for line in table.stdout.splitlines() if line.startswith(b + " "))
    assert "PENDING" in row_b and f"({pending['reason']['message']})" in row_b
    gate.touch()
    assert lg.wait_state(a, {"succeeded", "failed"})["state"] == "succeeded"
    done = lg.wait_state(b, {"succeeded", "failed"})
    assert done["state"] == "succeeded", done
    assert done["start_time"] >= lg.job(a)["end_time"]
    seen = set()
    for rank in range(4):
        out = lg.cli("logs", b, "--rank", str(rank)).stdout.split()
        assert out[0] == str(rank) and len(out[1].split(",")) == 2
        seen.update(out[1].split(","))
    assert len(seen) == 8


def test_cancel_a_running_job(lg):
    sub = lg.cli("submit", "--grace", "2s", "--", "sleep", "60")
    job_id = sub.stdout.strip()
    lg.wait_state(job_id, {"running"})
    out = lg.cli("cancel", job_id)
    assert out.returncode == 0 and out.stdout.startswith(f"job {job_id}: ")
    assert lg.wait_state(job_id, {"cancelled"}, timeout=20)["state"] == "cancelled"
    assert job_id not in [j["id"] for j in lg.jobs()]
    twice = lg.cli("cancel", job_id)
    assert (twice.returncode, twice.stdout) == (0, f"job {job_id}: already cancelled\n")
    again = lg.cli("cancel", "99999")
    assert again.returncode == 1 and "99999" in again.stderr  # a well-formed id the coordinator lacks
    malformed = lg.cli("cancel", "no-such-job")
    assert malformed.returncode == 2 and "no-such-job" in malformed.stderr  # not an id at all: usage error


class StderrLines:
    """A process's stderr lines, read by a thread, so that a test can wait for one with a bound
    (a plain ``readline()`` blocks for as long as the process stays silent)."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.thread = threading.Thread(target=self._read, args=(proc.stderr,), daemon=True)
        self.thread.start()

    def _read(self, stream) -> None:
        for line in stream:
            self.lines.put(line)
        self.lines.put("")  # end of stream

    def wait_for(self, prefix: str, timeout: float = 60.0) -> str:
        """The first unseen line starting with ``prefix``; fail after ``timeout`` s or at end of stream."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no line {prefix!r} within {timeout:g} s; stderr so far: {self.seen}") from None
            if not line:
                raise AssertionError(f"stderr ended without a line {prefix!r}: {self.seen}")
            self.seen.append(line)
            if line.startswith(prefix):
                return line

    def rest(self, timeout: float = 60.0) -> str:
        """Everything after the lines already seen, once the stream has ended."""
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"stderr still open after {timeout:g} s"
        more = []
        while (line := self.lines.get_nowait()) != "":
            more.append(line)
        return "".join(more)


def test_ctrl_c_on_run_cancels_the_job(lg):
    proc = lg.popen("run", "--grace", "2s", "--", "sleep", "60")
    err = StderrLines(proc)
    job_id = err.wait_for("labgang: submitted job ").split()[-1]
    # `run` reports "running" once it has seen it: from then on Ctrl-C is the job's cancel.
    err.wait_for(f"labgang: job {job_id} running on ")
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 130, err.seen
    rest = err.rest()
    assert f"labgang: cancelling job {job_id}" in rest, rest
    # `run` keeps following after Ctrl-C until the job has ended, so its state is final now.
    assert lg.job(job_id)["state"] == "cancelled", rest
    proc.stdout.close()


def test_logs_of_a_job_that_has_not_run_say_why(lg):
    big = lg.cli("submit", "-g", "8", "--grace", "1s", "--", "sleep", "60").stdout.strip()
    lg.wait_state(big, {"running"})
    waiting = lg.cli("submit", "-g", "8", "--", "true").stdout.strip()
    lg.wait_state(waiting, {"pending"})
    out = lg.cli("logs", waiting)
    assert (out.returncode, out.stdout) == (0, "")
    assert out.stderr.startswith(f"labgang logs: job {waiting} has not started (PENDING: "), out.stderr
    follow = lg.popen("logs", "-f", waiting)
    first = follow.stderr.readline()
    assert first.startswith(f"labgang logs: job {waiting} has not started (PENDING: "), first
    assert lg.cli("cancel", waiting).returncode == 0
    rest, more = follow.communicate(timeout=30)
    assert follow.returncode == 0 and rest == ""
    assert more == f"labgang logs: job {waiting} was cancelled before it ran\n"  # said once more: the end
    out = lg.cli("logs", waiting)
    assert (out.returncode, out.stdout, out.stderr) == (
        0,
        "",
        f"labgang logs: job {waiting} was cancelled before it ran\n",
    )
    assert lg.cli("cancel", big).returncode == 0
    lg.wait_state(big, {"cancelled"}, timeout=20)


SIG_SCRIPT = """\
import signal, sys, time
t0 = time.monotonic()
def on(signum, frame):
    print(f"got {signal.Signals(signum).name} {time.monotonic() - t0:.2f}", flush=True)
    if signum == signal.SIGTERM:
        sys.exit(0)
signal.signal(signal.SIGUSR1, on)
signal.signal(signal.SIGTERM, on)
while True:
    time.sleep(0.05)
"""


def test_signal_warns_before_the_time_limit_and_sigterm_comes_at_it(lg, tmp_path):
    """Slurm's --signal: USR1 at T-2 s, SIGTERM at T = 4 s (not an early, unwarned stop)."""
    script = tmp_path / "sig.py"
    script.write_text(SIG_SCRIPT)
    out = lg.cli("run", "-n", "1", "--time", "4s", "--grace", "1s", "--signal", "USR1@2", "--", "python", str(script))
    got = [line.split() for line in out.stdout.splitlines() if line.startswith("got ")]
    assert [g[1] for g in got] == ["SIGUSR1", "SIGTERM"], out.stdout + out.stderr
    assert float(got[1][2]) - float(got[0][2]) >= 1.5, got  # SIGTERM waits for the limit
    job_id = next(line.split()[-1] for line in out.stderr.splitlines() if line.startswith("labgang: submitted job "))
    job = lg.job(job_id)
    assert any(h["message"].startswith("signal SIGUSR1 sent") for h in job["history"]), job["history"]
    assert job["state"] == "timeout" and "time limit" in job["reason"]["message"]


@pytest.mark.parametrize(
    "args, status, last_line",
    [
        # refused by the CLI itself: the same one-line style as the coordinator's refusals
        (
            ["-g", "0"],
            2,
            "labgang submit: -g/--gpus-per-worker: 0 is only for one group of a job of groups (CMD : OPTIONS -- CMD); "
            "allowed: 1 or more",
        ),
        # refused by the coordinator: one line naming the flag and what it allows
        (["-q", "nope"], 2, "labgang submit: -q/--queue: unknown queue 'nope' (allowed: default)"),
        (
            ["-p", "urgent"],
            2,
            "labgang submit: -p/--priority: 'urgent' is not an integer, and no priority classes "
            "are configured (allowed: an integer)",
        ),
        (
            ["-p", "99999999999999999999"],
            2,
            "labgang submit: -p/--priority: 99999999999999999999 is out of range "
            "(allowed: an integer from -2147483648 to 2147483647, a signed 32-bit",
        ),
        (["-n", "5", "-g", "2"], 1, "labgang submit: -n/--workers: job can never start: "),
        # the flag at fault, not always -n/--workers
        (["--mig", "1g.10gb"], 1, "labgang submit: --mig: job can never start: "),
        (["--gpu-model", "A100"], 1, "labgang submit: --gpu-model: job can never start: "),
        (["-g", "9"], 1, "labgang submit: -g/--gpus-per-worker: job can never start: "),
        (["-n", "2", "--nodes", "2"], 1, "labgang submit: -N/--nodes: job can never start: "),
        # API field names never leak: the flag, the rule, and how to write a duration
        # (--time 0 is no limit, as in Slurm: tests/cli/test_new_user_gaps.py)
        (["--time", "400d"], 2, "labgang submit: -t/--time: must be <= 31536000 seconds (365 days) (e.g. 30s, 5m, 2h)"),
        (["--grace", "99999999d"], 2, "labgang submit: --grace: must be <= 86400 seconds (1 day) (e.g. 30s, 5m, 2h)"),
    ],
    ids=[
        "gpus-0",
        "unknown-queue",
        "unknown-priority",
        "priority-out-of-range",
        "larger-than-the-machine",
        "mig",
        "gpu-model",
        "gpus-per-worker",
        "nodes",
        "time-too-long",
        "grace-too-long",
    ],
)
def test_refused_submission_changes_nothing(lg, args, status, last_line):
    before = lg.jobs()
    out = lg.cli("submit", *args, "--", "true")
    assert out.returncode == status, out.stderr
    lines = out.stderr.strip().splitlines()
    assert lines[-1].startswith(last_line), out.stderr
    if last_line.startswith("labgang submit: "):
        assert len(lines) == 1
    assert lg.jobs() == before


def test_queues_shows_the_default_queue_covering_the_machine(lg):
    out = lg.cli("queues")
    assert out.returncode == 0
    assert out.stdout.splitlines()[1].split()[:3] == ["default", "-", "gpu=8"]


def test_without_a_driver_up_points_at_simulate(tmp_path):
    from labgang.agent.nvml import NvmlUnavailable, open_backend

    try:
        open_backend().nvmlShutdown()
    except NvmlUnavailable:
        pass
    else:
        pytest.skip("this machine has an NVIDIA driver; `labgang up` would start on it")
    out = subprocess.run(
        [sys.executable, "-m", "labgang.launcher", "up", "--state-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "--simulate FILE" in lines[0]


def _rank_pids(instance: Labgang, job_id: str) -> list[int]:
    deadline = time.monotonic() + 30
    while True:
        ranks = instance.wait_state(job_id, {"running"})["ranks"]
        if ranks and all(isinstance(r["pid"], int) for r in ranks):
            return [r["pid"] for r in ranks]
        assert time.monotonic() < deadline, f"job {job_id} runs without rank pids: {ranks}"
        time.sleep(0.1)


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_ctrl_c_on_up_stops_its_jobs_by_default_and_the_next_up_runs_them_again():
    with tempfile.TemporaryDirectory(prefix="lgs", dir="/tmp") as d:
        instance = Labgang(Path(d))
        try:
            instance.wait_ready()
            job_id = instance.cli("submit", "-n", "2", "--grace", "2s", "--", "sleep", "60").stdout.strip()
            once = instance.cli("submit", "--no-requeue", "--grace", "2s", "--", "sleep", "60").stdout.strip()
            pids = _rank_pids(instance, job_id)
            _rank_pids(instance, once)
            # run --requeue: requeued as a submitted job is (without it a run job ends with its run)
            attached = instance.popen("run", "--requeue", "--grace", "2s", "--", "sleep", "60")
            third = str(int(once) + 1)
            # `run` submits in its own process: wait until its job exists before asking about it.
            deadline = time.monotonic() + 30
            while not any(j["id"] == third for j in instance.jobs()):
                assert time.monotonic() < deadline and attached.poll() is None, "labgang run submitted nothing"
                time.sleep(0.05)
            _rank_pids(instance, third)
        finally:
            code = instance.stop()
        assert code == 0, instance.output()
        assert (
            f"labgang up: stopped: stopped 2 jobs ({job_id}, {third}); they will run again at the next "
            "`labgang up`; "
            f"stopped and cancelled {once} (submitted with --no-requeue or by `labgang run`)"
        ) in instance.output()
        assert not any(_alive(pid) for pid in pids)
        assert not (Path(d) / "labgang.sock").exists()
        assert "disconnected" not in instance.output(), instance.output()  # an orderly stop warns of nothing
        _, err = attached.communicate(timeout=30)
        assert attached.returncode == 1 and "exited with status" not in err, err
        assert "labgang stopped while following job" in err.splitlines()[-1], err
        second = Labgang(Path(d))
        try:
            second.wait_ready()
            job = second.wait_state(job_id, {"running"})
            assert job["restart_count"] == 1 and job["exit_status"] is None
            assert any(h["message"].startswith("stopped: labgang up shut down") for h in job["history"])
            assert not any(h["event"] == "failed" for h in job["history"])
            assert second.job(once)["state"] == "cancelled"
            assert second.cli("cancel", job_id, third).returncode == 0
            second.wait_state(job_id, {"cancelled"}, timeout=20)
            second.wait_state(third, {"cancelled"}, timeout=20)
        finally:
            assert second.stop() == 0, second.output()


def test_keep_jobs_leaves_ranks_running_for_the_next_up():
    with tempfile.TemporaryDirectory(prefix="lgk", dir="/tmp") as d:
        first = Labgang(Path(d), "--keep-jobs")
        try:
            first.wait_ready()
            job_id = first.cli("submit", "-n", "2", "--grace", "2s", "--", "sleep", "60").stdout.strip()
            pids = _rank_pids(first, job_id)
        finally:
            assert first.stop() == 0, first.output()
        assert all(_alive(pid) for pid in pids)
        assert f"left 1 job running ({job_id}); the next `labgang up` re-adopts it" in first.output()
        assert "disconnected" not in first.output(), first.output()  # an orderly stop warns of nothing
        second = Labgang(Path(d), "--keep-jobs")
        try:
            second.wait_ready()
            assert second.job(job_id)["state"] == "running"  # re-adopted, not restarted
            assert [r["pid"] for r in second.job(job_id)["ranks"]] == pids
            readopted = [h["message"] for h in second.job(job_id)["history"] if h["event"] == "re-adopted"]
            assert readopted and "still running" in readopted[0]  # the history says so
            listed = json.loads(second.cli("history", "--json").stdout)["jobs"]
            assert [(j["id"], j["state"], j["restart_count"]) for j in listed] == [(job_id, "running", 0)]
            assert second.cli("cancel", job_id).returncode == 0
            second.wait_state(job_id, {"cancelled"}, timeout=20)
        finally:
            assert second.stop() == 0, second.output()
        assert not any(_alive(pid) for pid in pids)


def test_two_simulated_instances_on_one_host_do_not_see_each_others_ranks():
    """Both load h100x8.toml (same UUIDs); each one's ranks are tagged with its own scope."""
    with (
        tempfile.TemporaryDirectory(prefix="lga", dir="/tmp") as da,
        tempfile.TemporaryDirectory(prefix="lgb", dir="/tmp") as db,
    ):
        a, b = Labgang(Path(da)), Labgang(Path(db))
        try:
            a.wait_ready()
            b.wait_ready()
            job_a = a.cli("submit", "-n", "1", "-g", "8", "--grace", "2s", "--", "sleep", "60").stdout.strip()
            pids_a = _rank_pids(a, job_a)
            # A's rank names all 8 UUIDs in CUDA_VISIBLE_DEVICES; without scopes B would count it
            # as a foreign process on every device and keep its job pending with 0 GPUs free.
            job_b = b.cli("submit", "-n", "1", "-g", "8", "--grace", "2s", "--", "sleep", "60").stdout.strip()
            pids_b = _rank_pids(b, job_b)
            assert a.job(job_a)["state"] == "running" and all(_alive(pid) for pid in pids_a + pids_b)
            for instance, job_id in ((a, job_a), (b, job_b)):
                devices = [d for r in instance.job(job_id)["ranks"] for d in r["devices"]]
                assert len(set(devices)) == 8, devices
                assert instance.cli("cancel", job_id).returncode == 0
                instance.wait_state(job_id, {"cancelled"}, timeout=20)
        finally:
            codes = (a.stop(), b.stop())
        assert codes == (0, 0), a.output() + b.output()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_or_sighup_on_run_cancels_the_job_like_ctrl_c(lg, sig):
    proc = lg.popen("run", "--grace", "2s", "--", "sleep", "60")
    line, job_id = "", None
    deadline = time.monotonic() + 30
    while "running on" not in line and time.monotonic() < deadline:
        line = proc.stderr.readline()
        if line.startswith("labgang: submitted job "):
            job_id = line.split()[-1]
    assert job_id is not None and "running on" in line
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + sig, err
    assert f"labgang: {sig.name}: cancelling job {job_id}" in err
    assert f"job {job_id} cancelled" in err  # it waited for the stop and said so
    assert lg.job(job_id)["state"] == "cancelled"


def test_show_explains_a_command_that_could_not_start(lg):
    out = lg.cli("run", "--", "no-such-command-lg14")
    assert out.returncode == 127, out.stderr
    job_id = next(line.split()[-1] for line in out.stderr.splitlines() if line.startswith("labgang: submitted job "))
    shown = lg.cli("show", job_id)
    assert shown.returncode == 0, shown.stderr
    assert (
        "Error:       rank 0: cannot start 'no-such-command-lg14': No such file or directory (exit status 127)"
        in shown.stdout
    ), shown.stdout
    as_json = json.loads(lg.cli("show", "--json", job_id).stdout)["job"]
    assert as_json["ranks"][0]["start_error"] == "cannot start 'no-such-command-lg14': No such file or directory"
    # That text was the coordinator's (GET /v1/jobs/{id}?view=text): the one the command writes itself
    # from the JobView, the rank's log and the pitfall findings, at an instant of the request.
    from labgang.launcher.api.client import Client
    from labgang.launcher.cli.format import job_detail
    from labgang.launcher.cli.job_facts import add_pitfalls, add_start_errors

    with Client(lg.state_dir / "labgang.sock") as client:
        since = time.time()
        text = client.job_text(job_id)
        until = time.time()
        job = client.job(job_id)
        add_start_errors(client, job)
        add_pitfalls(client, job)
    assert isinstance(text, str) and "rank 0: cannot start 'no-such-command-lg14'" in text
    assert text in {job_detail(job, since + i * 0.01) for i in range(int((until - since) / 0.01) + 2)}


def test_busy_kernels_on_idle_sms_show_in_show_top_and_metrics(lg):
    sub = lg.cli("submit", "--name", "busy-kernels", "--", "python", "examples/busy_kernels_idle_sms.py", "120")
    assert sub.returncode == 0, sub.stderr
    job_id = sub.stdout.strip()
    try:
        deadline = time.monotonic() + 90
        while True:
            job = lg.job(job_id)
            kinds = [f["kind"] for f in job.get("pitfalls") or []]
            if "kernel-busy-sm-idle" in kinds or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        if "kernel-busy-sm-idle" not in kinds:  # say what the watch saw: the rank's devices, their readings, the log
            nodes = lg.cli("nodes", "--json").stdout
            pitfalls = lg.cli("top", "--once", "--width", "250").stdout
            raise AssertionError(
                f"no kernel-busy-sm-idle finding for job {job_id} in 90 s\n"
                f"state {job['state']}, ranks {job.get('ranks')}\n"
                f"nodes: {nodes[-4000:]}\ntop: {pitfalls}\nup.log tail:\n{lg.output()[-6000:]}"
            )
        [finding] = [f for f in job["pitfalls"] if f["kind"] == "kernel-busy-sm-idle"]
        assert finding["numbers"] == {"utilization_gpu_pct": 100.0, "sm_active_pct": 5.0}
        shown = lg.cli("show", job_id).stdout
        assert "kernel-busy-sm-idle" in shown and "utilization.gpu 100% but SM activity 5%" in shown, shown
        once = lg.cli("top", "--once", "--width", "250").stdout
        assert "kernel-busy-sm-idle" in once and "utilization.gpu 100% but SM activity 5%" in once, once
        from labgang.launcher.api.client import Client

        with Client(lg.state_dir / "labgang.sock") as client:
            _, _, body = client.request("GET", "/metrics")
        assert 'kind="kernel-busy-sm-idle"' in body.decode() and f'job="{job_id}"' in body.decode()
    finally:
        lg.cli("cancel", job_id)
