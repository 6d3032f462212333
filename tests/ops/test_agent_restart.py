"""Restarting or upgrading the agent service leaves its jobs running.

The test stands in for systemd: it reads labgang-agent.service and stops the real
`labgang agent` process the way systemd would with that unit (KillMode=process: SIGTERM
to the main process only, SIGKILL to it after TimeoutStopSec), or kills it as a crash
would, then starts it again as `systemctl restart` / Restart=on-failure would. The rank
is a real process started by the real supervisor under a real coordinator.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest
from harness import Cluster, rank_script, wait_for

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
UNIT = REPO / "systemd" / "labgang-agent.service"
AGENT = "agent-n1"


def _seconds(value: str) -> float:
    """A systemd time span as the units here write it ("30s", "2min", "90")."""
    for suffix, factor in (("min", 60.0), ("ms", 0.001), ("s", 1.0)):
        if value.endswith(suffix):
            return float(value[: -len(suffix)]) * factor
    return float(value)


class SystemdStandIn:
    """What systemd does to the agent's processes on stop, per the unit's [Service] section.

    Args:
        service: the unit's [Service] keys (the ``unit_service`` fixture's result).
    """

    def __init__(self, service: dict[str, list[str]]) -> None:
        self.service = {key: values[-1] for key, values in service.items()}

    def stop(self, proc: subprocess.Popen) -> int:
        """`systemctl stop`: signal whom KillMode says, wait TimeoutStopSec, then SIGKILL them."""
        kill_mode = self.service.get("KillMode", "control-group")
        assert kill_mode == "process", f"KillMode={kill_mode} signals every process of the unit, ranks included"
        timeout = _seconds(self.service.get("TimeoutStopSec", "90s"))
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout=min(timeout, 20.0))
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait(timeout=10)

    @staticmethod
    def crash(proc: subprocess.Popen) -> int:
        """The agent dies abruptly (OOM kill, segfault, `systemctl kill -s KILL --kill-whom=main`)."""
        proc.kill()
        return proc.wait(timeout=10)


RANK = rank_script(
    "import os, sys, time\n"
    "base = os.environ['TEST_BASE']\n"
    "open(os.path.join(base, 'started'), 'w').write(str(os.getpid()))\n"
    "while not os.path.exists(os.path.join(base, 'go')):\n"
    "    time.sleep(0.05)\n"
    "sys.exit(int(open(os.path.join(base, 'go')).read()))\n"
)


@pytest.fixture
def cluster():
    # The production default node timeout: a restart on a loaded CI machine must not count as a lost node.
    c = Cluster({"n1": "n1-4gpu.toml"}, node_timeout_s=30.0)
    try:
        yield c.start()
    finally:
        c.stop()


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # gone (ENOENT), or reaped between open and read (ESRCH)
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _running_pid(cluster: Cluster, job_id: str) -> int:
    """The rank's pid once the job runs and its agent has reported the pid."""
    cluster.wait_state(job_id, "running")
    return wait_for(lambda: cluster.job(job_id)["ranks"][0]["pid"], timeout=10, what="the rank's pid")


def _started_by(cluster: Cluster, pid: int) -> str:
    """The rank's 'started' marker once the rank with ``pid`` has written it.

    The agent reports a rank's pid as soon as the process exists; the Python code that writes
    the marker runs later (much later on a busy machine), so the file is waited for, not assumed.
    """
    marker = cluster.base / "started"
    return wait_for(
        lambda: marker.exists() and marker.read_text() == str(pid) and str(pid), what="the 'started' marker"
    )


def _restart_agent(cluster: Cluster) -> None:
    cluster.start_agent("n1")
    wait_for(lambda: "n1" in cluster.connected_nodes(), timeout=20, what="agent n1 back")


def test_service_restart_keeps_the_rank_and_readopts_it(cluster, unit_service):
    """`systemctl restart labgang-agent` (what an upgrade does) while a rank runs."""
    systemd = SystemdStandIn(unit_service(UNIT))
    job = cluster.submit(RANK)
    pid = _running_pid(cluster, job["id"])
    assert _alive(pid)
    _started_by(cluster, pid)

    code = systemd.stop(cluster.procs[AGENT])
    assert code == 0, f"the agent should exit cleanly on SIGTERM:\n{cluster.log_text(AGENT)}"
    # The rank outlives its agent: alive now, re-adopted with the same pid below, and it ends
    # with the exit status it chooses (a rank the agent's exit had signalled would not).
    assert _alive(pid), "the rank died with its agent"

    _restart_agent(cluster)
    assert _running_pid(cluster, job["id"]) == pid, "re-adopted, not started again"
    assert (cluster.base / "started").read_text() == str(pid)  # the rank was never started twice

    (cluster.base / "go").write_text("0")
    done = cluster.wait_state(job["id"], {"succeeded", "failed"}, timeout=20)
    assert done["state"] == "succeeded" and done["ranks"][0]["exit_status"] == 0, done


@pytest.mark.parametrize("how", ["stop", "crash"])
def test_rank_exit_while_the_agent_is_down_is_reported_after_restart(cluster, how, unit_service):
    systemd = SystemdStandIn(unit_service(UNIT))
    job = cluster.submit(RANK)
    pid = _running_pid(cluster, job["id"])

    getattr(systemd, how)(cluster.procs[AGENT])
    assert _alive(pid)
    (cluster.base / "go").write_text("3")  # the rank fails while nobody supervises it
    wait_for(lambda: not _alive(pid), timeout=10, what="the rank to exit")
    assert cluster.job(job["id"])["state"] == "running"  # the coordinator cannot know yet

    _restart_agent(cluster)
    done = cluster.wait_state(job["id"], {"succeeded", "failed"}, timeout=20)
    assert done["state"] == "failed", done
    assert done["exit_status"] == 3 and done["ranks"][0]["exit_status"] == 3, done
