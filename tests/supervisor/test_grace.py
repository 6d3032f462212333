"""The grace period is one SIGTERM, then SIGKILL at its end (Slurm's KillWait), never a volley."""

from __future__ import annotations

from labgang.agent.supervisor import RankState


def test_a_cleanup_handler_that_starts_processes_gets_one_sigterm_and_finishes(sup, make_spec, h, state_dir):
    """A rank whose TERM handler runs a child process (a checkpoint upload, say) must be left to
    finish it: processes born during the stop get no SIGTERM of their own, and the rank's group
    is not signalled again (that re-entered the handler forever, and the rank died of SIGKILL)."""
    ready = state_dir / "ready"
    script = (
        f"trap 'echo cleanup-start; sleep 0.3; echo cleanup-done; exit 0' TERM; "
        f"echo up > {ready}; while :; do sleep 0.05; done"
    )
    sup.launch(make_spec(["sh", "-c", script], grace=30.0))
    h.run_until(sup, lambda: ready.exists() and sup.ranks()[0].state is RankState.RUNNING)
    sup.stop_job("job1")
    events = h.run_until(sup, h.all_in(sup, RankState.GONE))
    assert {e.rank: e.exit_status for e in events if e.kind == "exited"} == {0: 0}
    log = sup.log_path("job1", 0).read_text()
    assert log.count("cleanup-start") == 1, log
    assert log.count("cleanup-done") == 1, log
