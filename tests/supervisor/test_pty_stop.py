"""Stopping a ``--pty`` rank: an interactive shell on a terminal ignores SIGTERM, so the stop
hangs its terminal up first (SIGHUP, as a terminal's session gets when it hangs up), then
SIGTERM, then SIGKILL after the grace period."""

from __future__ import annotations

import time

from labgang.agent.supervisor import RankState


def test_an_interactive_bash_on_a_pty_ends_promptly_when_stopped(sup, make_spec, h):
    sup.launch(make_spec(["bash", "--norc", "-i"], pty=True, grace=10.0))
    h.run_until(sup, lambda: sup.ranks()[0].state is RankState.RUNNING)
    # wait until bash is interactive (its prompt is on the terminal, so its SIGTERM is ignored)
    deadline = time.monotonic() + 8.0
    while time.monotonic() < deadline and not sup.log_path("job1", 0).read_bytes().strip():
        sup.tick()
        time.sleep(0.05)
    time.sleep(0.3)
    started = time.monotonic()
    sup.stop_job("job1")
    events = h.run_until(sup, h.all_in(sup, RankState.GONE), timeout=30.0)
    took = time.monotonic() - started
    assert took < 5.0, f"the stop of a pty bash took {took:.1f} s of its 10 s grace"
    statuses = {e.rank: e.exit_status for e in events if e.kind == "exited"}
    assert statuses and statuses[0] != 137, statuses
