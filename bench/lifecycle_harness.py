"""What bench/lifecycle.py (and bench/history_scale.py) drive their scenarios with: a temporary set of
real labgang daemons (:class:`Instance`), rank scripts that write ``$EPOCHREALTIME`` stamps, FIFO gates
that hold ranks until released, and the polling and statistics helpers.

Every process an :class:`Instance` starts carries ``LGBENCH=<its directory>`` in its environment, so
:meth:`Instance.close` finds and kills whatever is left. ``KEEP_LOGS`` and ``DAEMON_DEBUG`` are set by
the bench's command line before any instance starts.
"""

from __future__ import annotations

import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from labgang.launcher.api.client import Client, ClientError

REPO = Path(__file__).resolve().parents[1]
SIM = REPO / "config" / "sim"
MARKER = "LGBENCH"
GRACE_S = 0.5
SHAPES = ((4, 2), (8, 1), (2, 4), (1, 8))
FINISHED = {"succeeded", "failed", "cancelled", "timeout", "node_fail"}
# Set from the command line: where to copy the daemons' logs before cleanup (None: discard them)
# and whether the daemons log their debug lines (timing of each step of the lifecycle).
KEEP_LOGS: Path | None = None
DAEMON_DEBUG = False

# A rank that records its start, blocks on its own FIFO, records its exit and exits 0.
GATED_RANK = (
    'echo "$EPOCHREALTIME" > "$LGB_DIR/$LGB_TAG.start.$RANK"; '
    'read -r _ < "$LGB_DIR/$LGB_TAG.go.$RANK"; '
    'echo "$EPOCHREALTIME" > "$LGB_DIR/$LGB_TAG.end.$RANK"'
)
# A borrowed job that ignores SIGTERM (the ignore survives exec), so only SIGKILL after grace ends it.
STUBBORN_RANK = 'trap "" TERM; exec sleep 600'
# The reclaiming gang: record the start, stay briefly, exit 0.
LENDER_RANK = 'echo "$EPOCHREALTIME" > "$LGB_DIR/$LGB_TAG.start.$RANK"; sleep 0.2'


def wait_for(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.005) -> Any:
    """Poll ``predicate`` every ``interval`` seconds until truthy; return its value.

    Raises:
        TimeoutError: still falsy after ``timeout`` seconds (the message names ``what``).
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


def read_stamp(path: Path) -> float | None:
    """The ``$EPOCHREALTIME`` a rank wrote to ``path`` (unix seconds), or None while absent or half-written."""
    try:
        text = path.read_text().strip()
        return float(text) if text else None
    except (OSError, ValueError):
        return None


def percentile(values: list[float], q: float) -> float:
    """The ``q``-quantile (0..1) of ``values``, linear between closest ranks."""
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def marked_pids(base: Path) -> list[int]:
    """Pids of live processes whose environment holds ``LGBENCH=<base>`` (daemons and ranks of one scenario)."""
    marker = f"{MARKER}={base}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker in (entry / "environ").read_bytes().split(b"\0"):
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


class Instance:
    """One scenario's labgang daemons (real subprocesses) under a fresh temporary directory.

    Args:
        label: short name used in the directory prefix.

    The directory is short (Unix socket paths are limited to 107 bytes) and removed by
    :meth:`close`, which also stops the daemons and kills every marked rank.
    """

    def __init__(self, label: str) -> None:
        self.base = Path(tempfile.mkdtemp(prefix=f"lgb{label}-", dir="/tmp"))
        self.state = self.base / "s"
        self.procs: list[tuple[subprocess.Popen[bytes], int]] = []
        self.leftover = 0

    @property
    def socket(self) -> Path:
        return self.state / "labgang.sock"

    def env(self) -> dict[str, str]:
        """The environment given to daemons and ranks: ``PATH``, the marker and the bench directory."""
        return {"PATH": "/usr/bin:/bin", MARKER: str(self.base), "LGB_DIR": str(self.base)}

    def spawn(self, name: str, args: list[str], stop_signal: int) -> None:
        """Start ``python -m labgang.launcher ARGS`` in its own session, output to ``<base>/<name>.log``."""
        env = dict(os.environ, PYTHONUNBUFFERED="1", **{MARKER: str(self.base)})
        env.pop("LABGANG_STATE_DIR", None)
        if DAEMON_DEBUG:
            args = [*args, "-vv" if args[0] == "up" else "-v"]
        with open(self.base / f"{name}.log", "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "labgang.launcher", *args],
                cwd=REPO,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.procs.append((proc, stop_signal))

    def wait_nodes(self, count: int, timeout: float = 60.0) -> None:
        """Wait until ``count`` nodes are connected to the coordinator.

        Raises:
            RuntimeError: a daemon exited (its log is included).
            TimeoutError: not connected within ``timeout`` seconds.
        """

        def connected() -> bool:
            for proc, _ in self.procs:
                if proc.poll() is not None:
                    logs = "".join(p.read_text(errors="replace") for p in self.base.glob("*.log"))
                    raise RuntimeError(f"a labgang daemon exited with {proc.returncode}:\n{logs}")
            if not self.socket.exists():
                return False
            try:
                with Client(self.socket, timeout=5) as c:
                    return sum(1 for n in c.nodes() if n.get("connected")) >= count
            except ClientError:
                return False

        wait_for(connected, timeout, f"{count} connected node(s)", interval=0.1)

    def client(self) -> Client:
        """A client of this instance's coordinator socket."""
        return Client(self.socket, timeout=30)

    def submit(
        self,
        c: Client,
        tag: str,
        script: str,
        *,
        workers: int,
        gpus: int,
        queue: str | None = None,
        grace_s: float = GRACE_S,
    ) -> str:
        """Submit ``bash -c SCRIPT`` as a ``workers`` x ``gpus`` gang; ranks get ``LGB_TAG=tag``; return the job id."""
        body: dict[str, Any] = {
            "name": tag,
            "workers": workers,
            "gpus_per_worker": gpus,
            "grace_s": grace_s,
            "argv": ["/bin/bash", "-c", script],
            "cwd": str(self.base),
            "env": {**self.env(), "LGB_TAG": tag},
        }
        if queue:
            body["queue"] = queue
        return str(c.submit(body)["id"])

    def metric(self, c: Client, name: str) -> float | None:
        """One unlabelled sample from ``GET /metrics`` (on the Unix socket), or None when absent."""
        status, _, data = c.request("GET", "/metrics")
        if status != 200:
            return None
        for line in data.decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return None

    def close(self) -> None:
        """Cancel unfinished jobs, stop the daemons, kill marked leftovers, remove the directory."""
        try:
            with Client(self.socket, timeout=5, wait_for_start=False) as c:
                for job in c.jobs(all_users=True):
                    if job["state"] not in FINISHED:
                        c.cancel(str(job["id"]))
        except ClientError:
            pass
        for proc, sig in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(sig)
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(5)
        leftovers = marked_pids(self.base)
        for pid in leftovers:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.leftover = len(leftovers)
        wait_for(lambda: not marked_pids(self.base), 10, "marked processes to die", interval=0.05)
        if KEEP_LOGS is not None:
            KEEP_LOGS.mkdir(parents=True, exist_ok=True)
            for log in self.base.glob("*.log"):
                shutil.copy(log, KEEP_LOGS / f"{self.base.name}-{log.name}")
        shutil.rmtree(self.base, ignore_errors=True)


def start_up(label: str) -> Instance:
    """``labgang up --simulate config/sim/h100x8.toml --state-dir <fresh>``, ready (node connected)."""
    inst = Instance(label)
    inst.spawn("up", ["up", "--simulate", str(SIM / "h100x8.toml"), "--state-dir", str(inst.state)], signal.SIGINT)
    inst.wait_nodes(1)
    return inst


def stamps(
    inst: Instance, tag: str, kind: str, ranks: int, job: tuple[Client, str] | None = None, timeout: float = 60.0
) -> list[float]:
    """Wait for every rank's ``<tag>.<kind>.<rank>`` timestamp file; return the stamps (unix seconds).

    Raises:
        TimeoutError: not all written within ``timeout`` s; names the job's state and last events
            when ``job`` (client, job id) is given.
    """
    paths = [inst.base / f"{tag}.{kind}.{r}" for r in range(ranks)]

    def all_there() -> list[float] | None:
        values = [read_stamp(p) for p in paths]
        return None if any(v is None for v in values) else values  # type: ignore[return-value]

    try:
        return wait_for(all_there, timeout, f"{kind} of {ranks} ranks of {tag}")
    except TimeoutError as exc:
        if job is None:
            raise
        view = job[0].job(job[1])
        events = "; ".join(f"{e['event']}: {e['message']}" for e in view["history"][-4:])
        raise TimeoutError(f"{exc}; job {job[1]} is {view['state']} ({view.get('reason')}); {events}") from None


def make_gates(inst: Instance, tag: str, ranks: int) -> None:
    """One FIFO per rank, ``<tag>.go.<rank>``, that the rank blocks on."""
    for r in range(ranks):
        os.mkfifo(inst.base / f"{tag}.go.{r}")


def open_gates(inst: Instance, tag: str, ranks: int) -> None:
    """Write a line to each rank's FIFO (waiting up to 10 s for its reader) so every rank exits."""
    for r in range(ranks):
        path = inst.base / f"{tag}.go.{r}"

        def opened(path: Path = path) -> int | None:
            try:
                return os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # ENXIO: the rank has not opened it yet
                return None

        fd = wait_for(opened, 10, f"rank {r} of {tag} reading its FIFO", interval=0.001)
        os.write(fd, b"go\n")
        os.close(fd)
