"""``labgang simulate FILE... [--trace]``: run scheduling scenarios on a simulated clock.

Exit status: 0 when every ``[[expect]]`` and ``[[invariant]]`` of every file holds,
1 when one fails (each failure printed as a readable diff), 2 when a file is malformed
(the message names the key and what is allowed). A file without expectations is a plain
job mix: its per-queue wait times and utilization are printed.
"""

from __future__ import annotations

import json
import sys

import click
from labgang.launcher.simulate import ScenarioError, format_summary, load_scenario, run_scenario
from labgang.launcher.simulate.summary import count


@click.command("simulate")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--trace", is_flag=True, help="Print the event trace as JSON lines.")
@click.option(
    "--summary",
    "force_summary",
    is_flag=True,
    help="Also print per-queue waits and utilization for files with expectations.",
)
def simulate(files: tuple[str, ...], trace: bool, force_summary: bool) -> None:
    """Run scheduling scenarios (format: docs/scenarios.md): the real scheduler and job lifecycle, simulated clock.

    A file with [[expect]] / [[invariant]] tables is checked: PASS, or FAIL with one line per
    difference. A plain job list prints per-queue wait times and utilization.

    Exit status: 0 every check holds, 1 a check failed, 2 a file is missing, not UTF-8
    TOML, or malformed.
    """
    status = 0
    for path in files:
        try:
            scenario = load_scenario(path)
            tracer = None
            if trace:

                def tracer(event: dict, _path: str = path) -> None:
                    click.echo(json.dumps({"file": _path, **event}, sort_keys=False))

            report = run_scenario(scenario, tracer)
        except ScenarioError as exc:
            if exc.unreadable:
                click.echo(f"ERROR {exc.source}: {exc.problems[0]}", err=True)
                status = 2
                continue
            click.echo(f"ERROR {exc.source}: malformed scenario", err=True)
            for line in exc.problems:
                click.echo(f"  {line}", err=True)
            status = 2
            continue
        name = scenario.file.scenario.name
        if scenario.has_checks:  # with --trace, stdout stays pure JSON lines
            if report.ok:
                click.echo(
                    f"PASS {path} ({name}): {count(report.checked, 'expectation')}, "
                    f"{count(len(scenario.file.invariant), 'invariant')}",
                    err=trace,
                )
            else:
                click.echo(f"FAIL {path} ({name})", err=trace)
                for line in report.failures:
                    click.echo(f"  {line}", err=trace)
                status = max(status, 1)
        if force_summary or not scenario.has_checks:
            click.echo(f"{path} ({name})")
            click.echo(format_summary(report.simulation))
    sys.exit(status)
