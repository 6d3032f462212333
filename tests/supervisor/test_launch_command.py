"""The agent's ``launch`` command parses each spec into the typed contract first: a spec that is
not even an object is refused for that rank (one line, permanent), a port not chosen yet is
picked before the rank starts, and a spec without a port never reaches the supervisor."""

from __future__ import annotations

import asyncio
import time

import pytest
from labgang.agent.commands import CommandHandler
from labgang.agent.supervisor import InvalidSpec, RankState
from labgang.agent.supervisor.gate import NOT_RELEASED


def test_a_malformed_spec_is_refused_for_its_rank_and_the_others_start(sup, make_spec, h):
    handler = CommandHandler(sup, wake=lambda: None)
    good = make_spec(["sleep", "30"], job_id="j1", master_port=None).to_dict()
    assert good["master_port"] == 0  # not chosen yet: this agent picks it
    answer = asyncio.run(handler.handle("launch", {"specs": [["job_id", "rank"], "spec", good]}))
    assert [a.get("error") for a in answer[:2]] == [
        "spec: a list is not a launch spec (allowed: an object of LaunchSpec fields)",
        "spec: a str is not a launch spec (allowed: an object of LaunchSpec fields)",
    ]
    assert all(a["permanent"] and a["job_id"] is None for a in answer[:2])
    started = answer[2]
    assert "error" not in started and started["rank"] == 0
    port = started["master_port"]
    assert isinstance(port, int) and 1 <= port <= 65535
    assert sup.job_master_port("j1") == port
    assert sup.stop_job("j1", 0.0)
    h.run_until(sup, h.all_in(sup, RankState.GONE))


def test_the_supervisor_refuses_a_spec_without_a_port(sup, make_spec):
    with pytest.raises(InvalidSpec, match=r"^master_port: is not chosen"):
        sup.launch(make_spec(["true"], master_port=None))


def test_launch_all_refuses_a_whole_gang_for_one_refused_rank_and_starts_the_other_gangs(sup, make_spec, h, tmp_path):
    """One node's ranks in one call: a rank refused in the middle (the same rank asked again with
    another command) is its own answer and no rank of its gang starts here (each answers
    ``GangNotStarted``, naming the refused rank); another job's ranks in the same call start."""
    ran = tmp_path / "ran"
    ran.mkdir()
    first = make_spec(["sh", "-c", f"touch {ran}/g1.0; exec sleep 30"], job_id="g1", rank=0, world_size=3)
    clash = make_spec(["sleep", "31"], job_id="g1", rank=0, world_size=3)
    last = make_spec(["sh", "-c", f"touch {ran}/g1.2; exec sleep 30"], job_id="g1", rank=2, world_size=3)
    other = make_spec(["sh", "-c", f"touch {ran}/g2.0; exec sleep 30"], job_id="g2", rank=0, world_size=1)
    results = sup.launch_all([first, clash, last, other])
    assert [type(r).__name__ for r in results] == ["GangNotStarted", "RankConflict", "GangNotStarted", "RankStatus"]
    assert str(results[0]).startswith(
        "job_id: rank 0 of job 'g1' not started: rank 0 of its gang on this node was refused"
    )
    assert [(r.job_id, r.rank) for r in sup.ranks()] == [("g2", 0)]
    h.run_until(sup, lambda: sup.status("g2", 0).state is RankState.RUNNING and (ran / "g2.0").exists())
    assert sorted(p.name for p in ran.iterdir()) == ["g2.0"]
    assert sup.stop_job("g2", 0.0)
    h.run_until(sup, h.all_in(sup, RankState.GONE))


def test_every_rank_of_one_launch_gets_the_one_master_port_it_picks(sup, make_spec, h, tmp_path):
    """A gang on one node arrives as one launch with no port chosen: every rank must get the same
    MASTER_PORT (torch.distributed's rendezvous), not one picked per rank."""
    handler = CommandHandler(sup, wake=lambda: None)
    script = f"echo $MASTER_PORT > {tmp_path}/port.$RANK; exec sleep 30"
    specs = [
        make_spec(["sh", "-c", script], job_id="gp", rank=r, local_rank=r, world_size=3, master_port=None).to_dict()
        for r in range(3)
    ]
    answer = asyncio.run(handler.handle("launch", {"specs": specs}))
    assert [a.get("error") for a in answer] == [None, None, None], answer
    ports = {a["master_port"] for a in answer}
    assert len(ports) == 1 and sup.job_master_port("gp") in ports
    files = [tmp_path / f"port.{r}" for r in range(3)]
    h.run_until(sup, lambda: all(f.exists() and f.read_text().strip() for f in files))
    assert {f.read_text().strip() for f in files} == {str(port) for port in ports}
    assert sup.stop_job("gp", 0.0)
    h.run_until(sup, h.all_in(sup, RankState.GONE))


def test_a_stop_job_command_during_a_launchs_start_gate_aborts_it(sup, make_spec, h, tmp_path):
    """The ``launch`` command awaits its gate without holding the event loop: a ``stop_job`` that
    comes meanwhile (the ranks' new small parents are still starting) aborts the gate, the launch
    answers the ranks' statuses, and no rank runs its command."""
    handler = CommandHandler(sup, wake=lambda: None)
    specs = [
        make_spec(["sh", "-c", f"touch {tmp_path}/ran.{r}"], job_id="gs", rank=r, world_size=2).to_dict()
        for r in range(2)
    ]

    async def launch_then_stop():
        launch = asyncio.create_task(handler.handle("launch", {"specs": specs}))
        await asyncio.sleep(0)  # the launch runs up to its wait on the gate
        stopped = await handler.handle("stop_job", {"job_id": "gs", "grace": 5.0, "warn": False})
        return await launch, stopped

    answer, stopped = asyncio.run(launch_then_stop())
    assert [a.get("error") for a in answer] == [None, None] and [s["rank"] for s in stopped] == [0, 1]
    events = h.run_until(sup, h.all_in(sup, RankState.GONE))
    # each rank's exit is reported as a tick sees it: in no promised order
    assert sorted((e.rank, e.exit_status) for e in events if e.kind == "exited") == [
        (0, NOT_RELEASED),
        (1, NOT_RELEASED),
    ]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("ran.")) == []


def _stamp_specs(make_spec, out, job: str, n: int) -> list[dict]:
    return [
        make_spec(
            ["/usr/bin/bash", "-c", f"echo $EPOCHREALTIME > {out}/{job}.{r}"], job_id=job, rank=r, world_size=n
        ).to_dict()
        for r in range(n)
    ]


def test_a_held_launch_answers_with_every_rank_parked_and_starts_them_on_release_gate(sup, make_spec, h, tmp_path):
    """``hold`` (a gang over several nodes): the answer comes once every rank here is parked at
    its gate, none has run; ``release_gate`` starts them, and a second one changes nothing."""
    handler = CommandHandler(sup, wake=lambda: None)

    async def held_then_released():
        answer = await handler.handle("launch", {"specs": _stamp_specs(make_spec, tmp_path, "gh", 3), "hold": True})
        ran_before = sorted(p.name for p in tmp_path.iterdir())
        released_at = time.time()
        released = await handler.handle("release_gate", {"job_id": "gh"})
        again = await handler.handle("release_gate", {"job_id": "gh"})
        return answer, ran_before, released_at, released, again

    answer, ran_before, released_at, released, again = asyncio.run(held_then_released())
    assert [a.get("error") for a in answer] == [None] * 3 and {a["state"] for a in answer} == {"starting"}
    assert ran_before == []
    assert [r["rank"] for r in released] == [0, 1, 2] and again == []
    events = h.run_until(sup, h.all_in(sup, RankState.GONE))
    assert [e.exit_status for e in events if e.kind == "exited"] == [0, 0, 0]
    assert min(float((tmp_path / f"gh.{r}").read_text()) for r in range(3)) > released_at


def test_a_stop_of_a_held_launch_releases_nothing(sup, make_spec, h, tmp_path):
    handler = CommandHandler(sup, wake=lambda: None)

    async def held_then_stopped():
        await handler.handle("launch", {"specs": _stamp_specs(make_spec, tmp_path, "gs2", 2), "hold": True})
        await handler.handle("stop_job", {"job_id": "gs2", "grace": 5.0, "warn": False})
        return await handler.handle("release_gate", {"job_id": "gs2"})

    assert asyncio.run(held_then_stopped()) == []
    events = h.run_until(sup, h.all_in(sup, RankState.GONE))
    assert [e.exit_status for e in events if e.kind == "exited"] == [NOT_RELEASED, NOT_RELEASED]
    assert list(tmp_path.iterdir()) == []


def test_a_held_launch_with_no_release_gate_in_time_releases_itself(sup, make_spec, h, tmp_path):
    """The coordinator went away between the answer and its ``release_gate``: the ranks run, as
    after an agent crash (the coordinator's reconciliation sees them)."""
    handler = CommandHandler(sup, wake=lambda: None)
    handler.hold_timeout = 0.2

    async def held_and_forgotten():
        await handler.handle("launch", {"specs": _stamp_specs(make_spec, tmp_path, "gf", 2), "hold": True})
        while handler._held:  # the hold timer fires on this loop
            await asyncio.sleep(0.02)

    asyncio.run(held_and_forgotten())
    events = h.run_until(sup, h.all_in(sup, RankState.GONE))
    assert [e.exit_status for e in events if e.kind == "exited"] == [0, 0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gf.0", "gf.1"]
