"""A fluent builder for scenario documents (docs/scenarios.md), for table-driven tests:

s = (scenario("reclaim").node("n1", gpus=8)
     .queue("a", cohort="lab", nominal=4, reclaim="any").queue("b", cohort="lab", nominal=4)
     .job("b1", "b", gpus=8).job("a1", "a", gpus=4, submit=5)
     .expect(at=5, running=["a1"], preempted=["b1"]))
report = s.run()
"""

from __future__ import annotations

from typing import Any

from labgang.launcher.simulate import Report, parse_scenario, run_scenario


class ScenarioBuilder:
    """Collects tables; :meth:`doc` gives the TOML-shaped dict, :meth:`run` simulates it."""

    def __init__(self, name: str) -> None:
        self._doc: dict[str, Any] = {
            "scenario": {"name": name},
            "nodes": [],
            "queues": [],
            "jobs": [],
            "expect": [],
            "invariant": [],
        }

    def node(self, name: str, gpus: int, **extra: Any) -> ScenarioBuilder:
        self._doc["nodes"].append({"name": name, "gpus": gpus, **extra})
        return self

    def queue(
        self,
        name: str,
        nominal: int,
        cohort: str | None = None,
        borrowing_limit: int | None = None,
        lending_limit: int | None = None,
        within: str = "never",
        reclaim: str = "never",
        strict: bool = False,
        **extra: Any,
    ) -> ScenarioBuilder:
        q: dict[str, Any] = {
            "name": name,
            "nominal": {"gpu": nominal},
            "within_queue": within,
            "reclaim_within_cohort": reclaim,
            "queueing": "strict-fifo" if strict else "best-effort-fifo",
            **extra,
        }
        if cohort is not None:
            q["cohort"] = cohort
        if borrowing_limit is not None:
            q["borrowing_limit"] = {"gpu": borrowing_limit}
        if lending_limit is not None:
            q["lending_limit"] = {"gpu": lending_limit}
        self._doc["queues"].append(q)
        return self

    def job(self, job_id: str, queue: str, gpus: int = 1, workers: int = 1, **extra: Any) -> ScenarioBuilder:
        self._doc["jobs"].append(
            {
                "id": job_id,
                "queue": queue,
                "workers": workers,
                "gpus_per_worker": gpus,
                **{k: float(v) if k in ("submit", "duration", "grace") else v for k, v in extra.items()},
            }
        )
        return self

    def expect(self, at: float | None = None, **sets: list[str]) -> ScenarioBuilder:
        e: dict[str, Any] = dict(sets)
        if at is not None:
            e["at"] = float(at)
        self._doc["expect"].append(e)
        return self

    def max_usage(self, queue: str, gpu: int) -> ScenarioBuilder:
        self._doc["invariant"].append({"max_usage": {"queue": queue, "gpu": gpu}, "no_partial_gangs": True})
        return self

    def doc(self) -> dict[str, Any]:
        return self._doc

    def run(self) -> Report:
        return run_scenario(parse_scenario(self._doc, self._doc["scenario"]["name"]))


def scenario(name: str) -> ScenarioBuilder:
    """Start a scenario."""
    return ScenarioBuilder(name)
