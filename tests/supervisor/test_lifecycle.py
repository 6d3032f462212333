"""Start, exit and stop of real ranks: exit statuses, grace → SIGKILL, process trees left behind."""

from __future__ import annotations

import os
import signal
import textwrap
from dataclasses import replace

import pytest
from labgang.agent.supervisor import RankConflict, RankState


def _by_rank(events, kind):
    return {e.rank: e.exit_status for e in events if e.kind == kind}


def test_exit_statuses_are_code_or_128_plus_signal(sup, make_spec, h):
    commands = {0: "exit 0", 1: "exit 1", 2: "kill -KILL $$", 3: "kill -TERM $$"}
    for rank, cmd in commands.items():
        sup.launch(make_spec(["sh", "-c", cmd], rank=rank, world_size=4))
    events = h.run_until(sup, h.all_in(sup, RankState.GONE))
    assert _by_rank(events, "exited") == {0: 0, 1: 1, 2: 137, 3: 143}
    assert _by_rank(events, "gone") == {0: 0, 1: 1, 2: 137, 3: 143}
    assert {e.rank for e in events if e.kind == "started"} == {0, 1, 2, 3}
    for rank in commands:  # each rank reports started, exited, gone in that order
        kinds = [e.kind for e in events if e.rank == rank]
        assert kinds == ["started", "exited", "gone"]
    assert [r.exit_status for r in sup.ranks()] == [0, 1, 137, 143]


def test_command_that_cannot_run_exits_127_with_reason_in_log(sup, make_spec, h):
    sup.launch(make_spec(["/nonexistent/labgang-test-binary"]))
    events = h.run_until(sup, h.all_in(sup, RankState.GONE))
    assert _by_rank(events, "exited") == {0: 127}
    assert "cannot start '/nonexistent/labgang-test-binary'" in sup.log_path("job1", 0).read_text()


def test_rank_ignoring_sigterm_is_killed_after_grace(fake_sup, make_spec, clock, h, state_dir):
    sup = fake_sup
    ready = state_dir / "ready"
    script = f"trap '' TERM; echo ignored > {ready}; while :; do sleep 0.05; done"
    sup.launch(make_spec(["sh", "-c", script], grace=30.0))
    h.run_until(sup, lambda: ready.exists() and sup.ranks()[0].state is RankState.RUNNING)
    pid = sup.ranks()[0].pid
    sup.stop_job("job1")
    for _ in range(10):  # SIGTERM is ignored: on the frozen clock, it keeps running, STOPPING
        sup.tick()
    assert h.pid_alive(pid)
    assert sup.ranks()[0].state is RankState.STOPPING
    clock.advance(30.0)
    events = h.run_until(sup, h.all_in(sup, RankState.GONE))
    assert _by_rank(events, "exited") == {0: 137}
    assert not h.pid_alive(pid)


def test_double_forked_setsid_child_leaves_nothing(sup, make_spec, h, state_dir):
    pidfile = state_dir / "daemon.pid"
    script = textwrap.dedent(f"""
        import os, sys, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                with open({str(pidfile)!r} + ".tmp", "w") as tmp:
                    tmp.write(str(os.getpid()))
                os.rename({str(pidfile)!r} + ".tmp", {str(pidfile)!r})
                os.close(1); os.close(2)  # a proper daemon: no inherited stdout
                while True:
                    time.sleep(1)
            os._exit(0)
        os.wait()
        time.sleep(60)
    """)
    sup.launch(make_spec([h.python, "-c", script]))
    daemon = int(h.wait_for_file(pidfile))
    h.run_until(sup, h.all_in(sup, RankState.RUNNING))
    rank_pid = sup.ranks()[0].pid
    assert os.getsid(daemon) != os.getsid(rank_pid)  # it really left the rank's session
    sup.stop_job("job1", grace=2.0)
    events = h.run_until(sup, h.all_in(sup, RankState.GONE))
    assert _by_rank(events, "exited") == {0: 143}
    assert not h.pid_alive(daemon)


def test_daemon_left_by_an_exited_rank_is_stopped(sup, make_spec, h, state_dir):
    pidfile = state_dir / "daemon.pid"
    daemon_sh = f"echo $$ > {pidfile}.tmp; mv {pidfile}.tmp {pidfile}; exec sleep 60"
    script = f"(setsid sh -c '{daemon_sh}' > /dev/null 2>&1 &); exit 0"
    sup.launch(make_spec(["sh", "-c", script]))
    daemon = int(h.wait_for_file(pidfile))
    events = h.run_until(sup, h.all_in(sup, RankState.GONE))
    assert _by_rank(events, "exited") == {0: 0}  # the main process's status, not the daemon's
    assert not h.pid_alive(daemon)


def test_python_rank_with_worker_processes_leaves_nothing(sup, make_spec, h, state_dir):
    pidfile = state_dir / "workers"
    script = textwrap.dedent(f"""
        import multiprocessing as mp, os, time
        def work(i):
            time.sleep(60)
        if __name__ == "__main__":
            mp.set_start_method("fork")
            procs = [mp.Process(target=work, args=(i,)) for i in range(3)]
            for p in procs:
                p.start()
            with open({str(pidfile)!r} + ".tmp", "w") as fh:
                fh.write(" ".join(str(p.pid) for p in procs))
            os.rename({str(pidfile)!r} + ".tmp", {str(pidfile)!r})
            for p in procs:
                p.join()
    """)
    sup.launch(make_spec([h.python, "-c", script]))
    workers = [int(p) for p in h.wait_for_file(pidfile).split()]
    assert len(workers) == 3 and all(h.pid_alive(p) for p in workers)
    sup.stop_job("job1", grace=3.0)
    events = h.run_until(sup, h.all_in(sup, RankState.GONE))
    assert 0 in _by_rank(events, "exited")
    assert not any(h.pid_alive(p) for p in workers)


def test_warning_signal_comes_warn_before_seconds_ahead_of_sigterm(fake_sup, make_spec, clock, h, state_dir):
    sup = fake_sup
    ready = state_dir / "ready"
    script = (
        f"trap 'echo warned' USR1; trap 'echo terminated; exit 7' TERM; touch {ready}; while :; do sleep 0.05; done"
    )
    sup.launch(make_spec(["sh", "-c", script], warn_signal=int(signal.SIGUSR1), warn_before=60.0, grace=5.0))
    h.run_until(sup, lambda: ready.exists() and sup.ranks()[0].state is RankState.RUNNING)
    sup.stop_job("job1")
    assert sup.ranks()[0].state is RankState.WARNED
    log = sup.log_path("job1", 0)
    h.run_until(sup, lambda: "warned" in log.read_text())
    assert sup.ranks()[0].state is RankState.WARNED and "terminated" not in log.read_text()
    clock.advance(60.0)
    events = h.run_until(sup, h.all_in(sup, RankState.GONE))
    assert _by_rank(events, "exited") == {0: 7}
    lines = log.read_text().splitlines()
    assert lines.index("warned") < lines.index("terminated")


def test_a_stops_warning_to_the_batch_shell_alone_spares_its_programs(fake_sup, make_spec, clock, h, state_dir):
    """A stop's warning of a ``--signal B:`` job (``warn_shell_only``) reaches the script's trap;
    the child it runs, which USR1 would kill, is still there for the SIGTERM."""
    sup = fake_sup
    ready, child = state_dir / "ready", state_dir / "child-alive"
    script = (
        f"trap 'echo warned' USR1; sh -c 'trap \"echo child-terminated; exit 0\" TERM; touch {ready}; "
        f"while :; do touch {child}; sleep 0.05; done' & while :; do wait; done"
    )
    spec = make_spec(["sh", "-c", script], warn_signal=int(signal.SIGUSR1), warn_before=60.0, grace=5.0)
    sup.launch(replace(spec, warn_shell_only=True))
    h.run_until(sup, lambda: ready.exists() and sup.ranks()[0].state is RankState.RUNNING)
    sup.stop_job("job1")
    log = sup.log_path("job1", 0)
    h.run_until(sup, lambda: "warned" in log.read_text())
    child.unlink()
    h.run_until(sup, child.exists)  # the child runs on after the warning
    clock.advance(60.0)
    h.run_until(sup, h.all_in(sup, RankState.GONE))
    assert "child-terminated" in log.read_text() and "User defined signal 1" not in log.read_text()


def test_an_explicit_grace_keeps_the_warning_and_warn_false_cuts_it_short(fake_sup, make_spec, clock, h, state_dir):
    """The coordinator always names the grace: a preemption stop is still warned; a second,
    unwarned stop (the time limit reached) sends SIGTERM at once."""
    sup = fake_sup
    ready = state_dir / "ready"
    script = (
        f"trap 'echo warned' USR1; trap 'echo terminated; exit 7' TERM; touch {ready}; while :; do sleep 0.05; done"
    )
    sup.launch(make_spec(["sh", "-c", script], warn_signal=int(signal.SIGUSR1), warn_before=60.0, grace=5.0))
    h.run_until(sup, lambda: ready.exists() and sup.ranks()[0].state is RankState.RUNNING)
    sup.stop_job("job1", grace=5.0)
    assert sup.ranks()[0].state is RankState.WARNED
    log = sup.log_path("job1", 0)
    h.run_until(sup, lambda: "warned" in log.read_text())
    sup.stop_job("job1", grace=5.0, warn=False)
    assert sup.ranks()[0].state is RankState.STOPPING
    events = h.run_until(sup, h.all_in(sup, RankState.GONE))
    assert _by_rank(events, "exited") == {0: 7}


def test_an_unwarned_stop_sends_sigterm_first(fake_sup, make_spec, h, state_dir):
    sup = fake_sup
    sup.launch(make_spec(["sleep", "60"], warn_signal=int(signal.SIGUSR1), warn_before=60.0, grace=5.0))
    h.run_until(sup, lambda: sup.ranks()[0].state is RankState.RUNNING)
    assert sup.stop_job("job1", warn=False)[0].state is RankState.STOPPING
    assert _by_rank(h.run_until(sup, h.all_in(sup, RankState.GONE)), "exited") == {0: 143}


def test_stop_job_stops_every_local_rank_in_one_call(sup, make_spec, h):
    for rank in range(3):
        sup.launch(make_spec(["sleep", "60"], rank=rank, world_size=3))
    sup.launch(make_spec(["sleep", "60"], job_id="other"))
    h.run_until(sup, h.all_in(sup, RankState.RUNNING))
    statuses = sup.stop_job("job1")
    assert [s.rank for s in statuses] == [0, 1, 2]
    assert all(s.state is RankState.STOPPING for s in statuses)
    h.run_until(sup, lambda: all(r.state is RankState.GONE for r in sup.ranks() if r.job_id == "job1"))
    assert [r.exit_status for r in sup.ranks() if r.job_id == "job1"] == [143, 143, 143]
    assert sup.status("other", 0).state is RankState.RUNNING


def test_stop_while_starting_still_stops_the_rank(sup, make_spec, h):
    sup.launch(make_spec(["sleep", "60"]))
    sup.stop_job("job1", grace=1.0)  # before the small parent reported the rank's pid
    events = h.run_until(sup, h.all_in(sup, RankState.GONE))
    assert [e.kind for e in events] == ["started", "exited", "gone"]


def test_signal_job_reaches_the_rank(sup, make_spec, h, state_dir):
    ready = state_dir / "ready"
    sup.launch(make_spec(["sh", "-c", f"trap 'exit 42' USR2; touch {ready}; while :; do sleep 0.05; done"]))
    h.run_until(sup, lambda: ready.exists() and sup.ranks()[0].state is RankState.RUNNING)
    assert sup.signal_job("job1", signal.SIGUSR2) >= 1
    events = h.run_until(sup, h.all_in(sup, RankState.GONE))
    assert _by_rank(events, "exited") == {0: 42}


@pytest.mark.parametrize("shell_only", [True, False], ids=["B: the batch shell alone", "the process group"])
def test_signal_job_to_the_batch_shell_alone_spares_its_programs(sup, make_spec, h, state_dir, shell_only):
    """``--signal B:USR1@N`` (Slurm's B:): the script's trap runs and its child, which USR1 would
    kill, runs on; without B: the whole group gets it and the child dies of it."""
    ready, trapped, child_done = state_dir / "ready", state_dir / "trapped", state_dir / "child-done"
    script = (
        f"trap 'touch {trapped}' USR1; sh -c 'touch {ready}; while [ ! -e {trapped} ]; do sleep 0.05; done; "
        f"touch {child_done}' & wait $!; wait $!"
    )
    sup.launch(make_spec(["sh", "-c", script]))
    h.run_until(sup, lambda: ready.exists() and sup.ranks()[0].state is RankState.RUNNING)
    assert sup.signal_job("job1", signal.SIGUSR1, shell_only=shell_only) == 1
    h.run_until(sup, h.all_in(sup, RankState.GONE))
    assert trapped.exists()  # the shell's trap ran either way
    assert child_done.exists() is shell_only  # the child ran on only when it was spared


def test_launch_is_idempotent_and_relaunch_needs_higher_restart_count(sup, make_spec, h):
    spec = make_spec(["sh", "-c", "echo restart=$LABGANG_RESTART_COUNT"])
    first = sup.launch(spec)
    assert sup.launch(spec) == first
    with pytest.raises(RankConflict, match="restart_count"):
        sup.launch(make_spec(["true"]))
    h.run_until(sup, h.all_in(sup, RankState.GONE))
    again = make_spec(["sh", "-c", "echo restart=$LABGANG_RESTART_COUNT"], restart_count=1)
    sup.launch(again)
    events = h.run_until(sup, h.all_in(sup, RankState.GONE))
    assert [e.kind for e in events] == ["started", "exited", "gone"]
    text = sup.log_path("job1", 0).read_text()
    assert "restart=0" in text and "restart=1" in text and "[labgang] job job1 rank 0 restart 1" in text
    sup.forget("job1")
    assert sup.ranks() == []


def test_stop_again_keeps_the_deadline_and_explicit_grace_shortens_it(fake_sup, make_spec, clock, h, state_dir):
    sup = fake_sup
    ready = state_dir / "ready"
    sup.launch(make_spec(["sh", "-c", f"trap '' TERM; touch {ready}; while :; do sleep 0.05; done"], grace=100.0))
    h.run_until(sup, lambda: ready.exists() and sup.ranks()[0].state is RankState.RUNNING)
    sup.stop_job("job1")
    clock.advance(60)
    sup.stop_job("job1")  # a repeated stop does not restart the grace period
    clock.advance(30)
    sup.tick()
    assert sup.ranks()[0].state is RankState.STOPPING
    sup.stop_job("job1", grace=5.0)  # ...but an explicit shorter grace brings SIGKILL forward
    clock.advance(5)
    events = h.run_until(sup, h.all_in(sup, RankState.GONE))
    assert [(e.kind, e.exit_status) for e in events] == [("exited", 137), ("gone", 137)]


def test_bad_arguments_are_refused_with_the_field_name(sup, make_spec):
    from labgang.agent.supervisor import UnknownJob

    with pytest.raises(UnknownJob, match="job_id: no rank of job 'nope'"):
        sup.stop_job("nope")
    sup.launch(make_spec(["sleep", "60"]))
    with pytest.raises(ValueError, match="grace: -1 is negative"):
        sup.stop_job("job1", grace=-1)


def test_a_main_process_seen_alive_by_a_snapshot_older_than_its_exit_status_is_no_leftover(
    sup, make_spec, h, state_dir
):
    # The snapshot a tick starts with can predate the shim reaping the main process and writing
    # exit.json, which the same tick then reads: that process is gone, not a leftover to stop.
    gate = state_dir / "gate"
    os.mkfifo(gate)
    sup.launch(make_spec(["sh", "-c", f"read _ < {gate}"]))
    h.run_until(sup, h.all_in(sup, RankState.RUNNING))
    rank_dir = next(rec.dir for rec in sup._ranks.values())
    stale = sup._os.snapshot()  # the main process is alive in it
    assert stale.matches(sup.ranks()[0].pid, next(rec.ticks for rec in sup._ranks.values()))
    with open(gate, "w") as fh:
        fh.write("go\n")
    h.wait_for_file(rank_dir / "exit.json")
    fresh_snapshot = sup._os.snapshot
    sup._os.snapshot = lambda: stale
    try:
        events = sup.tick()
    finally:
        sup._os.snapshot = fresh_snapshot
    assert _by_rank(events, "exited") == {0: 0}
    assert sup.ranks()[0].state is RankState.RELEASING  # not STOPPING: nothing was left to stop
    events = h.run_until(sup, h.all_in(sup, RankState.GONE))
    assert [e.kind for e in events] == ["gone"]


def test_forget_can_hand_the_journal_folders_deletion_to_a_caller(sup, make_spec, h):
    sup.launch(make_spec(["true"]))
    h.run_until(sup, h.all_in(sup, RankState.GONE))
    rank_dir = next(rec.dir for rec in sup._ranks.values())
    handed = []
    sup.forget("job1", run=handed.append)
    assert sup.ranks() == []  # forgotten at once
    assert rank_dir.exists() and len(handed) == 1  # deleted only when the caller runs it
    handed[0]()
    assert not rank_dir.exists()
    assert sup.log_path("job1", 0).exists()  # the log stays
