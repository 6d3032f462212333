"""``labgang coordinator`` and ``labgang agent`` refuse a bad ``--config`` as ``labgang up`` does: one
line on stderr naming the command, the file, the key and the allowed values, exit status 2, and no
state directory made. Real processes (``python -m labgang.launcher``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BAD_TOML = "[[queues]]\nname = \n"
WITHIN = (
    "queues[0].within_queue: 'sometimes' is not allowed; allowed: never, lower-priority, lower-or-newer-equal-priority"
)
RECLAIM = "queues[0].reclaim_within_cohort: 'x' is not allowed; allowed: never, lower-priority, any"
QUEUE = '[[queues]]\nname = "default"\nnominal = { gpu = 4 }\n'
AGENT = 'node = "n1"\ncoordinator = "http://127.0.0.1:1"\n'


def launch(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "labgang.launcher", *args, "--state-dir", str(tmp_path / "state")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def one_line(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert out.stdout == ""
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (QUEUE + 'within_queue = "sometimes"\n', WITHIN),
        (QUEUE + 'within_queue = "sometimes"\nreclaim_within_cohort = "x"\n', f"{WITHIN}; {RECLAIM}"),
        ('[[queues]]\nname = "default"\nnominal = { gpu = "4" }\n', None),
    ],
    ids=["bad-value", "two-bad-values", "quoted-count"],
)
def test_coordinator_names_the_file_and_every_bad_key_on_one_line(tmp_path: Path, text: str, problem: str) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text(text)
    line = one_line(launch(tmp_path, "coordinator", "--config", str(cfg)))
    head = f"labgang coordinator: --config: {cfg}: "
    if problem is not None:
        assert line == head + problem
    else:  # a count given as a string: the key and what is allowed
        assert line.startswith(head + "queues[0].nominal.gpu: ") and "allowed" in line, line
    assert not (tmp_path / "state").exists()  # refused before anything was made


def test_coordinator_with_bad_toml_syntax_says_one_line(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text(BAD_TOML)
    line = one_line(launch(tmp_path, "coordinator", "--config", str(cfg)))
    assert line.startswith(f"labgang coordinator: --config: {cfg}: not valid TOML: "), line
    assert "(at line 2, column 8)" in line
    assert not (tmp_path / "state").exists()


def test_coordinator_with_a_missing_config_says_one_line(tmp_path: Path) -> None:
    cfg = tmp_path / "nope.toml"
    assert one_line(launch(tmp_path, "coordinator", "--config", str(cfg))) == (
        f"labgang coordinator: --config: {cfg}: no such file; pass --config FILE (e.g. config/cluster.toml)"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (AGENT + 'interval_s = "fast"\n', "interval_s: 'fast' is not allowed; allowed: a number of seconds"),
        (
            AGENT + 'interval_s = "fast"\nsample_s = true\n',
            "interval_s: 'fast' is not allowed; allowed: a number of seconds; "
            "sample_s: true is not allowed; allowed: a number of seconds",
        ),
        ("node = \n", "not valid TOML: "),
    ],
    ids=["bad-value", "two-bad-values", "bad-toml-syntax"],
)
def test_agent_names_the_file_and_every_bad_key_on_one_line(tmp_path: Path, text: str, expected: str) -> None:
    cfg = tmp_path / "agent.toml"
    cfg.write_text(text)
    line = one_line(launch(tmp_path, "agent", "--config", str(cfg)))
    assert line.startswith(f"labgang agent: --config: {cfg}: {expected}"), line
    assert not (tmp_path / "state").exists()


def test_agent_without_a_token_file_names_its_config_and_the_key(tmp_path: Path, repo_root: Path) -> None:
    """token_file is checked once the agent starts (it is optional in the schema for `labgang up`)."""
    cfg = tmp_path / "agent.toml"
    cfg.write_text(AGENT)
    out = launch(tmp_path, "agent", "--config", str(cfg), "--simulate", str(repo_root / "config/sim/n1-4gpu.toml"))
    assert one_line(out) == (
        f"labgang agent: --config: {cfg}: token_file: the agent needs the cluster token file to join a coordinator"
    )
