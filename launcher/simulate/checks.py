"""``[[expect]]`` and ``[[invariant]]`` checks, and the driver that runs a scenario with them.

:func:`run_scenario` simulates a scenario to its end, checking each expectation at its
``at`` (the state after every event up to and including that instant; no ``at`` = once no
event is left) and each invariant after every cycle and instant, and returns a
:class:`Report` whose ``failures`` are readable one-line diffs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from labgang.launcher.scheduler.groups import rank_shapes
from labgang.launcher.simulate.engine import Simulation, Tracer
from labgang.launcher.simulate.scenario import ExpectModel, InvariantModel, Scenario
from labgang.launcher.simulate.startable import NeverStarts, never_starting
from labgang.launcher.simulate.summary import count


@dataclass
class Report:
    """The outcome of one scenario.

    Attributes:
        scenario: what ran.
        failures: one readable line per failed expectation or invariant violation.
        checked: how many expectations were evaluated.
        simulation: the finished simulation (for summaries).
        never_starts: jobs that can never start (warnings; they stay pending).
    """

    scenario: Scenario
    simulation: Simulation
    failures: list[str] = field(default_factory=list)
    checked: int = 0
    never_starts: list[NeverStarts] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every expectation and invariant held."""
        return not self.failures

    def cancelled(self) -> list[dict[str, str]]:
        """The jobs cancelled because their dependency can never hold, in submission order: each
        ``{"job", "code", "reason"}``, the reason naming jobs as the file does."""
        sim = self.simulation
        return [
            {
                "job": j.id,
                "code": j.record.status.reason_code or "",
                "reason": sim.scenario.ids.shown(j.record.status.reason_message or ""),
            }
            for j in sorted(sim.jobs.values(), key=lambda j: j.seq)
            if j.cancelled
        ]


def _names(ids: set[str] | list[str]) -> str:
    return "[" + ", ".join(sorted(ids)) + "]"


def compare_sets(label: str, expected: list[str], got: set[str]) -> str | None:
    """A diff line when ``got`` differs from ``expected``, else None."""
    want = set(expected)
    if want == got:
        return None
    parts = []
    if want - got:
        parts.append(f"missing {_names(want - got)}")
    if got - want:
        parts.append(f"unexpected {_names(got - want)}")
    return f"{label}: expected {_names(want)}, got {_names(got)} ({'; '.join(parts)})"


def _expand(sim: Simulation, names: list[str]) -> list[str]:
    """Names as expectations take them: a job array's id stands for all its tasks."""
    return [member for name in names for member in sim.scenario.ids.members(name)]


def check_expect(sim: Simulation, e: ExpectModel) -> list[str]:
    """Lines describing what in ``e`` does not hold for ``sim`` now (a job array's id in a list
    stands for all its tasks)."""
    out: list[str] = []
    for label, state in (("running", "running"), ("pending", "pending"), ("finished", "finished")):
        want = getattr(e, label)
        if want is not None:
            line = compare_sets(label, _expand(sim, want), sim.ids_in(state))
            if line:
                out.append(line)
    if e.cancelled is not None:  # a dependency that can never hold cancelled them
        line = compare_sets("cancelled", _expand(sim, e.cancelled), {j.id for j in sim.jobs.values() if j.cancelled})
        if line:
            out.append(line)
    ever = {j.id for j in sim.jobs.values() if j.preempted}
    if e.preempted is not None:  # "these were preempted at least once by then"
        missing = set(_expand(sim, e.preempted)) - ever
        if missing:
            out.append(f"preempted: {_names(missing)} were never preempted (preempted so far: {_names(ever)})")
    if e.not_preempted is not None:
        wrong = set(_expand(sim, e.not_preempted)) & ever
        if wrong:
            out.append(f"not_preempted: {_names(wrong)} were preempted")
    started = {member: want for name, want in (e.started or {}).items() for member in sim.scenario.ids.members(name)}
    for job_id, want in sorted(started.items()):
        job = sim.jobs[job_id]
        got = len(job.placement) if job.state == "running" else None
        if got != want:
            now = f"runs with {got} ranks" if got is not None else f"is {job.state}"
            out.append(f"started: {job_id} should run with {want} ranks; it {now}")
    return out


def check_invariant(sim: Simulation, inv: InvariantModel) -> list[str]:
    """Lines describing violations of ``inv`` in ``sim``'s current state."""
    out: list[str] = []
    if inv.max_usage is not None:
        queue = str(inv.max_usage["queue"])
        for res, limit in inv.max_usage.items():
            if res == "queue":
                continue
            used = sim.usage(queue, res)
            if used > int(limit):
                out.append(f"max_usage: {queue} uses {used} {res}, limit {limit}")
    if inv.no_partial_gangs:
        out.extend(partial_gangs(sim))
    return out


def partial_gangs(sim: Simulation) -> list[str]:
    """Running jobs missing ranks or devices, devices handed out twice, unknown devices."""
    out: list[str] = []
    known = {d.uuid: d for n in sim.scenario.nodes for d in n.devices}
    holder: dict[str, str] = {}
    for j in sorted(sim.jobs.values(), key=lambda j: j.seq):
        if j.state != "running":
            continue
        req = j.held  # an elastic gang: all ranks of the size it started with, at least its minimum
        if sorted(r.rank for r in j.placement) != list(range(req.workers)):
            out.append(f"no_partial_gangs: {j.id} has ranks {[r.rank for r in j.placement]} of {req.workers}")
        if req.workers < (j.request.min_workers or j.request.workers):
            out.append(
                f"no_partial_gangs: {j.id} started with {req.workers}, below its minimum {j.request.min_workers}"
            )
        shapes = rank_shapes(req)
        for r in j.placement:
            shape = shapes[r.rank] if r.rank < len(shapes) else req
            if len(r.devices) != shape.per_worker:
                out.append(
                    f"no_partial_gangs: {j.id} rank {r.rank} got {len(r.devices)} of "
                    f"{count(shape.per_worker, 'device')}"
                )
            for u in r.devices:
                dev = known.get(u)
                if dev is None or dev.resource != shape.resource or dev.node != r.node:
                    out.append(f"no_partial_gangs: {j.id} rank {r.rank} got unsuitable device {u}")
                if u in holder:
                    out.append(f"no_partial_gangs: device {u} given to both {holder[u]} and {j.id}")
                holder[u] = j.id
    return out


def run_scenario(scenario: Scenario, trace: Tracer | None = None) -> Report:
    """Simulate ``scenario`` to its end and check it.

    Args:
        scenario: a validated scenario.
        trace: receives one dict per event (``--trace``), expectations included.

    Returns:
        The :class:`Report`.
    """
    sim = Simulation(scenario, trace)
    report = Report(scenario, sim, never_starts=never_starting(scenario))
    if trace is not None:
        for warning in report.never_starts:
            trace({"t": sim.now, "event": "never_starts", **warning.to_dict()})
    invariants = list(scenario.file.invariant)
    seen: set[str] = set()

    def hook(s: Simulation) -> None:
        for inv in invariants:
            for line in check_invariant(s, inv):
                if line not in seen:  # report each distinct violation once, at its first time
                    seen.add(line)
                    report.failures.append(f"t={s.now:g}: invariant {line}")
                    if trace is not None:
                        trace({"t": s.now, "event": "invariant_violated", "message": line})

    sim.add_invariant_hook(hook)
    hook(sim)
    timed = sorted(((e.at, i) for i, e in enumerate(scenario.file.expect) if e.at is not None))
    final = [i for i, e in enumerate(scenario.file.expect) if e.at is None]

    def expect(i: int, label: str, at: float) -> None:
        """Check expectation ``i``; its trace line is dated ``at``, the instant it is checked (its
        own ``at``, the state then being the last instant's before it), not the last event's."""
        lines = check_expect(sim, scenario.file.expect[i])
        report.checked += 1
        for line in lines:
            report.failures.append(f"expect[{i}] {label}: {line}")
        if trace is not None:
            trace({"t": at, "event": "expect", "index": i, "ok": not lines, "problems": lines})

    k = 0
    while True:
        t = sim.next_time()
        while k < len(timed) and (t is None or timed[k][0] < t):
            expect(timed[k][1], f"at t={timed[k][0]:g}", timed[k][0])
            k += 1
        if t is None:
            break
        sim.run_instant()
    for i in final:
        expect(i, "at the end", sim.now)
    return report
