"""`labgang up`'s refusals and its first hint, without starting a coordinator."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from labgang.agent.inventory import read_inventory
from labgang.agent.nvml import open_backend
from labgang.launcher.api.client import STARTING_MARKER
from labgang.launcher.cli.main import cli
from labgang.launcher.cli.up import try_hint


@pytest.mark.parametrize(
    "machine, shape",
    [
        ("h100x8.toml", "-n 4 -g 2"),
        ("rtx4090x2.toml", "-n 2 -g 1"),
        ("a100x8-mig.toml", "-n 3 -g 1"),
        ("n1-4gpu.toml", "-n 4 -g 1"),
    ],
)
def test_the_hint_fits_the_machine(repo_root, machine, shape):
    backend = open_backend(repo_root / "config" / "sim" / machine)
    try:
        hint = try_hint(read_inventory(backend))
    finally:
        backend.nvmlShutdown()
    assert hint == f"labgang run {shape} -- python examples/ddp_allreduce.py"


def test_simulate_and_nvml_exclude_each_other(tmp_path, repo_root):
    result = CliRunner().invoke(
        cli, ["up", "--nvml", "--simulate", str(repo_root / "config/sim/h100x8.toml"), "--state-dir", str(tmp_path)]
    )
    assert result.exit_code == 2 and "--simulate and --nvml exclude each other" in result.output


def test_missing_machine_file_is_a_usage_error_and_leaves_no_marker(tmp_path):
    result = CliRunner().invoke(cli, ["up", "--simulate", str(tmp_path / "nope.toml"), "--state-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert result.output == f"labgang up: --simulate: file '{tmp_path / 'nope.toml'}' does not exist\n"
    assert not (tmp_path / STARTING_MARKER).exists()


def test_a_failed_up_removes_the_state_dir_it_created(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("this is = not a machine\n")
    state = tmp_path / "new" / "state"
    result = CliRunner().invoke(cli, ["up", "--simulate", str(bad), "--state-dir", str(state)])
    assert result.exit_code == 2, result.output
    assert result.output.startswith("labgang up: --simulate: ")
    assert not (tmp_path / "new").exists()  # every directory it made is gone
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.toml"]


def test_a_failed_up_keeps_a_state_dir_that_was_there(tmp_path):
    (tmp_path / "keep.txt").write_text("mine\n")
    result = CliRunner().invoke(cli, ["up", "--simulate", str(tmp_path / "nope.toml"), "--state-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]


def test_a_bad_config_is_one_line_per_problem_and_leaves_nothing(tmp_path, repo_root):
    bad = tmp_path / "team.toml"
    bad.write_text('[[queues]]\nname = "a"\nnominal = { gpu = -1 }\nwithin_queue = "sometimes"\n')
    state = tmp_path / "state"
    result = CliRunner().invoke(
        cli,
        [
            "up",
            "--config",
            str(bad),
            "--simulate",
            str(repo_root / "config/sim/h100x8.toml"),
            "--state-dir",
            str(state),
        ],
    )
    assert result.exit_code == 2, result.output
    head = f"labgang up: --config: {bad}: "
    assert (
        result.output.splitlines()
        == [  # as `labgang config check` prints them: one line per problem
            head + "queues[0].nominal.gpu: -1 is out of range; allowed: a device count from 0 to 1000000",
            head + "queues[0].within_queue: 'sometimes' is not allowed; allowed: never, lower-priority, "
            "lower-or-newer-equal-priority",
            head + "default_queue: not set, and its default 'default' is not a queue; set default_queue to one of: a",
        ]
    )
    assert not state.exists()


def test_the_workstation_config_is_valid_and_shares_eight_gpus(repo_root):
    from labgang.launcher.config.cluster import load_config

    cfg = load_config(repo_root / "config/workstation.toml")
    assert [q.name for q in cfg.queues] == ["vision", "nlp", "serving"]
    assert sum(q.nominal["gpu"] for q in cfg.queues) == 8 and {q.cohort for q in cfg.queues} == {"lab"}
    assert cfg.pitfall_thresholds().idle_after_s == 30.0


@pytest.mark.parametrize(
    "config_text, shape",
    [
        # vision: nominal 3 + borrowing limit 3 = 6 of the machine's 8 GPUs
        (None, "-n 3 -g 2"),
        # a queue with 2 GPUs and no cohort holds a 2-rank gang of one GPU each
        ('default_queue = "small"\n[[queues]]\nname = "small"\nnominal = { gpu = 2 }\n', "-n 2 -g 1"),
        # a new user's finding: the hint asked for 6 GPUs of a queue that allows 4 per user
        (
            'default_queue = "v"\n[[queues]]\nname = "v"\nnominal = { gpu = 8 }\nmax_gpus_per_user = 4\n',
            "-n 4 -g 1",
        ),
        # the default queue lists no GPU: the hint names the queue that does
        (
            'default_queue = "cpu"\n[[queues]]\nname = "cpu"\nnominal = { "mig-1g.10gb" = 1 }\n'
            '[[queues]]\nname = "train"\nnominal = { gpu = 4 }\n',
            "-q train -n 4 -g 1",
        ),
    ],
)
def test_the_hint_fits_the_default_queue(repo_root, tmp_path, config_text, shape):
    from labgang.launcher.config.cluster import load_config

    if config_text is None:
        path = repo_root / "config" / "workstation.toml"
    else:
        path = tmp_path / "cluster.toml"
        path.write_text(config_text)
    backend = open_backend(repo_root / "config" / "sim" / "h100x8.toml")
    try:
        hint = try_hint(read_inventory(backend), load_config(path))
    finally:
        backend.nvmlShutdown()
    assert hint == f"labgang run {shape} -- python examples/ddp_allreduce.py"


def _spec(queue: str):
    from labgang.launcher.lifecycle.records import JobSpec

    return JobSpec(
        name="j", user="alice", uid=1000, gid=None, queue=queue, priority=0, workers=1, per_worker=1,
        resource="gpu", gpu_model=None, nodes=None, argv=["x"], env={}, cwd="/tmp", grace_s=7.0, time_limit_s=None,
        requeue=True, signal=None,
    )  # fmt: skip


def test_the_banner_names_jobs_waiting_in_queues_the_config_does_not_define(repo_root, tmp_path):
    """Jobs requeued in queue `default` by a plain `labgang up`, then `labgang up --config
    config/workstation.toml` (no queue `default`): they would wait forever, so the banner says so."""
    from labgang.agent import paths
    from labgang.launcher.cli.up import stored_job_counts, stranded_line
    from labgang.launcher.config.cluster import load_config
    from labgang.launcher.coordinator.store import Store
    from labgang.launcher.lifecycle.records import JobStatus
    from labgang.launcher.model import JobState

    config = load_config(repo_root / "config" / "workstation.toml")
    assert stored_job_counts(tmp_path) == {}  # a fresh state directory: no store yet, none made
    assert not paths.db_path(tmp_path).exists()
    store = Store(paths.db_path(tmp_path))
    store.insert_job(_spec("default"), JobStatus(submit_time=1.0))
    store.insert_job(_spec("default"), JobStatus(submit_time=2.0))
    store.insert_job(_spec("vision"), JobStatus(submit_time=3.0))  # a queue of this config: fine
    done = JobStatus(submit_time=4.0)
    done.state = JobState.SUCCEEDED
    store.insert_job(_spec("old"), done)  # finished: nothing waits
    store.close()
    line = stranded_line(stored_job_counts(tmp_path), config)
    assert line == (
        "  warning: 2 jobs wait in queues this config does not define: default (2); "
        "cancel them (`labgang cancel JOB`), move them to a queue it defines (`labgang update JOB "
        "Partition=QUEUE`), or run `labgang up` with a config that defines that queue"
    )
    assert stranded_line({("vision", "pending"): 3, ("old", "failed"): 1}, config) is None
    # a job of a removed queue left running (--keep-jobs) does not wait: it runs to its end
    assert stranded_line({("speech", "running"): 1}, config) == (
        "  warning: 1 job runs in queues this config does not define: speech (1); it runs to the end, and the "
        "devices it holds count in no queue's quota"
    )


def test_the_checkouts_banner_runs_the_example_from_the_checkout_as_before():
    """An editable install (this checkout): the README's ``python examples/ddp_allreduce.py``, unchanged."""
    from labgang.launcher.cli.up import example_command

    assert example_command() == ("python examples/ddp_allreduce.py", None)


def test_the_simulated_machine_up_suggests_from_another_directory_is_the_checkouts_absolute_path(tmp_path, monkeypatch):
    """A shared editable install used from another directory (the second new user, as alice in /tmp):
    the checkout's absolute path, which exists wherever the command is typed."""
    from labgang.launcher.cli.up import SIM_MACHINE, shipped_path

    monkeypatch.chdir(tmp_path)
    found = shipped_path(SIM_MACHINE)
    assert found is not None and Path(found).is_absolute() and Path(found).is_file(), found
    assert found.endswith("/" + SIM_MACHINE)


def test_the_simulated_machine_up_suggests_is_the_checkouts_or_the_installs_copy(tmp_path):
    """A checkout names ``config/sim/h100x8.toml`` as the README does; a venv install (no checkout
    above the package) names the copy under its ``share/labgang/``, which exists there, not a
    checkout-relative path (the new user's refusal suggested one their venv did not have)."""
    from labgang.launcher.cli.up import SIM_MACHINE, shipped_path

    assert shipped_path(SIM_MACHINE) == "config/sim/h100x8.toml"  # this checkout
    venv, site = tmp_path / "venv", tmp_path / "venv" / "lib" / "site-packages"
    site.mkdir(parents=True)
    assert shipped_path(SIM_MACHINE, checkout=site, data=venv) is None  # neither has it
    copy = venv / "share" / "labgang" / SIM_MACHINE
    copy.parent.mkdir(parents=True)
    copy.write_text("")
    assert shipped_path(SIM_MACHINE, checkout=site, data=venv) == str(copy)


def test_the_banner_names_each_drained_node(tmp_path):
    """A new user's finding: after a restart with the node still drained, the banner said nothing of
    it and suggested a `labgang run` that would wait. The drain is read from the store."""
    import asyncio

    from labgang.launcher.cli.up import drained_lines
    from labgang.launcher.coordinator.drains import NodeDrains
    from labgang.launcher.coordinator.store import Store

    assert drained_lines(tmp_path) == []  # no store yet
    store = Store(tmp_path / "labgang.db")
    asyncio.run(NodeDrains(store, lambda: None).drain("vm", "PSU swap", "root", 1.0))
    store.close()
    assert drained_lines(tmp_path) == [
        "  warning: node vm is drained (by root: PSU swap): no new job starts there until `labgang resume vm`"
    ]
