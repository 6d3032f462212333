"""``labgang top --web``: page load, update latency after a change, and what idle viewers cost the coordinator.

Starts a real coordinator (:mod:`coordinator_proc`; no agent, so submitted jobs stay pending) and
``labgang top --web`` on it (subprocess, loopback), then:

1. **Page load** (Chromium via Playwright, Debian's ``chromium``): from ``page.goto`` to the
   page's ``load`` event, and to the app's first frame on the page (the viewer's app is a new
   process: most of this is its start).
2. **Update latency**: with the page open, a job is submitted over the Unix socket; the time
   until its row is on the page's screen. ``--rounds`` times. Target: within 1 s.
3. **Idle viewers**: the coordinator's CPU (user + system, ``/proc``) over ``--seconds`` with no
   viewer, then with ``--viewers`` idle viewers (websocket clients that open a session and read
   the terminal stream, as a browser tab nobody touches does; each runs its own app, which polls
   the coordinator once a second). Target: 20 viewers add under 5 % of one core. The viewers' own
   app processes are counted too (they run where ``top --web`` runs, not on the coordinator).

Usage: python bench/web_top.py [--viewers 20] [--seconds 15] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "web"))

from browser import CATCH_TERMINAL, READ_SCREEN  # the tests' way to read the page's terminal
from coordinator_proc import coordinator

TARGET_UPDATE_S = 1.0
TARGET_LOAD_S = 1.0
TARGET_ADDED_CORE_PCT = 5.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_web(state: Path, port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "labgang.launcher", "top", "--web", "--port", str(port), "--state-dir", str(state)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return proc
        except OSError:
            time.sleep(0.05)
    raise SystemExit("top --web did not listen")


def submit(sock: Path, name: str) -> str:
    from labgang.launcher.api.client import Client

    with Client(sock, timeout=10) as c:
        return str(c.submit({"argv": ["true"], "name": name, "cwd": "/tmp", "env": {}})["id"])


def wait_text(page, predicate, timeout: float = 60.0) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if predicate(page.evaluate(READ_SCREEN)):
            return time.monotonic()
        time.sleep(0.01)
    raise SystemExit("the page never showed what was waited for")


def browser_figures(url: str, sock: Path, rounds: int) -> tuple[list[float], list[float], list[float]]:
    from playwright.sync_api import sync_playwright

    exe = shutil.which("chromium")
    if exe is None:
        raise SystemExit("chromium is not installed (apt-get install chromium)")
    loads, frames, updates = [], [], []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, args=["--no-sandbox"])
        for i in range(rounds):
            page = browser.new_page(viewport={"width": 1500, "height": 950})
            page.add_init_script(CATCH_TERMINAL)
            start = time.monotonic()
            page.goto(url, wait_until="load")
            loads.append(time.monotonic() - start)
            frames.append(wait_text(page, lambda t: "Devices [1]" in t) - start)
            page.focus(".xterm-helper-textarea")
            page.keyboard.press("2")
            wait_text(page, lambda t: " id " in t and " reason" in t)  # the jobs tab is up
            name = f"webbench{i}"
            before = time.monotonic()
            submit(sock, name)
            updates.append(wait_text(page, lambda t, n=name: n in t) - before)
            page.close()
        browser.close()
    return loads, frames, updates


async def idle_viewers(port: int, n: int, seconds: float, coord: psutil.Process, web: psutil.Process) -> dict:
    """Open ``n`` sessions, wait until each app has drawn, then measure CPU over ``seconds``."""
    stop = asyncio.Event()
    drawn = [asyncio.Event() for _ in range(n)]

    async def viewer(i: int, session: aiohttp.ClientSession) -> None:
        async with session.ws_connect(f"http://127.0.0.1:{port}/ws?width=160&height=50") as ws:
            await ws.send_str(json.dumps(["resize", {"width": 160, "height": 50}]))
            got = 0
            while not stop.is_set():
                try:
                    msg = await asyncio.wait_for(ws.receive(), 0.5)
                except TimeoutError:
                    continue
                if msg.type == aiohttp.WSMsgType.BINARY:
                    got += len(msg.data)
                    if got > 20_000:
                        drawn[i].set()
                elif msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR):
                    return

    async with aiohttp.ClientSession() as session:
        tasks = [asyncio.create_task(viewer(i, session)) for i in range(n)]
        await asyncio.wait_for(asyncio.gather(*(d.wait() for d in drawn)), 300)
        await asyncio.sleep(3)  # the apps' start-up is over
        apps = [p for p in web.children(recursive=True)]
        c0 = sum(coord.cpu_times()[:2])
        a0 = sum(sum(p.cpu_times()[:2]) for p in apps)
        t0 = time.monotonic()
        await asyncio.sleep(seconds)
        wall = time.monotonic() - t0
        c1 = sum(coord.cpu_times()[:2])
        a1 = sum(sum(p.cpu_times()[:2]) for p in apps if p.is_running())
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
    return {"coord_pct": (c1 - c0) / wall * 100, "apps_pct": (a1 - a0) / wall * 100, "apps": len(apps)}


def cpu_pct(proc: psutil.Process, seconds: float) -> float:
    c0, t0 = sum(proc.cpu_times()[:2]), time.monotonic()
    time.sleep(seconds)
    return (sum(proc.cpu_times()[:2]) - c0) / (time.monotonic() - t0) * 100


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--viewers", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=15.0, help="length of each CPU measurement")
    parser.add_argument("--rounds", type=int, default=5, help="page loads and update measurements")
    args = parser.parse_args()
    print(f"load average at the start {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    with coordinator() as running:
        port = free_port()
        web = start_web(running.state, port)
        try:
            coord = psutil.Process(running.proc.pid)
            loads, frames, updates = browser_figures(f"http://127.0.0.1:{port}/", running.sock, args.rounds)
            med = statistics.median
            print(
                f"page load (HTML, script, fonts) p50 {med(loads) * 1000:.0f} ms, max {max(loads) * 1000:.0f} ms; "
                f"ratio to {TARGET_LOAD_S:g} s {med(loads) / TARGET_LOAD_S:.2f}"
            )
            print(
                f"first frame of the viewer's app p50 {med(frames):.2f} s, max {max(frames):.2f} s "
                f"(a new app process per viewer); ratio to {TARGET_LOAD_S:g} s {med(frames) / TARGET_LOAD_S:.2f}"
            )
            print(
                f"update latency (job submitted -> its row on the page) p50 {med(updates) * 1000:.0f} ms, "
                f"max {max(updates) * 1000:.0f} ms over {len(updates)}; ratio to {TARGET_UPDATE_S:g} s "
                f"{med(updates) / TARGET_UPDATE_S:.2f}"
            )
            if args.viewers <= 0:
                return
            time.sleep(2)
            base = cpu_pct(coord, args.seconds)
            busy = asyncio.run(idle_viewers(port, args.viewers, args.seconds, coord, psutil.Process(web.pid)))
            added = busy["coord_pct"] - base
            print(
                f"coordinator CPU, no viewer: {base:.1f}% of a core; {args.viewers} idle viewers: "
                f"{busy['coord_pct']:.1f}% (added {added:.1f} points, "
                f"ratio {busy['coord_pct'] / base if base else 0:.1f}); "
                f"added / target {TARGET_ADDED_CORE_PCT:g}%: {added / TARGET_ADDED_CORE_PCT:.2f}"
            )
            print(
                f"the viewers' {busy['apps']} app processes (beside top --web): {busy['apps_pct']:.1f}% of a core "
                f"in all, {busy['apps_pct'] / max(1, args.viewers):.1f}% each"
            )
        finally:
            web.terminate()  # ends every viewer's app first: slow on a loaded machine
            try:
                web.wait(timeout=120)
            except subprocess.TimeoutExpired:
                web.kill()
                web.wait()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
