"""``labgang top --web`` in a real browser: a real coordinator and simulated agent (tests/coordinator
harness), the web server as a subprocess, Chromium driven by Playwright. Skips where Chromium is
not installed."""

from __future__ import annotations

import sys
import time

import psutil
import pytest
from browser import free_port, need_chromium, open_viewer, screen_text, start_web, wait_screen
from harness import REPO, Cluster, rank_script, wait_for

pytestmark = pytest.mark.slow

TOKEN = "s3cret-cluster-token"  # the harness's cluster token


@pytest.fixture(scope="module")
def lab():
    """One cluster (node n1, 4 simulated GPUs) with a sleeping job, and top --web on it."""
    executable = need_chromium()
    from playwright.sync_api import sync_playwright

    cluster = Cluster({"n1": "n1-4gpu.toml"}).start()
    web = None
    try:
        sleeper = cluster.submit(rank_script("import time\ntime.sleep(600)\n"), gpus_per_worker=1, name="sleeper")
        cluster.wait_state(sleeper["id"], "running")
        port = free_port()
        web = start_web(
            ["--state-dir", str(cluster.coord_dir), "--token-file", str(cluster.token_file)],
            port,
            cluster.base / "web.log",
        )
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=executable, args=["--no-sandbox"])
            try:
                yield cluster, web, browser, f"http://127.0.0.1:{port}/", sleeper["id"]
            finally:
                browser.close()
    finally:
        if web is not None:
            web.terminate()
            web.wait(timeout=20)
        cluster.stop()


def job_row(screen: str, job: str) -> str | None:
    """The line of the jobs table for ``job`` (its id, then its name), if shown."""
    return next((line for line in screen.splitlines() if line.split()[:2] == [job, "sleeper"]), None)


def viewer_apps(web) -> list[psutil.Process]:
    """The app processes the web server runs for its viewers (one per open page)."""
    out = []
    for p in psutil.Process(web.pid).children(recursive=True):
        try:
            if p.status() != psutil.STATUS_ZOMBIE and "top" in p.cmdline():
                out.append(p)
        except psutil.NoSuchProcess:  # ended (and reaped) while we looked
            continue
    return out


def test_the_page_shows_devices_jobs_and_the_process_of_a_running_job(lab) -> None:
    cluster, _web, browser, url, job = lab
    rank = cluster.job(job)["ranks"][0]
    page = open_viewer(browser, url)
    try:
        wait_screen(
            page, lambda t: t.count(" n1 ") >= 4 and f"{job} root default" in t, "4 devices, one held by the job"
        )
        page.keyboard.press("2")
        wait_screen(
            page,
            lambda t: any(job in line and "sleeper" in line and "running" in line for line in t.splitlines()),
            "the job's row",
        )
        page.keyboard.press("4")
        text = wait_screen(page, lambda t: f"{job} r0" in t, "the job's rank 0 in the process view")
        (row,) = [line for line in text.splitlines() if f"{job} r0" in line]
        assert str(rank["pid"]) in row.split() or any(str(p) in row.split() for p in _descendants(rank["pid"]))
        assert "root" in row.split() and "time.sleep(600)" in row
    finally:
        page.close()


def _descendants(pid: int) -> list[int]:
    try:
        return [c.pid for c in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def test_a_pitfall_appears_on_the_page_and_on_the_graph(lab) -> None:
    cluster, _web, browser, url, _job = lab
    page = open_viewer(browser, url)
    try:
        example = str(REPO / "examples" / "busy_kernels_idle_sms.py")
        busy = cluster.submit([sys.executable, example, "600"], gpus_per_worker=1, name="busy")
        began = time.monotonic()
        wait_screen(
            page,
            lambda t: "kernel-busy-sm-idle" in t and f"{busy['id']} root default" in t,
            "the kernel-busy pitfall",
            timeout=90,
        )
        seen_after = time.monotonic() - began
        page.keyboard.press("5")
        text = wait_screen(page, lambda t: "▲" in t, "the pitfall's mark on the graphs")
        lines = text.splitlines()
        marked = [i for i, line in enumerate(lines) if line.lstrip().startswith("pitfalls") and "▲" in line]
        assert len(marked) == 2  # on the busy job's device and on the job's own graph
        assert all("kernel-busy-sm-idle: n1 GPU" in lines[i + 1] for i in marked)  # the line under names it
        print(f"pitfall on the page {seen_after:.1f} s after submission")
    finally:
        page.close()


def test_a_viewer_without_the_token_cannot_cancel_and_one_with_it_can(lab) -> None:
    cluster, web, browser, url, job = lab
    page = open_viewer(browser, url)
    try:
        page.keyboard.press("2")
        wait_screen(page, lambda t: job_row(t, job) is not None, "the jobs tab")
        page.keyboard.press("c")
        wait_screen(page, lambda t: "read-only view" in t, "the refusal")
        assert "Cancel job" not in screen_text(page)
        assert cluster.job(job)["state"] == "running"
    finally:
        page.close()
    wait_for(lambda: len(viewer_apps(web)) == 0, timeout=20, what="the closed page's app to end")

    page = open_viewer(browser, f"{url}?token={TOKEN}")
    try:
        assert len(viewer_apps(web)) == 1
        page.keyboard.press("2")
        wait_screen(page, lambda t: job_row(t, job) is not None, "the jobs tab")
        page.keyboard.press("c")
        wait_screen(page, lambda t: f"Cancel job {job}" in t, "the confirmation")
        page.keyboard.press("y")
        cluster.wait_state(job, {"cancelled"})
    finally:
        page.close()
    wait_for(lambda: len(viewer_apps(web)) == 0, timeout=20, what="the closed page's app to end")


def test_one_node_without_a_coordinator(lab, tmp_path) -> None:
    """``top --web --simulate FILE``: one node's devices and processes, no coordinator; the jobs tab
    is hidden as in ``top --local``."""
    _cluster, _web, browser, _url, _job = lab
    port = free_port()
    web = start_web(["--simulate", str(REPO / "config/sim/h100x8.toml")], port, tmp_path / "web.log")
    try:
        page = open_viewer(browser, f"http://127.0.0.1:{port}/")
        try:
            text = wait_screen(page, lambda t: t.count("H100 80GB HBM3") == 8, "the simulated node's 8 GPUs")
            assert "local: simulated h100x8.toml" in text and "Jobs [2]" not in text
            page.keyboard.press("4")
            wait_screen(page, lambda t: " pid " in t and " command" in t, "the processes tab")
        finally:
            page.close()
    finally:
        web.terminate()
        web.wait(timeout=60)
