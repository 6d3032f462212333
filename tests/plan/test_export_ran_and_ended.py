"""A new user's finding: ``history --export`` silently dropped jobs that ran. Against a real
``labgang up --simulate`` (4 GPUs): a job that hit its ``--time`` (TIMEOUT) is exported with its
run time and ``time_limit`` (its replay ends TIMEOUT too); a job preempted and then cancelled while
pending is exported with its run's held time, and a note counts it (a scenario cannot cancel a
job); a job cancelled before it ever ran is left out and a note counts it."""

from __future__ import annotations

import json
import tempfile
import tomllib
from pathlib import Path

import pytest
from up_harness import REPO, Up

pytestmark = pytest.mark.slow

N1 = REPO / "config" / "sim" / "n1-4gpu.toml"


def test_timed_out_and_preempted_then_cancelled_jobs_are_exported_and_the_rest_counted(tmp_path: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="lgpx", dir="/tmp") as d:
        up = Up(Path(d), N1)
        try:
            timed = up.submit("-g", "1", "--time", "1s", "--grace", "0", "--", "sleep", "30")
            up.wait_state(timed, {"timeout"})
            low = up.submit("-g", "3", "--grace", "0", "--", "sleep", "60")
            up.wait_state(low, {"running"})
            high = up.submit("-g", "4", "-p", "5", "--grace", "0", "--", "sleep", "60")
            up.wait_state(high, {"running"})
            up.wait_state(low, {"pending"})
            never = up.submit("-g", "4", "--", "true")
            for job in (low, never, high):
                assert up.cli("cancel", job).returncode == 0
            up.wait("every job ended", lambda jobs: not jobs)

            out_file = tmp_path / "h.toml"
            out = up.cli("history", "--export", str(out_file))
            assert out.returncode == 0, out.stderr
            by_id = {j["id"]: j for j in tomllib.loads(out_file.read_text())["jobs"]}
            assert set(by_id) == {f"j{timed}", f"j{low}", f"j{high}"}, by_id
            assert by_id[f"j{timed}"]["time_limit"] == 1.0 and by_id[f"j{timed}"]["duration"] >= 1.0
            assert by_id[f"j{low}"]["duration"] > 0
            assert "1 job(s) of the period ended without ever holding devices: not replayed" in out.stderr
            assert "1 job(s) ran, were preempted or requeued, then cancelled while pending" in out.stderr
            assert "wrote 3 finished jobs" in out.stderr

            sim = up.cli("simulate", "--trace", str(out_file))
            assert sim.returncode == 0, sim.stdout + sim.stderr
            events = [json.loads(line) for line in sim.stdout.splitlines() if line.startswith("{")]
            ends = {e.get("job"): e.get("state") for e in events if e.get("event") == "finish"}
            assert ends[f"j{timed}"] == "timeout", ends
            replayed = up.cli("plan", "replay", str(out_file), "--json")
            assert replayed.returncode == 0, replayed.stderr
            every = json.loads(replayed.stdout)["all"]
            assert every["preemptions"] == 1, every  # the store's preemption, replayed
        finally:
            assert up.stop() == 0, up.output()
