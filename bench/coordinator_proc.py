"""A real coordinator for a benchmark: ``labgang coordinator`` as a subprocess on a temporary state directory.

Not a benchmark itself: ``cli_latency.py`` and ``submit_throughput.py`` share it. No agent
joins, so every job submitted to it stays pending.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp

ONE_QUEUE = '[[queues]]\nname = "default"\nnominal = { gpu = 8 }\n'
"""The cluster both benchmarks use: one queue with a nominal quota of 8 GPUs."""


@dataclass(frozen=True)
class RunningCoordinator:
    """A started coordinator: its process, state directory and Unix socket (``<state>/labgang.sock``)."""

    proc: subprocess.Popen[bytes]
    base: Path
    state: Path
    sock: Path


@contextlib.contextmanager
def coordinator(
    config: str = ONE_QUEUE, *, prefix: str = "lgb-", start_timeout_s: float = 30.0
) -> Iterator[RunningCoordinator]:
    """Start ``python -m labgang.launcher coordinator`` with this interpreter and wait for its socket.

    Args:
        config: the cluster TOML.
        prefix: of the temporary folder under /tmp (it holds the config and the state directory).
        start_timeout_s: how long to wait for the socket.

    Yields the running coordinator; on exit sends SIGTERM, waits for it and removes the folder.

    Raises:
        SystemExit: the coordinator exited or did not create its socket in time.
    """
    base = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    cfg = base / "cluster.toml"
    cfg.write_text(config)
    state = base / "state"
    proc = subprocess.Popen(
        [sys.executable, "-m", "labgang.launcher", "coordinator", "--config", str(cfg), "--state-dir", str(state)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    sock = state / "labgang.sock"
    try:
        deadline = time.monotonic() + start_timeout_s
        while not sock.exists():
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit("coordinator did not start")
            time.sleep(0.05)
        yield RunningCoordinator(proc, base, state, sock)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
        shutil.rmtree(base, ignore_errors=True)


async def submit_burst(sock: Path, n: int, concurrency: int, *, name: str = "b") -> tuple[float, list[int]]:
    """Submit ``n`` one-GPU jobs (``argv ["true"]``, named ``{name}{i}``) over ``concurrency`` kept-alive
    connections after warming them; returns the seconds the ``n`` submissions took and each HTTP status."""
    connector = aiohttp.UnixConnector(path=str(sock), limit=concurrency)
    body = {"argv": ["true"], "workers": 1, "gpus_per_worker": 1, "env": {}, "cwd": "/tmp"}
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(i: int) -> int:
            async with session.post("http://labgang/v1/jobs", json={**body, "name": f"{name}{i}"}) as r:
                await r.read()
                return r.status

        # Warm the connections so the measured burst is submissions, not connects.
        await asyncio.gather(*(session.get("http://labgang/v1/version") for _ in range(concurrency)))
        start = time.perf_counter()
        statuses = await asyncio.gather(*(one(i) for i in range(n)))
        return time.perf_counter() - start, statuses
