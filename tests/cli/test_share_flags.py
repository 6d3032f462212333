"""``--shards``, ``--mps`` and ``--gpu-mem`` on ``submit``/``run``: the same body from the click command
and the fast path; malformed shares one line naming the flag, exit 2; ``#SBATCH --gres=shard:N``."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from labgang.launcher.cli import job_request, quick, submission
from labgang.launcher.cli.batch_script import _gres
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
        (["--shards", "1"], {"shards": 1}),
        (["--mps", "50", "--gpu-mem", "20G"], {"mps": 50, "gpu_mem": 20 * 1024**3}),
        (["--shards", "2", "--gpu-mem", "512M"], {"shards": 2, "gpu_mem": 512 * 1024**2}),
        ([], {}),
    ],
)
def test_both_paths_send_the_same_share_fields(args, want):
    for command, flags in ((submission.submit, quick._submit_flags()), (submission.run, quick._run_flags())):
        body = _fast([*args, "--", "train"], flags)
        assert body == _click([*args, "--", "train"], command)
        assert {k: body[k] for k in ("shards", "mps", "gpu_mem") if k in body} == want


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--shards", "1", "--mps", "50"], "--shards and --mps exclude each other"),
        (["--shards", "1", "--mig", "1g.10gb"], "--shards and --mig exclude each other"),
        (["--mps", "50", "-n", "2"], "--mps is a share of one GPU for one rank"),
        (["--shards", "1", "-g", "2"], "--shards is a share of one GPU for one rank"),
        (["--gpu-mem", "4G"], "--gpu-mem: a device-memory budget goes with a share of a gpu"),
        (["--shards", "1", "--gpu-mem", "lots"], "--gpu-mem:"),
    ],
)
def test_malformed_shares_are_one_line_naming_the_flag_exit_2(args, line, tmp_path):
    result = CliRunner().invoke(cli, ["submit", "--state-dir", str(tmp_path), *args, "--", "true"], prog_name="labgang")
    assert result.exit_code == 2
    assert any(line in out for out in result.output.splitlines()), result.output
    with pytest.raises(job_request.SubmissionError, match=line.split(":")[0]):
        _fast([*args, "--", "true"])


@pytest.mark.parametrize("flag", ["--shards", "--mps"])
def test_one_rank_one_gpu_message_names_labgangs_own_flags(flag, tmp_path):
    value = "1" if flag == "--shards" else "50"
    args = ["submit", "--state-dir", str(tmp_path), flag, value, "-n", "2", "--", "sleep", "60"]
    result = CliRunner().invoke(cli, args, prog_name="labgang")
    assert result.exit_code == 2
    want = f"{flag} is a share of one GPU for one rank; allowed: -n/--workers 1 and -g/--gpus-per-worker 1"
    assert want in result.output, result.output
    assert "--ntasks" not in result.output and "-N/" not in result.output
    assert not list(tmp_path.rglob("*.json"))


@pytest.mark.parametrize("args", [["--mps", "0"], ["--mps", "101"], ["--shards", "0"]])
def test_out_of_range_values_exit_2(args, tmp_path):
    result = CliRunner().invoke(cli, ["submit", "--state-dir", str(tmp_path), *args, "--", "true"], prog_name="labgang")
    assert result.exit_code == 2
    assert args[0] in result.output


def test_sbatch_gres_shard_and_mps():
    assert _gres("shard:2") == ["--shards", "2"]
    assert _gres("mps:50") == ["--mps", "50"]
    with pytest.raises(ValueError, match="shard:N with a whole number"):
        _gres("shard:x")


def test_explain_says_what_share_a_job_asks_for_and_where_it_runs():
    from labgang.launcher.cli.explain import explain_job

    job = {
        "id": "7",
        "queue": "team",
        "state": "running",
        "workers": 1,
        "gpus_per_worker": 1,
        "shards": 1,
        "gpu_mem": 20 << 30,
        "ranks": [{"rank": 0, "node": "n1", "devices": ["GPU-n1-0"]}],
    }
    lines = explain_job(job, [])
    assert lines[1] == (
        "It asks for a share of one GPU: 1 shard (time-sliced), with a device-memory budget of 20G, 1 x "
        "1/shards_per_gpu gpu (the node's [sharing] shards_per_gpu) of a card. Its queue's quota counts cards, "
        "not parts of them: a card its queue's shares hold alone counts one whole gpu (no other queue can use "
        "the rest of it), and its shares on cards shared with other queues are summed and rounded up."
    )
    assert lines[2].startswith("It runs on card GPU-n1-0 of n1: a share goes to the shared card with the least room")
    pending = {**job, "state": "pending", "shards": 0, "mps": 50, "gpu_mem": 0, "ranks": []}
    pending["reason"] = {"code": "no_capacity", "message": "job needs mps 50% of a gpu (1/2 gpu): ..."}
    lines = explain_job(pending, [])
    assert lines[1].startswith("It asks for a share of one GPU: 50 % of its SMs through MPS, 0.5 gpu of a card. ")
    assert lines[2] == "It waits: job needs mps 50% of a gpu (1/2 gpu): ... (no_capacity)."
    assert explain_job({**job, "shards": 0}, [])[1:] == []


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--shards", "1", "--exclusive"], "--shards and --exclusive exclude each other"),
        (["--mps", "50", "--exclusive"], "--mps and --exclusive exclude each other"),
        (["-g", "1", "--shards", "1", "--", "true", ":", "-n", "1", "-g", "1"], "--shards: not for a job of groups"),
        (["--mps", "30", "--", "true", ":", "-g", "1"], "--mps: not for a job of groups"),
    ],
)
def test_share_with_exclusive_or_groups_is_refused_exit_2(args, line, tmp_path):
    result = CliRunner().invoke(cli, ["submit", "--state-dir", str(tmp_path), *args, "--", "true"], prog_name="labgang")
    assert result.exit_code == 2, result.output
    lines = [out for out in result.output.splitlines() if out.strip()]
    assert len(lines) == 1 and line in lines[0], result.output
