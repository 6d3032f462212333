"""Durable submissions per second through the coordinator's Unix socket (1,000 in a burst).

Starts a real coordinator (``labgang coordinator``, subprocess, :mod:`coordinator_proc`) on a
temporary state directory, fires N concurrent ``POST /v1/jobs`` over the Unix socket (aiohttp
UnixConnector, ``--concurrency`` connections), waits for every 201 (each one is
committed to SQLite with synchronous=FULL before it is answered), checks the database
holds exactly N jobs, and prints submissions/s and the ratio to the 2,000/s target.

Then, on the same coordinator: the latency of one submission at a time (``--sequential``
``POST /v1/jobs`` over one kept-alive connection, p50 and p90, target 3 ms) and of
``GET /v1/jobs`` once ``--pending`` jobs are pending (every page, as ``labgang queue`` reads
them; p50 of 20, target 20 ms). Both are
measured by a client that only reads the bytes (:mod:`labgang.launcher.api.wire`), so they
are the coordinator's time plus the socket's, with no JSON decoding on the client side. For the
listings the coordinator's CPU is given twice: all of it over the 20 listings, divided by 20
(its background work included: the pitfall watch's sample every 2 s, the timer loop), and the
median over the listings of its event-loop thread's CPU during each one (``/proc/PID/schedstat``,
to the nanosecond): what one listing costs the server, however the background work falls.

Usage: python bench/submit_throughput.py [-n 1000] [--concurrency 64] [--sequential 300] [--pending 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import sys
import time
from pathlib import Path

import psutil
from labgang.launcher.api.wire import UnixHTTPConnection

sys.path.insert(0, str(Path(__file__).resolve().parent))

from coordinator_proc import coordinator, submit_burst

TARGET_PER_S = 2000.0
TARGET_POST_MS = 3.0
TARGET_LIST_MS = 20.0


def sequential_posts(sock: Path, n: int) -> list[float]:
    """Seconds of each of ``n`` one-at-a-time submissions over one kept-alive connection."""
    conn = UnixHTTPConnection(str(sock), 30.0)
    body = json.dumps({"argv": ["true"], "workers": 1, "gpus_per_worker": 1, "env": {"HOME": "/root"}, "cwd": "/"})
    headers = {"Content-Type": "application/json"}
    times = []
    for i in range(n):
        start = time.perf_counter()
        resp = conn.request("POST", "/v1/jobs", body.replace('"true"', f'"true{i}"').encode(), headers)
        times.append(time.perf_counter() - start)
        if resp.status != 201:
            raise SystemExit(f"sequential submission refused: HTTP {resp.status} {resp.body[:200]!r}")
    conn.close()
    return times


def loop_thread_cpu_s(pid: int) -> float:
    """CPU seconds the main thread of process ``pid`` (the coordinator's event loop) has run so far,
    to the nanosecond (``/proc/PID/schedstat``; ``cpu_times`` counts in 10 ms clock ticks)."""
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0]) / 1e9


def list_times(
    sock: Path, runs: int, view: str = "full", server_pid: int | None = None, loop_cpu: list[float] | None = None
) -> tuple[list[float], int, int]:
    """Seconds of each of ``runs`` whole ``GET /v1/jobs?all=1&view=VIEW`` listings (every page,
    following ``next_cursor`` as the CLI does), the bytes of the last listing and its number of
    pages. ``view``: "full" (JobViews, ``--json``) or "queue" (the rows ``labgang queue`` reads).
    With ``server_pid``, the CPU seconds of the server's event-loop thread during each listing are
    appended to ``loop_cpu``."""
    conn = UnixHTTPConnection(str(sock), 60.0)
    times, size, pages = [], 0, 0
    for _ in range(runs):
        cpu = loop_thread_cpu_s(server_pid) if server_pid is not None else 0.0
        start = time.perf_counter()
        base = f"/v1/jobs?all=1&view={view}"
        target, size, pages = base, 0, 0
        while target:
            body = conn.request("GET", target, None, {}).body
            size, pages = size + len(body), pages + 1
            # the page ends with "next_cursor": null} or "next_cursor": "123"}: read only that
            cursor = json.loads(body[body.rindex(b'"next_cursor"') + len(b'"next_cursor":') : -1])
            target = f"{base}&cursor={cursor}" if cursor else ""
        times.append(time.perf_counter() - start)
        if server_pid is not None and loop_cpu is not None:
            loop_cpu.append(loop_thread_cpu_s(server_pid) - cpu)
    conn.close()
    return times, size, pages


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=1000, help="submissions in the burst")
    parser.add_argument("--concurrency", type=int, default=64, help="parallel connections")
    parser.add_argument("--sequential", type=int, default=300, help="one-at-a-time submissions timed")
    parser.add_argument("--pending", type=int, default=10000, help="pending jobs when GET /v1/jobs is timed")
    args = parser.parse_args()

    with coordinator() as running:
        sock, state = running.sock, running.state
        server = psutil.Process(running.proc.pid)
        cpu_before = sum(server.cpu_times()[:2])
        seconds, statuses = asyncio.run(submit_burst(sock, args.n, args.concurrency))
        cpu = sum(server.cpu_times()[:2]) - cpu_before
        ok = sum(1 for s in statuses if s == 201)
        stored = sqlite3.connect(state / "labgang.db").execute("SELECT COUNT(*) FROM jobs").fetchone()[0]
        rate = ok / seconds
        print(f"submissions: {ok}/{args.n} accepted (201), {stored} in the database")
        print(f"burst time: {seconds:.3f} s with {args.concurrency} connections")
        print(f"durable submissions/s: {rate:.0f}  (target {TARGET_PER_S:.0f}/s, ratio {rate / TARGET_PER_S:.2f})")
        # On a shared machine the wall-clock rate depends on the neighbours; the coordinator's
        # own CPU per submission does not.
        per_cpu = ok / cpu if cpu > 0 else float("inf")
        print(
            f"coordinator CPU: {cpu:.3f} s = {per_cpu:.0f} submissions per CPU-second "
            f"(ratio to target {per_cpu / TARGET_PER_S:.2f}); load average {os.getloadavg()[0]:.1f} "
            f"on {os.cpu_count()} CPUs"
        )
        if ok != args.n or stored != args.n:
            raise SystemExit("some submissions were lost or refused")

        cpu_before = sum(server.cpu_times()[:2])
        posts = sequential_posts(sock, args.sequential)
        cpu_per_post = (sum(server.cpu_times()[:2]) - cpu_before) / args.sequential * 1000
        p50 = quantile(posts, 0.5) * 1000
        print(
            f"sequential POST /v1/jobs: p50 {p50:.2f} ms, p90 {quantile(posts, 0.9) * 1000:.2f} ms over "
            f"{args.sequential} (target {TARGET_POST_MS:g} ms, ratio {p50 / TARGET_POST_MS:.2f}); "
            f"coordinator CPU per POST {cpu_per_post:.2f} ms"
        )
        have = args.n + args.sequential
        if args.pending > have:
            asyncio.run(submit_burst(sock, args.pending - have, args.concurrency))
        stored = sqlite3.connect(state / "labgang.db").execute("SELECT COUNT(*) FROM jobs").fetchone()[0]
        for view in ("full", "queue"):
            list_times(sock, 1, view)  # the first listing after a burst encodes every new job once
            cpu_before, loop_cpu = sum(server.cpu_times()[:2]), []
            lists, size, pages = list_times(sock, 20, view, running.proc.pid, loop_cpu)
            cpu_per_get = (sum(server.cpu_times()[:2]) - cpu_before) / 20 * 1000
            p50, loop_p50 = quantile(lists, 0.5) * 1000, quantile(loop_cpu, 0.5) * 1000
            print(
                f"GET /v1/jobs?view={view} with {stored} pending ({pages} pages): p50 {p50:.1f} ms, "
                f"p90 {quantile(lists, 0.9) * 1000:.1f} ms, {size / 1e6:.1f} MB "
                f"(target {TARGET_LIST_MS:g} ms, ratio {p50 / TARGET_LIST_MS:.2f}); "
                f"coordinator CPU per listing {cpu_per_get:.1f} ms (ratio {cpu_per_get / TARGET_LIST_MS:.2f}), "
                f"its event loop's p50 {loop_p50:.1f} ms (ratio {loop_p50 / TARGET_LIST_MS:.2f})"
            )


if __name__ == "__main__":
    main()
