"""The agent dies (SIGKILL) while ranks run: ranks survive, and a new supervisor re-adopts them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from labgang.agent.supervisor import RankState, Supervisor, SupervisorError

CHILD = Path(__file__).with_name("agent_child.py")


def _stand_in_agent_killed(state_dir: Path, h, *args: str) -> list[dict]:
    """Run the stand-in agent (``agent_child.py``) on ``state_dir/specs.json`` with ``args``, read the
    rank statuses it prints once it has done its part, then kill it (SIGKILL); those statuses."""
    agent = subprocess.Popen(
        [h.python, str(CHILD), str(state_dir), str(state_dir / "specs.json"), *args],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert agent.stdout is not None
    try:
        return json.loads(agent.stdout.readline())["ranks"]
    finally:
        os.kill(agent.pid, signal.SIGKILL)
        agent.wait()
        agent.stdout.close()


def test_kill_9_of_the_agent_then_recover_reports_true_exit_statuses(state_dir, make_spec, cleanup, h, caplog):
    gate = state_dir / "gate"
    specs = [
        make_spec(["sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.02; done; exit 5"], rank=0, world_size=4),
        make_spec(["sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.02; done; kill -KILL $$"], rank=1, world_size=4),
        make_spec(["sleep", "60"], rank=2, world_size=4),
        make_spec(["sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.02; done; exit 0"], rank=3, world_size=4),
    ]
    (state_dir / "specs.json").write_text(json.dumps([s.to_dict() for s in specs]))
    before = {r["rank"]: r for r in _stand_in_agent_killed(state_dir, h)}
    assert sorted(before) == [0, 1, 2, 3] and all(r["state"] == "running" for r in before.values())
    assert all(h.pid_alive(r["pid"]) for r in before.values())  # the agent's death killed no rank

    gate.touch()  # ranks 0, 1 and 3 now end while no agent is running
    deadline = time.monotonic() + 8
    while any(h.pid_alive(before[r]["pid"]) for r in (0, 1, 3)) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not any(h.pid_alive(before[r]["pid"]) for r in (0, 1, 3))

    sup = Supervisor(state_dir, allow_root=True)
    cleanup.append(sup)
    with caplog.at_level("INFO", logger="labgang.agent.supervisor.supervisor"):
        events = sup.recover()
    # what the log says of each rank is what the first tick found, not only what the journal said
    said = [r.getMessage() for r in caplog.records if "re-adopted" in r.getMessage()]
    assert "rank job1/2 re-adopted: journalled running, now running" in said, said
    assert any(
        m.startswith("rank job1/3 re-adopted: journalled running, now ") and m.endswith(", exit status 0") for m in said
    ), said
    events = h.run_until(sup, lambda: sum(r.state is RankState.GONE for r in sup.ranks()) == 3, events=events)
    assert {e.rank: e.exit_status for e in events if e.kind == "exited"} == {0: 5, 1: 137, 3: 0}
    assert not any(e.kind == "started" for e in events)  # already reported by the dead agent
    adopted = sup.status("job1", 2)
    assert adopted.state is RankState.RUNNING and adopted.pid == before[2]["pid"]

    sup.stop_job("job1")  # the re-adopted rank is supervised as before
    events = h.run_until(sup, h.all_in(sup, RankState.GONE))
    assert [(e.rank, e.kind, e.exit_status) for e in events] == [(2, "exited", 143), (2, "gone", 143)]


def test_recover_ignores_a_reused_pid(state_dir, make_spec, cleanup, h):
    sup = Supervisor(state_dir, allow_root=True)
    sup.launch(make_spec(["sleep", "60"]))
    h.run_until(sup, h.all_in(sup, RankState.RUNNING))
    sup.close()  # the agent goes away; the rank keeps running
    rank_dir = state_dir / "ranks" / "job1" / "0"
    # Pretend the journalled processes started at other times: their pids now name "other processes".
    info = json.loads((rank_dir / "rank.json").read_text())
    shim = json.loads((rank_dir / "shim.json").read_text())
    for name, data in (("rank.json", info), ("shim.json", shim)):
        (rank_dir / name).write_text(json.dumps({**data, "start_ticks": data["start_ticks"] - 1}))
    state = json.loads((rank_dir / "state.json").read_text())
    (rank_dir / "state.json").write_text(json.dumps({**state, "known": {}}))
    try:
        other = Supervisor(state_dir, allow_root=True)
        events = other.recover()
        # Neither the shim nor the rank matches its journalled identity: nothing is adopted or
        # signalled, and the rank's exit status is unknowable.
        assert [(e.kind, e.exit_status) for e in events] == [("exited", None), ("gone", None)]
        for _ in range(3):
            other.tick()
        assert h.pid_alive(info["pid"]) and h.pid_alive(shim["pid"])
    finally:  # the "other processes" are really this test's: end them by hand
        os.kill(info["pid"], signal.SIGKILL)


def test_a_second_supervisor_on_the_same_state_dir_is_refused(state_dir, cleanup):
    first = Supervisor(state_dir)
    with pytest.raises(SupervisorError, match=f"already supervised by another agent \\(pid {os.getpid()}\\)"):
        Supervisor(state_dir)
    first.close()
    Supervisor(state_dir).close()


def test_rank_whose_small_parent_was_killed_is_still_stopped_and_reports_unknown_status(sup, make_spec, h, state_dir):
    sup.launch(make_spec(["sleep", "60"]))
    h.run_until(sup, h.all_in(sup, RankState.RUNNING))
    rank_pid = sup.ranks()[0].pid
    shim = json.loads((state_dir / "ranks" / "job1" / "0" / "shim.json").read_text())
    os.kill(shim["pid"], signal.SIGKILL)
    for _ in range(5):
        assert sup.tick() == []
    assert sup.ranks()[0].state is RankState.RUNNING and h.pid_alive(rank_pid)
    sup.stop_job("job1")
    events = h.run_until(sup, h.all_in(sup, RankState.GONE))
    assert [(e.kind, e.exit_status) for e in events] == [("exited", None), ("gone", None)]
    assert not h.pid_alive(rank_pid)


def _killed_while_stopping(state_dir: Path, make_spec, h, grace: float, on_term: str = "") -> list[dict]:
    """A stand-in agent launches a rank that ignores SIGTERM (or runs the shell command ``on_term``
    on it and goes on), stops it with ``grace`` seconds and is killed (SIGKILL) during the grace;
    the rank statuses it printed (``stopping``)."""
    ready = state_dir / "ready"
    spec = make_spec(["sh", "-c", f"trap '{on_term}' TERM; touch {ready}; while :; do sleep 0.05; done"])
    (state_dir / "specs.json").write_text(json.dumps([spec.to_dict()]))
    ranks = _stand_in_agent_killed(state_dir, h, f"{grace:g}", str(ready))
    assert [r["state"] for r in ranks] == ["stopping"]
    return ranks


def test_a_stop_under_way_resumes_after_the_agent_restarts(state_dir, make_spec, cleanup, clock, h):
    ranks = _killed_while_stopping(state_dir, make_spec, h, 600)
    sup = Supervisor(state_dir, allow_root=True, clock=clock)
    cleanup.append(sup)
    assert sup.recover() == []
    assert sup.status("job1", 0).state is RankState.STOPPING  # no SIGTERM again, what is left of the grace
    for _ in range(5):
        assert sup.tick() == []
    assert h.pid_alive(ranks[0]["pid"])
    clock.advance(600)
    events = h.run_until(sup, h.all_in(sup, RankState.GONE))
    assert [(e.kind, e.exit_status) for e in events] == [("exited", 137), ("gone", 137)]


def test_a_resumed_stop_keeps_the_deadline_it_had_before_the_agent_went_away(state_dir, make_spec, cleanup, clock, h):
    # 580 s of a 600 s grace pass while no agent runs: the next one kills about 20 s after it starts,
    # not 600 s after (a rank got at most twice its grace when each restart began it anew)
    ranks = _killed_while_stopping(state_dir, make_spec, h, 600)
    sup = Supervisor(state_dir, allow_root=True, clock=clock, wall_clock=lambda: time.time() + 580)
    cleanup.append(sup)
    assert sup.recover() == []
    assert sup.status("job1", 0).state is RankState.STOPPING
    clock.advance(5)
    for _ in range(5):
        assert sup.tick() == []
    assert h.pid_alive(ranks[0]["pid"])
    clock.advance(20)  # past the journalled deadline (it left at most 20 s; the whole grace is 600)
    events = h.run_until(sup, h.all_in(sup, RankState.GONE))
    assert [(e.kind, e.exit_status) for e in events] == [("exited", 137), ("gone", 137)]


def _marks(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_a_rank_whose_sigterm_went_gets_no_second_one_after_the_agent_restarts(state_dir, make_spec, cleanup, h):
    # Slurm sends one SIGTERM per stop: a checkpoint-on-SIGTERM job checkpoints once, and a
    # preemption victim's trap is not restarted (it would end later than its own trap says)
    marks = state_dir / "marks"
    ranks = _killed_while_stopping(state_dir, make_spec, h, 4, on_term=f"echo term >> {marks}")
    saved = json.loads((state_dir / "ranks" / "job1" / "0" / "state.json").read_text())
    assert saved["state"] == "stopping" and saved["term_sent"] is True
    h.wait_for_file(marks)  # the dead agent's SIGTERM reached the trap
    sup = Supervisor(state_dir, allow_root=True)
    cleanup.append(sup)
    assert sup.recover() == []
    assert sup.status("job1", 0).state is RankState.STOPPING
    sup.stop_job("job1", grace=4, warn=True)  # what the coordinator asks again when the agent reconnects
    events = h.run_until(sup, h.all_in(sup, RankState.GONE))
    assert [(e.kind, e.exit_status) for e in events] == [("exited", 137), ("gone", 137)]
    assert _marks(marks) == ["term"]  # the trap ran once; it had 2 s and more to run a second time
    # SIGKILL at the first SIGTERM + grace, the deadline the dead agent journalled
    ended = json.loads((state_dir / "ranks" / "job1" / "0" / "exit.json").read_text())["ended_at"]
    assert saved["kill_by"] - 0.2 <= ended <= saved["kill_by"] + 2, (ended, saved["kill_by"])
    assert not h.pid_alive(ranks[0]["pid"])


def test_a_rank_journalled_stopping_before_its_sigterm_went_gets_it_once_and_its_whole_grace(
    state_dir, make_spec, cleanup, h
):
    # The agent died between journalling "stopping" and sending SIGTERM: the next one sends it,
    # once, and the grace starts then (the rank had no SIGTERM before; its journalled deadline passed)
    marks, ready = state_dir / "marks", state_dir / "ready"
    spec = make_spec(["sh", "-c", f"trap 'echo term >> {marks}' TERM; echo up > {ready}; while :; do sleep 0.05; done"])
    (state_dir / "specs.json").write_text(json.dumps([spec.to_dict()]))
    assert [r["state"] for r in _stand_in_agent_killed(state_dir, h)] == ["running"]
    h.wait_for_file(ready)
    state = state_dir / "ranks" / "job1" / "0" / "state.json"
    saved = json.loads(state.read_text())
    saved.update(state="stopping", stop_grace=3.0, kill_by=time.time(), term_sent=False)
    state.write_text(json.dumps(saved))
    sup = Supervisor(state_dir, allow_root=True)
    cleanup.append(sup)
    began = time.time()
    assert sup.recover() == []
    assert sup.status("job1", 0).state is RankState.STOPPING
    h.wait_for_file(marks)  # SIGTERM sent now
    sup.stop_job("job1", grace=3, warn=True)
    events = h.run_until(sup, h.all_in(sup, RankState.GONE))
    assert [(e.kind, e.exit_status) for e in events] == [("exited", 137), ("gone", 137)]
    assert _marks(marks) == ["term"]
    ended = json.loads((state_dir / "ranks" / "job1" / "0" / "exit.json").read_text())["ended_at"]
    assert ended - began >= 3 - 0.2, ended - began
