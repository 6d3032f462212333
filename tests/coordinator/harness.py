"""A small multi-node cluster on one machine for the coordinator tests.

A coordinator and agents run as real subprocesses (``python -m labgang.launcher ...``)
on loopback, each agent with a simulated NVML machine file and its own state
directory; clients talk to the coordinator's real Unix socket.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from labgang.launcher.api.client import Client

REPO = Path(__file__).resolve().parents[2]
SIM = REPO / "config" / "sim"


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Every wait below is on a real condition; its bound is only how long a failing test takes to say so.
# A loaded machine (two busy cores, other test runs) starts a Python process in seconds, not tens of
# milliseconds, so each bound is stretched by this factor: the tests still finish as soon as the
# condition holds.
WAIT_SLACK = 3.0


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.05, what: str = "") -> Any:
    """Poll ``predicate`` until it returns something truthy; fail the test after ``timeout`` x
    :data:`WAIT_SLACK` seconds (the message names ``what`` and the last value seen)."""
    timeout *= WAIT_SLACK
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what or predicate} (last: {last!r})")


class Cluster:
    """Coordinator + agents as subprocesses under one short temporary directory.

    Args:
        nodes: node name → simulated machine file name in ``config/sim``.
        config_extra: extra top-level lines for ``cluster.toml``.
        nominal_gpus: the ``default`` queue's nominal gpu quota.
    """

    def __init__(
        self,
        nodes: dict[str, str],
        *,
        config_extra: str = "",
        nominal_gpus: int = 8,
        node_timeout_s: float = 3.0,
        startup_timeout_s: float = 15.0,
        queue_extra: str = "",
        agent_supervisor: str = "allow_root = true\n",
    ) -> None:
        # Unix socket paths are limited to 107 bytes: keep the base short.
        self.base = Path(tempfile.mkdtemp(prefix="lgc-", dir="/tmp"))
        self.port = free_port()
        self.token_file = self.base / "token"
        self.token_file.write_text("s3cret-cluster-token\n")
        self.token_file.chmod(0o600)
        self.coord_dir = self.base / "c"
        self.config_file = self.base / "cluster.toml"
        self.config_file.write_text(
            f'token_file = "{self.token_file}"\n'
            f'tcp_host = "127.0.0.1"\ntcp_port = {self.port}\n'
            f"node_timeout_s = {node_timeout_s}\nstartup_timeout_s = {startup_timeout_s}\n"
            "timer_interval_s = 0.2\nrequeue_backoff_s = 0.5\ndefault_grace_s = 1.0\n"
            + config_extra
            + f'\n[[queues]]\nname = "default"\nnominal = {{ gpu = {nominal_gpus} }}\n'
            + queue_extra
        )
        self.nodes = dict(nodes)
        self.agent_supervisor = agent_supervisor  # the agents' [supervisor] table
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.logs: dict[str, Path] = {}

    # ----- processes -------------------------------------------------------------------------

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        log = self.base / f"{name}.log"
        self.logs[name] = log
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "labgang.launcher", *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=REPO,
                start_new_session=True,
            )
        self.procs[name] = proc
        return proc

    def start_coordinator(self) -> None:
        self._spawn(
            "coordinator", ["coordinator", "--config", str(self.config_file), "--state-dir", str(self.coord_dir)]
        )
        wait_for(lambda: self.socket.exists() and self._answers(), timeout=15, what="coordinator socket")

    def agent_dir(self, node: str) -> Path:
        return self.base / node

    def start_agent(self, node: str, *, token_file: Path | None = None, coordinator_port: int | None = None) -> None:
        """Start ``node``'s agent; ``coordinator_port``: dial this port instead (a relay to the coordinator)."""
        cfg = self.base / f"{node}.toml"
        cfg.write_text(
            f'node = "{node}"\ncoordinator = "http://127.0.0.1:{coordinator_port or self.port}"\n'
            f'token_file = "{token_file or self.token_file}"\naddress = "127.0.0.1"\n'
            f'state_dir = "{self.agent_dir(node)}"\ninterval_s = 0.5\nsample_s = 0.2\nreconnect_max_s = 1.0\n'
            "user_socket = true\n[supervisor]\n" + self.agent_supervisor
        )
        self._spawn(f"agent-{node}", ["agent", "--config", str(cfg), "--simulate", str(SIM / self.nodes[node])])

    def start(self) -> Cluster:
        self.start_coordinator()
        for node in self.nodes:
            self.start_agent(node)
        wait_for(lambda: self.connected_nodes() == set(self.nodes), timeout=20, what="all agents connected")
        return self

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        proc = self.procs[name]
        os.kill(proc.pid, sig)
        if sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT):
            proc.wait(timeout=10)

    def stop(self) -> None:
        for proc in list(self.procs.values()):
            if proc.poll() is None:
                try:
                    os.kill(proc.pid, signal.SIGCONT)
                    proc.send_signal(signal.SIGTERM)
                    proc.wait(timeout=10)
                except (subprocess.TimeoutExpired, ProcessLookupError):
                    proc.kill()
                    proc.wait(timeout=5)
        self.kill_leftover_ranks()

    def kill_leftover_ranks(self) -> None:
        """Kill rank processes the test left behind (found by their TEST_BASE marker)."""
        marker = f"TEST_BASE={self.base}".encode()
        for pid_dir in Path("/proc").iterdir():
            if not pid_dir.name.isdigit():
                continue
            try:
                if marker in (pid_dir / "environ").read_bytes().split(b"\0"):
                    os.kill(int(pid_dir.name), signal.SIGKILL)
            except (OSError, ProcessLookupError):
                continue

    def log_text(self, name: str) -> str:
        return self.logs[name].read_text(errors="replace")

    # ----- client ----------------------------------------------------------------------------

    @property
    def socket(self) -> Path:
        return self.coord_dir / "labgang.sock"

    def client(self, socket_path: Path | None = None) -> Client:
        return Client(socket_path or self.socket, timeout=10)

    def _answers(self) -> bool:
        try:
            with self.client() as c:
                c.version()
            return True
        except Exception:
            return False

    def connected_nodes(self) -> set[str]:
        try:
            with self.client() as c:
                return {n["name"] for n in c.nodes() if n["connected"]}
        except Exception:
            return set()

    def job(self, job_id: str) -> dict[str, Any]:
        with self.client() as c:
            return c.job(job_id)

    def submit(self, argv: list[str], **fields: Any) -> dict[str, Any]:
        body = {"argv": argv, "cwd": str(self.base), "env": {"TEST_BASE": str(self.base)}}
        body.update(fields)
        with self.client() as c:
            return c.submit(body)

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run ``labgang ARGS --state-dir <the coordinator's>`` (not checked; output as text)."""
        return subprocess.run(
            [sys.executable, "-m", "labgang.launcher", *args, "--state-dir", str(self.coord_dir)],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=REPO,
            check=False,
        )

    def cli_ok(self, *args: str) -> str:
        """``labgang ARGS`` as :meth:`cli` runs it, asserted to exit 0; its stdout.

        Raises AssertionError (with the command's stderr) on any other exit status.
        """
        proc = self.cli(*args)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    def wait_state(self, job_id: str, states: set[str] | str, timeout: float = 15.0) -> dict[str, Any]:
        wanted = {states} if isinstance(states, str) else states
        return wait_for(
            lambda: (j := self.job(job_id)) and j["state"] in wanted and j,
            timeout=timeout,
            what=f"job {job_id} in {sorted(wanted)}",
        )


def inventory_dict(machine: str) -> dict[str, Any]:
    """What an agent on simulated ``config/sim/MACHINE`` reports (``NodeInventory.to_dict()``), read
    through this run's scoped simulated NVML (tests/conftest.py), for hellos sent by hand."""
    from labgang.agent.inventory import read_inventory
    from labgang.agent.nvml import open_backend
    from labgang.agent.nvml.simulated import SCOPE_VARIABLE

    backend = open_backend(REPO / "config" / "sim" / machine, scope=os.environ[SCOPE_VARIABLE])
    try:
        return read_inventory(backend, hostname=machine.split("-")[0]).to_dict()
    finally:
        backend.nvmlShutdown()


def rank_script(body: str) -> list[str]:
    """argv running a Python snippet as a rank (the test's interpreter)."""
    return [sys.executable, "-c", body]


def env_dump_script(out_dir: str, then: str = "") -> list[str]:
    """A rank that writes its torchrun variables to ``out_dir/rank-<RANK>.json`` then runs ``then``."""
    return rank_script(
        "import json, os, sys, time\n"
        "keys = ['RANK','LOCAL_RANK','WORLD_SIZE','LOCAL_WORLD_SIZE','NODE_RANK','MASTER_ADDR','MASTER_PORT',"
        "'CUDA_VISIBLE_DEVICES','LABGANG_JOB_ID','LABGANG_RESTART_COUNT']\n"
        f"path = os.path.join({out_dir!r}, 'rank-%s-%s.json' % (os.environ['RANK'], "
        "os.environ.get('LABGANG_RESTART_COUNT', '0')))\n"
        "open(path + '.tmp', 'w').write(json.dumps({k: os.environ.get(k) for k in keys}))\n"
        "os.replace(path + '.tmp', path)\n" + then
    )


def read_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())
