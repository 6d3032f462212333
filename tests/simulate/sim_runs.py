"""Running a workload document through ``labgang simulate``'s engine to its end, and everything the
run shows: the pieces the simulator's equivalence tests share (the differential test against the
coordinator, the exit-report short-cut, the names-as-ids short-cut).

A workload document is a scenario file (docs/scenarios.md) whose jobs may carry the harness's
:data:`CANCEL` key: root cancels that job at that time, in both drivers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from labgang.launcher.coordinator.requests import Caller
from labgang.launcher.simulate import engine
from labgang.launcher.simulate.scenario import Scenario, parse_scenario

CANCEL = "cancel"
"""A workload job's key for ``labgang cancel`` at that time (by root): both drivers are told
(``Simulation.cancel``, ``Coordinator.cancel``); the scenario file itself has no such key. Not
used on array jobs."""
ROOT = Caller(uid=0, user="root", admin=True)


def cancels(doc: dict[str, Any]) -> dict[str, float]:
    """Job id -> when root cancels it (:data:`CANCEL`), for the jobs that are not arrays."""
    return {j["id"]: j[CANCEL] for j in doc["jobs"] if CANCEL in j and "array" not in j}


def scenario_of(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` as a scenario file: without the harness's :data:`CANCEL` keys."""
    return {**doc, "jobs": [{k: v for k, v in j.items() if k != CANCEL} for j in doc["jobs"]]}


def simulated(
    doc: dict[str, Any],
    source: str = "<random>",
    *,
    max_steps: int,
    trace: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[Scenario, engine.Simulation]:
    """``doc`` parsed and run to its end (its cancels told first), at most ``max_steps`` instants.

    Returns:
        The parsed scenario and the finished simulation.

    Raises:
        AssertionError: the run took ``max_steps`` instants or more.
    """
    scenario = parse_scenario(scenario_of(doc), source)
    sim = engine.Simulation(scenario, trace=trace)
    for job_id, at in cancels(doc).items():
        sim.cancel(job_id, at, ROOT.user)
    steps = 0
    while sim.next_time() is not None:
        sim.run_instant()
        steps += 1
        assert steps < max_steps, f"{source}: still running after {steps} instants"
    return scenario, sim


def everything_shown(doc: dict[str, Any], source: str = "<random>", *, as_people_read: bool = False) -> dict[str, Any]:
    """Everything a replay or ``labgang simulate`` shows of ``doc``: per job its history (time, event,
    message), final state, exit status, reason, first admission, end, waits, preemptions and device
    seconds; the whole trace; the cycle count.

    Args:
        as_people_read: messages and reasons as people read them (``JobIds.shown``: job names for
            the model's ids) rather than as the model wrote them.

    Returns:
        ``{"jobs": {job id: tuple}, "trace": [trace lines], "cycles": int, "by_name_only": bool}``,
        the last being whether the model's job ids were the file's names (``JobIds.by_name_only``).
    """
    lines: list[dict[str, Any]] = []
    scenario, sim = simulated(doc, source, max_steps=20_000, trace=lines.append)
    shown = scenario.ids.shown if as_people_read else str
    jobs = {
        j.id: (
            [(h.time, h.event, shown(h.message)) for h in j.record.history],
            j.record.status.state.value,
            j.record.status.exit_status,
            shown(j.record.status.reason_message or ""),
            j.first_admit,
            j.end_time,
            j.waits,
            j.preempted,
            j.device_seconds,
        )
        for j in sim.jobs.values()
    }
    return {"jobs": jobs, "trace": lines, "cycles": sim.cycles, "by_name_only": scenario.ids.by_name_only}
