"""Suggestions for mistyped commands and options: close ones only, and Slurm's options answered
with what labgang uses instead (launcher/cli/suggest.py)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from labgang.launcher.cli.main import cli
from labgang.launcher.cli.suggest import closest, distance, option_hint


def _line(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), prog_name="labgang")
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    return lines[0]


@pytest.mark.parametrize(
    ("a", "b", "d"),
    [("sbumit", "submit", 1), ("submit", "submit", 0), ("--mem", "--mig", 2), ("gres", "grace", 3), ("", "ab", 2)],
)
def test_distance_counts_a_swap_once(a, b, d):
    assert distance(a, b) == d


@pytest.mark.parametrize(
    ("typed", "said"),
    [
        ("sbumit", "labgang: no such command 'sbumit' (did you mean submit?); see `labgang --help`"),
        ("queu", "labgang: no such command 'queu' (did you mean queue?); see `labgang --help`"),
        ("bogus", "labgang: no such command 'bogus'; see `labgang --help`"),  # two from logs: too far
        ("frobnicate", "labgang: no such command 'frobnicate'; see `labgang --help`"),
        # a new user's finding: Slurm's names got a hint only when the spelling was near (squeue, srun)
        ("sinfo", "labgang: no such command 'sinfo' (Slurm's sinfo is labgang nodes); see `labgang --help`"),
        ("sacct", "labgang: no such command 'sacct' (Slurm's sacct is labgang history); see `labgang --help`"),
        ("squeue", "labgang: no such command 'squeue' (Slurm's squeue is labgang queue); see `labgang --help`"),
    ],
)
def test_a_mistyped_command_gets_the_close_one_or_none(typed, said):
    assert _line(typed) == said


@pytest.mark.parametrize(
    ("option", "fragment"),
    [
        ("--mem-per-cpu", "Slurm's host memory per CPU; labgang counts host memory per node (--mem SIZE)"),
        ("--gres", "for --gres=gpu:N use -g N (full GPUs per rank)"),
        ("--grce", "did you mean --grace?"),
        ("--wokers", "did you mean --workers?"),
        ("--dependncy", "did you mean --dependency?"),
        ("--job-nmae", "did you mean --job-name?"),
    ],
)
def test_submit_options_get_a_slurm_note_or_a_close_spelling(option, fragment):
    line = _line("submit", option, "1", "--", "true")
    assert line.startswith(f"labgang submit: no such option '{option}' (")
    assert fragment in line


@pytest.mark.parametrize("option", ["--mem-per-cpu", "--mem-per-node", "--gres", "--bogus-thing", "-C"])
def test_never_a_misleading_guess(option):
    line = _line("submit", option, "1", "--", "true")
    for wrong in ("--gpus-per-worker?", "--gpus-per-task?", "--mig?", "--grace?", "--name?", "--nodes?"):
        assert wrong not in line


def test_slurm_notes_only_for_submit_and_run():
    assert option_hint("--mem-per-cpu", ["-u", "--user"], slurm=False) is None
    assert "per CPU" in (option_hint("--mem-per-cpu", ["-n"], slurm=True) or "")
    line = _line("queue", "--mem-per-cpu")
    assert "per CPU" not in line


def test_closest_keeps_short_and_long_options_apart_and_bounds_the_distance():
    assert closest("-x", ["--x", "-n"]) == []
    assert closest("--nodse", ["--nodes", "--name"]) == ["--nodes"]
    assert closest("--mem", ["--mig", "--name", "--time"]) == []
    assert closest("--tiem", ["--time", "--name"]) == ["--time"]


def test_every_slurm_command_named_is_answered_with_labgang_commands_that_exist():
    from labgang.launcher.cli.commands import COMMANDS
    from labgang.launcher.cli.suggest import SLURM_COMMANDS

    for slurm, ours in SLURM_COMMANDS.items():
        named = [word.strip(",") for word in ours.split() if word.strip(",") in COMMANDS]
        assert named and slurm not in COMMANDS, (slurm, ours)
