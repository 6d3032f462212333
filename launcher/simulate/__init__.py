"""``labgang simulate``: scheduling scenarios on a simulated clock (format: ``docs/scenarios.md``).

- :mod:`.scenario` parses and validates files (unknown keys are errors).
- :mod:`.engine` is the discrete-event simulation: a simulated clock and simulated ranks around
  the coordinator's lifecycle model and the real :func:`run_cycle`.
- :mod:`.naming` numbers jobs as the coordinator does (array tasks, dependencies in its ids)
  and names them as the file does; :mod:`.jobs` is one simulated job.
- :mod:`.checks` evaluates ``[[expect]]`` and ``[[invariant]]`` tables.
- :mod:`.summary` reports per-queue waits and utilization for plain job lists.
"""

from labgang.launcher.simulate.checks import Report, run_scenario
from labgang.launcher.simulate.engine import Simulation
from labgang.launcher.simulate.scenario import Scenario, ScenarioError, load_scenario, parse_scenario
from labgang.launcher.simulate.summary import format_summary

__all__ = [
    "Report",
    "Scenario",
    "ScenarioError",
    "Simulation",
    "format_summary",
    "load_scenario",
    "parse_scenario",
    "run_scenario",
]
