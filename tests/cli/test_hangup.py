"""`labgang up` whose terminal closes (SIGHUP) stops like Ctrl-C or SIGTERM: its ranks are
stopped and requeued, not left running with nobody watching them."""

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


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "labgang.launcher", *args], env=env, capture_output=True, text=True, timeout=60
    )


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_sighup_stops_up_and_its_ranks() -> None:
    with tempfile.TemporaryDirectory(prefix="lghup", dir="/tmp") as d:
        env = {**os.environ, "LABGANG_STATE_DIR": d}
        env.pop("CUDA_VISIBLE_DEVICES", None)
        log = open(Path(d) / "up.log", "w+b")  # noqa: SIM115 - closed below
        up = subprocess.Popen(
            [sys.executable, "-m", "labgang.launcher", "up", "--simulate", str(MACHINE)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 60
            while cli(env, "queues").returncode != 0:
                assert up.poll() is None and time.monotonic() < deadline, (Path(d) / "up.log").read_text()
                time.sleep(0.2)
            job_id = cli(env, "submit", "--grace", "2s", "--", "sleep", "300").stdout.strip()
            pids: list[int] = []
            while not pids:
                assert time.monotonic() < deadline, "the rank never started"
                job = json.loads(cli(env, "show", "--json", job_id).stdout)["job"]
                pids = [r["pid"] for r in job["ranks"] if r["pid"] and job["state"] == "running"]
                time.sleep(0.1)
            up.send_signal(signal.SIGHUP)
            assert up.wait(60) == 0, (Path(d) / "up.log").read_text()
            assert (
                f"stopped 1 job ({job_id}); it will run again at the next `labgang up`"
                in (Path(d) / "up.log").read_text()
            )
            assert not any(alive(pid) for pid in pids)
        finally:
            if up.poll() is None:
                os.killpg(up.pid, signal.SIGKILL)
                up.wait(10)
            log.close()
