"""``labgang up --keep-jobs``: the ranks it leaves running outlive the node lease (nothing can start
their jobs elsewhere: the coordinator stopped too), and the next ``labgang up`` re-adopts them
and arms the lease again. Without the suspension, the ranks' small parents would fence them once
the lease ran out (agent/supervisor/leasewatch.py)."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import pytest
from labgang.agent.supervisor.leasewatch import LEASE_CHECK_S

from tests.cli.test_end_to_end import Labgang, _alive, _rank_pids

pytestmark = pytest.mark.slow

NODE_TIMEOUT_S = 2.0  # the lease runs out 0.8 x this after the last renewal


def lease(state_dir: Path) -> dict[str, object]:
    return json.loads((state_dir / "agent" / "lease.json").read_text())


def wait_armed(state_dir: Path, timeout: float = 30.0) -> dict[str, object]:
    """The lease once an agent saved a deadline in it (its first renewal was answered)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            saved = lease(state_dir)
            if "expires_mono" in saved:
                return saved
        except (OSError, ValueError):
            pass
        assert time.monotonic() < deadline, "the agent never saved an armed lease"
        time.sleep(0.1)


def test_ranks_kept_by_up_outlive_the_lease_and_the_next_up_readopts_them() -> None:
    with tempfile.TemporaryDirectory(prefix="lgkl", dir="/tmp") as d:
        base = Path(d)
        cfg = base / "cluster.toml"
        cfg.write_text(f'node_timeout_s = {NODE_TIMEOUT_S}\n[[queues]]\nname = "default"\nnominal = {{ gpu = 8 }}\n')
        first = Labgang(base, "--keep-jobs", "--config", str(cfg))
        try:
            first.wait_ready()
            job_id = first.cli("submit", "-n", "2", "--grace", "1s", "--", "sleep", "120").stdout.strip()
            pids = _rank_pids(first, job_id)
            wait_armed(base)
        finally:
            assert first.stop() == 0, first.output()
        # Past the deadline an armed lease would have had (renewals every 0.4 s: at most 1.6 s
        # after the stop), with time for two of the small parents' checks: still running.
        until = time.monotonic() + 0.8 * NODE_TIMEOUT_S + 2 * LEASE_CHECK_S + 0.5
        while time.monotonic() < until:
            assert all(_alive(pid) for pid in pids), "a kept rank was fenced after labgang up stopped"
            time.sleep(0.2)
        left = lease(base)
        assert "expires_mono" not in left and left["reason"] == "labgang up stopped with --keep-jobs", left
        second = Labgang(base, "--keep-jobs", "--config", str(cfg))
        try:
            second.wait_ready()
            assert second.job(job_id)["state"] == "running"
            assert [r["pid"] for r in second.job(job_id)["ranks"]] == pids  # re-adopted, not restarted
            assert "expires_mono" in wait_armed(base)  # fenced again if this agent dies
            assert second.cli("cancel", job_id).returncode == 0
            second.wait_state(job_id, {"cancelled"}, timeout=20)
        finally:
            assert second.stop() == 0, second.output()
        assert not any(_alive(pid) for pid in pids)
