"""``-c/--cpus-per-task``, ``--mem``, ``--mem-per-gpu`` and ``--exclusive`` on ``submit``/``run``:
the same body from the click command and the fast path; bad values one line naming the flag, exit 2."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from labgang.agent.mem_size import MAX_MEMORY, format_mem, parse_mem, size_text
from labgang.launcher.cli import job_request, quick, submission
from labgang.launcher.cli.main import cli

ENV = {"HOME": "/home/u"}


def _click(args: list[str], command=submission.submit) -> dict[str, object]:
    ctx = command.make_context(command.name, list(args))
    params = dict(ctx.params)
    for key in ("state_dir", "as_json", "all_ranks", "quiet"):
        params.pop(key, None)
    return submission.build_submission(**params, env=ENV, cwd="/work")


def _fast(args: list[str], flags=None) -> dict[str, object]:
    options, argv = quick._parse_submission(args, flags or quick._submit_flags())
    for key in ("state_dir", "as_json", "all_ranks", "quiet"):
        options.pop(key, None)
    return job_request.build_submission(argv=argv, **options, env=ENV, cwd="/work")


@pytest.mark.parametrize(
    ("args", "want"),
    [
        (["-c", "8"], {"cpus_per_task": 8}),
        (["--cpus-per-task", "2", "--mem", "16G"], {"cpus_per_task": 2, "mem": 16 * 1024**3}),
        (["--mem-per-gpu", "8000"], {"mem_per_gpu": 8000 * 1024**2}),
        (["--mem", "1TiB", "--exclusive"], {"mem": 1024**4, "exclusive": True}),
        ([], {}),
    ],
)
def test_both_paths_send_the_same_host_fields(args, want):
    for command, flags in ((submission.submit, quick._submit_flags()), (submission.run, quick._run_flags())):
        body = _fast([*args, "--", "train"], flags)
        assert body == _click([*args, "--", "train"], command)
        assert {k: body[k] for k in ("cpus_per_task", "mem", "mem_per_gpu", "exclusive") if k in body} == want


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["-c", "0"], "-c"),
        (["--cpus-per-task", "many"], "--cpus-per-task"),
        (["--mem", "lots"], "--mem"),
        (["--mem", "0"], "--mem"),
        (["--mem-per-gpu", "4X"], "--mem-per-gpu"),
        (["--mem", "4G", "--mem-per-gpu", "1G"], "--mem-per-gpu"),
        (["--mem", "99999999T"], "--mem"),  # past any machine: said here, in sizes, not in bytes by the API
    ],
)
def test_bad_values_are_one_line_naming_the_flag_exit_2(args, flag, tmp_path):
    result = CliRunner().invoke(cli, ["submit", "--state-dir", str(tmp_path), *args, "--", "true"], prog_name="labgang")
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.startswith("Error:") or flag in line]
    assert any(flag in line for line in lines), result.output
    with pytest.raises((quick.NotFast, job_request.SubmissionError)):
        _fast([*args, "--", "true"])


@pytest.mark.parametrize(
    ("text", "size"),
    [("16G", 16 * 1024**3), ("8000", 8000 * 1024**2), ("512k", 512 * 1024), ("2 GB", 2 * 1024**3), ("3T", 3 * 1024**4)],
)
def test_sizes_read_as_slurm_reads_them(text, size):
    assert parse_mem(text) == size


@pytest.mark.parametrize("text", ["", "G", "1.5G", "-1G", "1Q", "1B", "0", "1048577T"])
def test_bad_sizes_say_what_is_allowed(text):
    with pytest.raises(ValueError, match="allowed: a whole number"):
        parse_mem(text)


def test_the_largest_size_is_the_apis():
    assert parse_mem("1048576T") == MAX_MEMORY == 2**60
    with pytest.raises(ValueError, match=r"^'99999999T' is over 1048576T, the most labgang takes; allowed: "):
        parse_mem("99999999T")


def test_format_mem_is_exact():
    assert [format_mem(n) for n in (16 * 1024**3, 1536 * 1024**2, 100, 0)] == ["16G", "1536M", "100B", "0B"]


def test_size_text_writes_mib_under_a_gib_and_gib_from_one():
    mib, gib = 1024**2, 1024**3
    sizes = (0, 16 * mib, 512 * mib, 1023 * mib, gib, 1536 * mib, 80 * gib)
    assert [size_text(n) for n in sizes] == ["0 MiB", "16 MiB", "512 MiB", "1023 MiB", "1.0 GiB", "1.5 GiB", "80.0 GiB"]
    assert [size_text(n, short=True) for n in sizes] == ["0M", "16M", "512M", "1023M", "1.0G", "1.5G", "80.0G"]
