"""`labgang up` stopping jobs that ignore SIGTERM: it says it waits for their grace periods, and a
second Ctrl-C (or SIGTERM) kills their ranks at once instead of waiting the grace out."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MACHINE = REPO / "config" / "sim" / "h100x8.toml"
WAITING = "labgang up: stopping 1 job: waiting up to 600 s for their grace periods; Ctrl-C again to kill them now"


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "labgang.launcher", *args], env=env, capture_output=True, text=True, timeout=60
    )


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_second_interrupt_kills_ranks_that_wait_out_their_grace() -> None:
    with tempfile.TemporaryDirectory(prefix="lgint", dir="/tmp") as d:
        env = {**os.environ, "LABGANG_STATE_DIR": d}
        env.pop("CUDA_VISIBLE_DEVICES", None)
        out = Path(d) / "up.log"
        log = open(out, "w+b")  # noqa: SIM115 - closed below
        up = subprocess.Popen(
            [sys.executable, "-m", "labgang.launcher", "up", "--simulate", str(MACHINE)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        pids: list[int] = []
        try:
            deadline = time.monotonic() + 60
            while cli(env, "queues").returncode != 0:
                assert up.poll() is None and time.monotonic() < deadline, out.read_text()
                time.sleep(0.2)
            ready = Path(d) / "ignoring"
            rank = (
                "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                f"open({str(ready)!r}, 'w').close(); time.sleep(3600)"
            )
            job_id = cli(env, "submit", "--grace", "10m", "--", sys.executable, "-c", rank).stdout.strip()
            while not (pids and ready.exists()):
                assert time.monotonic() < deadline, "the rank never started"
                job = json.loads(cli(env, "show", "--json", job_id).stdout)["job"]
                pids = [r["pid"] for r in job["ranks"] if r["pid"] and job["state"] == "running"]
                time.sleep(0.1)
            up.send_signal(signal.SIGINT)
            while WAITING not in out.read_text():
                assert up.poll() is None and time.monotonic() < deadline, out.read_text()
                time.sleep(0.1)
            assert all(alive(pid) for pid in pids)  # SIGTERM ignored: still inside its grace period
            up.send_signal(signal.SIGINT)
            assert up.wait(120) == 0, out.read_text()  # not the 600 s grace
            text = out.read_text()
            assert "labgang up: killing the ranks of 1 job now (SIGKILL)" in text, text
            assert f"stopped 1 job ({job_id}); it will run again at the next `labgang up`" in text, text
            assert not any(alive(pid) for pid in pids)
        finally:
            if up.poll() is None:
                os.killpg(up.pid, signal.SIGKILL)
                up.wait(10)
            for pid in pids:  # ranks run in sessions of their own, and this one ignores SIGTERM
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)
            log.close()
