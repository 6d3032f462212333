"""``labgang simulate --trace``: each line is dated at the instant it tells of (docs/scenarios.md)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from labgang.launcher.cli.simulate import simulate

SCENARIO = """
[scenario]
name = "expect-dates"

[[nodes]]
name = "n1"
gpus = 2

[[queues]]
name = "q"
nominal = { gpu = 2 }

[[jobs]]
id = "a"
queue = "q"
duration = 10

[[jobs]]
id = "b"
queue = "q"
submit = 20
duration = 1

[[expect]]
at = 5
running = ["a"]

[[expect]]
at = 15
finished = ["a"]

[[expect]]
finished = ["a", "b"]
"""


def test_an_expect_line_is_dated_at_the_instant_it_is_checked(tmp_path: Path) -> None:
    """Nothing happens between t=0 and t=10, yet the expectation at 5 is checked at 5 (not at 0,
    the last event's instant), the one at 15 at 15, and the final one at the last instant (21)."""
    case = tmp_path / "expect-dates.toml"
    case.write_text(SCENARIO)
    res = CliRunner().invoke(simulate, ["--trace", str(case)])
    assert res.exit_code == 0, res.output
    lines = [json.loads(line) for line in res.stdout.splitlines()]
    expects = [(e["index"], e["t"], e["ok"]) for e in lines if e["event"] == "expect"]
    assert expects == [(0, 5.0, True), (1, 15.0, True), (2, 21.0, True)]
