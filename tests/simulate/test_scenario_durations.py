"""Scenario time keys written as durations (``duration = "10m"``; ``launcher/durations.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from labgang.agent import tomlfile
from labgang.launcher.cli.simulate import simulate
from labgang.launcher.simulate import ScenarioError, parse_scenario, run_scenario

DOC = """
[scenario]
name = "durations"
[[nodes]]
name = "n1"
gpus = 1
[[queues]]
name = "q"
nominal = {{ gpu = 1 }}
within_queue = "lower-priority"
[[jobs]]
id = "long"
queue = "q"
duration = {long}
grace = {grace}
[[jobs]]
id = "urgent"
queue = "q"
priority = 5
submit = {submit}
duration = 60
[[expect]]
at = {at}
running = ["urgent"]
pending = ["long"]
"""

WORDS = {"long": '"1h30m"', "grace": '"30s"', "submit": '"10m"', "at": '"10m30s"'}
NUMBERS = {"long": "5400.0", "grace": "30.0", "submit": "600.0", "at": "630.0"}


def parse(values: dict[str, str]):
    return parse_scenario(tomlfile.loads_toml(DOC.format(**values)), "durations.toml")


def test_duration_strings_mean_the_same_seconds_as_numbers() -> None:
    words, numbers = parse(WORDS), parse(NUMBERS)
    assert words.file.jobs == numbers.file.jobs
    assert [j.duration for j in words.file.jobs] == [5400.0, 60.0]
    assert (words.file.jobs[0].grace, words.file.jobs[1].submit, words.file.expect[0].at) == (30.0, 600.0, 630.0)
    # the urgent job preempts at 10m; the victim keeps its GPU for its 30 s grace
    report = run_scenario(words)
    assert report.ok, report.failures
    assert report.checked == 1


@pytest.mark.parametrize(
    ("key", "value", "line"),
    [
        ("long", '"ten minutes"', "jobs[0] ('long').duration: 'ten minutes' is not a duration; allowed: "),
        ("grace", '"-5s"', "jobs[0] ('long').grace: '-5s' is not a duration; allowed: "),
        ("at", '"5m5h"', "expect[0].at: '5m5h' is not a duration; allowed: "),
    ],
)
def test_a_bad_duration_is_one_line_naming_the_key(key: str, value: str, line: str) -> None:
    with pytest.raises(ScenarioError) as info:
        parse({**NUMBERS, key: value})
    [problem] = info.value.problems
    assert problem.startswith(line) and problem.endswith("30s, 5m, 2h, 1d, 1h30m")


def test_simulate_runs_a_file_with_duration_strings(tmp_path: Path) -> None:
    path = tmp_path / "durations.toml"
    path.write_text(DOC.format(**WORDS))
    res = CliRunner().invoke(simulate, [str(path)])
    assert res.exit_code == 0, res.output
    assert res.output.startswith(f"PASS {path} (durations): 1 expectation")
