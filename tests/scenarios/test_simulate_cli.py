"""``labgang simulate``: exit statuses, readable diffs, strict validation, --trace, summaries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from labgang.launcher.cli.simulate import simulate
from labgang.launcher.simulate import ScenarioError, load_scenario

BASE = """
[scenario]
name = "t"
[[nodes]]
name = "n1"
gpus = 2
[[queues]]
name = "q"
nominal = { gpu = 2 }
[[jobs]]
id = "a"
queue = "q"
gpus_per_worker = 2
duration = 5.0
[[jobs]]
id = "b"
queue = "q"
gpus_per_worker = 1
submit = 1.0
duration = 5.0
"""


def write(tmp_path: Path, text: str, name: str = "s.toml") -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def run(*args: str):
    return CliRunner().invoke(simulate, list(args))


def test_passing_file_exits_0(tmp_path):
    f = write(
        tmp_path,
        BASE + '[[expect]]\nat = 1.0\nrunning = ["a"]\npending = ["b"]\n'
        '[[expect]]\nrunning = []\nfinished = ["a", "b"]\n',
    )
    res = run(f)
    assert res.exit_code == 0, res.output
    assert "PASS" in res.output and "2 expectations" in res.output


def test_failing_expectation_exits_1_with_a_diff(tmp_path):
    f = write(tmp_path, BASE + '[[expect]]\nat = 1.0\nrunning = ["a", "b"]\n')
    res = run(f)
    assert res.exit_code == 1
    assert "expect[0] at t=1: running: expected [a, b], got [a] (missing [b])" in res.output


def test_invariant_violation_exits_1(tmp_path):
    f = write(tmp_path, BASE + '[[invariant]]\nmax_usage = { queue = "q", gpu = 1 }\n')
    res = run(f)
    assert res.exit_code == 1
    assert "invariant max_usage: q uses 2 gpu, limit 1" in res.output


@pytest.mark.parametrize(
    "extra,needle",
    [
        pytest.param(
            '[[jobs]]\nid = "c"\nqueue = "q"\ngpu_per_worker = 1\n', "unknown key 'gpu_per_worker'", id="job-key"
        ),
        pytest.param('[[expect]]\nat = 1.0\nrunnning = ["a"]\n', "unknown key 'runnning'", id="expect-key"),
        pytest.param("[extra]\nx = 1\n", "unknown key 'extra'", id="top-level-table"),
        pytest.param('[[jobs]]\nid = "c"\nqueue = "nope"\n', "unknown queue 'nope'; allowed: q", id="dangling-queue"),
        pytest.param(
            '[[jobs]]\nid = "c"\nqueue = "q"\npriority = "vip"\n', "unknown priority class 'vip'", id="priority"
        ),
        pytest.param('[[jobs]]\nid = "c"\nqueue = "q"\nmig = "big"\n', "is not a MIG profile", id="mig-profile"),
        pytest.param('[[expect]]\nrunning = ["zz"]\n', "unknown job 'zz'", id="expect-job"),
    ],
)
def test_malformed_file_exits_2_naming_the_key(tmp_path, extra, needle):
    res = run(write(tmp_path, BASE + extra))
    assert res.exit_code == 2
    assert needle in res.output


def test_a_bad_value_is_one_line_naming_the_file_and_key(tmp_path):
    f = write(tmp_path, BASE.replace("gpus = 2", "gpus = 99999999999"))
    res = run(f)
    assert res.exit_code == 2
    assert res.output.splitlines() == [f"ERROR {f}: nodes[0] ('n1').gpus: must be 1..1024, got 99999999999"]


def test_bad_enum_value_lists_the_allowed_values(tmp_path):
    res = run(write(tmp_path, BASE.replace("nominal = { gpu = 2 }", 'nominal = { gpu = 2 }\nqueueing = "lifo"')))
    assert res.exit_code == 2
    assert "queues[0] ('q').queueing" in res.output and "'strict-fifo'" in res.output


@pytest.mark.parametrize(
    "meta,needle",
    [
        pytest.param('requires = ["topology_aware"]', "scenario.requires", id="unknown-feature"),
        pytest.param('fair_preemption = ["less-than-initial-share"]', "only allowed with fair_sharing", id="fp-alone"),
        pytest.param(
            'fair_sharing = true\nfair_preemption = ["less-than-initial-share", "less-than-or-equal-to-final-share"]',
            "is not allowed; allowed:",
            id="fp-wrong-order",
        ),
        pytest.param("admission_fair_sharing = { half_life = 0.0 }", "half_life", id="afs-half-life-zero"),
    ],
)
def test_bad_sharing_settings_exit_2(tmp_path, meta, needle):
    res = run(write(tmp_path, BASE.replace('name = "t"', f'name = "t"\n{meta}', 1)))
    assert res.exit_code == 2
    assert needle in res.output


@pytest.mark.parametrize(
    "extra,needle",
    [
        pytest.param(
            '[[cohorts]]\nname = "x"\nparent = "y"\n[[cohorts]]\nname = "y"\nparent = "x"\n', "cycle", id="cycle"
        ),
        pytest.param('[[cohorts]]\nname = "x"\nborrowing_limit = { gpu = 1 }\n', "with a parent", id="root-limit"),
        pytest.param('[[cohorts]]\nname = "x"\nweight = 2.0\n', "unknown key 'weight'", id="unknown-key"),
        pytest.param('[[tenants]]\nname = "u"\nqueue = "q"\n', "admission_fair_sharing", id="tenant-without-afs"),
    ],
)
def test_bad_cohort_tree_exits_2(tmp_path, extra, needle):
    res = run(write(tmp_path, BASE + extra))
    assert res.exit_code == 2
    assert needle in res.output


def test_not_toml_exits_2(tmp_path):
    res = run(write(tmp_path, "[scenario\n"))
    assert res.exit_code == 2 and "not valid TOML" in res.output


def test_trace_prints_json_lines(tmp_path):
    res = CliRunner().invoke(simulate, ["--trace", write(tmp_path, BASE + "[[expect]]\nrunning = []\n")])
    assert res.exit_code == 0
    events = [json.loads(line) for line in res.stdout.splitlines()]
    kinds = [e["event"] for e in events]
    assert kinds[:2] == ["submit", "admit"] and "finish" in kinds and kinds[-1] == "expect"
    admit = next(e for e in events if e["event"] == "admit")
    assert admit["placement"] == [{"rank": 0, "node": "n1", "devices": ["GPU-n1-0", "GPU-n1-1"]}]


def test_plain_job_list_prints_waits_and_utilization(tmp_path):
    res = run(write(tmp_path, BASE))
    assert res.exit_code == 0
    out = res.output
    assert "QUEUE" in out and "WAIT MEAN" in out
    # b waits from 1 to 5: mean wait over a (0) and b (4) is 2.0
    line = next(ln for ln in out.splitlines() if ln.startswith("q "))
    assert line.split()[1:6] == ["2", "2", "2", "0", "2.0"]
    # 2 GPUs x 5 s + 1 GPU x 5 s over 2 GPUs x 10 s = 75 %
    assert "utilization gpu: 75.0%" in out


def test_several_files_worst_status_wins(tmp_path):
    good = write(tmp_path, BASE + "[[expect]]\nrunning = []\n", "good.toml")
    bad = write(tmp_path, BASE + "oops = 1\n", "bad.toml")
    res = run(good, bad)
    assert res.exit_code == 2 and "PASS" in res.output


def test_load_scenario_error_lists_every_problem(tmp_path):
    with pytest.raises(ScenarioError) as info:
        load_scenario(write(tmp_path, BASE + '[[jobs]]\nid = "a"\nqueue = "x"\n'))
    text = "\n".join(info.value.problems)
    assert "duplicate name 'a'" in text and "unknown queue 'x'" in text


PREEMPT = """
[scenario]
name = "p"
[[nodes]]
name = "n1"
gpus = 1
[[queues]]
name = "q"
nominal = { gpu = 1 }
within_queue = "lower-priority"
[[jobs]]
id = "low"
queue = "q"
priority = 0
[[jobs]]
id = "high"
queue = "q"
priority = 5
submit = 1.0
"""


@pytest.mark.parametrize(
    "expect,code,needle",
    [
        pytest.param('preempted = ["low"]\nnot_preempted = ["high"]', 0, "PASS", id="holds"),
        pytest.param(
            'preempted = ["high"]',
            1,
            "preempted: [high] were never preempted (preempted so far: [low])",
            id="preempted-missing",
        ),
        pytest.param('not_preempted = ["low"]', 1, "not_preempted: [low] were preempted", id="not-preempted"),
    ],
)
def test_preemption_expectations(tmp_path, expect, code, needle):
    res = run(write(tmp_path, PREEMPT + f"[[expect]]\nat = 1.0\n{expect}\n"))
    assert res.exit_code == code
    assert needle in res.output


def test_same_trace_under_different_hash_seeds(scenario_dir: Path, tmp_path):
    """No dependence on set/dict iteration order: string hashing differs per seed."""
    import os
    import subprocess
    import sys

    files = [
        str(scenario_dir / "seed-borrow-and-reclaim.toml"),
        str(scenario_dir / "design-mig.toml"),
        str(Path(__file__).parent / "cases" / "preemptor-reservation-blocks-others.toml"),
    ]
    outputs = []
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        proc = subprocess.run(
            [sys.executable, "-m", "labgang.launcher", "simulate", "--trace", *files],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        outputs.append(proc.stdout)
    assert outputs[0] and outputs[0] == outputs[1] == outputs[2]


def test_help_points_to_the_format_document_shipped_in_the_repo(repo_root):
    res = run("--help")
    assert res.exit_code == 0
    assert "docs/scenarios.md" in res.output
    assert "FORMAT.md" not in res.output
    assert (repo_root / "docs" / "scenarios.md").is_file()


def test_format_document_names_every_key_and_value_the_parser_accepts(repo_root):
    from labgang.launcher.config.queues import AdmissionFairSharingModel, CohortModel, TenantModel
    from labgang.launcher.model import BorrowPolicy, FairPreemption, Queueing, ReclaimWithinCohort, WithinQueue
    from labgang.launcher.simulate.node_events import NodeEventModel
    from labgang.launcher.simulate.scenario import (
        BorrowWithinCohortModel,
        ExpectModel,
        InvariantModel,
        JobModel,
        NodeModel,
        QueueModel,
        ScenarioFile,
        ScenarioMeta,
    )

    doc = (repo_root / "docs" / "scenarios.md").read_text()
    for model in (
        ScenarioFile,
        ScenarioMeta,
        NodeModel,
        QueueModel,
        BorrowWithinCohortModel,
        JobModel,
        ExpectModel,
        InvariantModel,
        CohortModel,
        TenantModel,
        AdmissionFairSharingModel,
        NodeEventModel,
    ):
        for key in model.model_fields:
            assert f"`{key}`" in doc or f"[{key}]" in doc or f"[[{key}]]" in doc, f"{model.__name__}.{key}"
    for enum in (WithinQueue, ReclaimWithinCohort, BorrowPolicy, Queueing, FairPreemption):
        for member in enum:
            assert f"`{member.value}`" in doc, member


def test_the_format_documents_example_passes(repo_root, tmp_path):
    doc = (repo_root / "docs" / "scenarios.md").read_text()
    example = doc.split("```toml\n", 1)[1].split("```", 1)[0]
    res = run(write(tmp_path, example))
    assert res.exit_code == 0, res.output
    assert "PASS" in res.output


def test_missing_file_says_so_and_exits_2(tmp_path):
    res = run(str(tmp_path / "nope.toml"))
    assert res.exit_code == 2
    assert "nope.toml" in res.output and "does not exist" in res.output
    assert "malformed" not in res.output


ONE = """
[scenario]
name = "one"
[[nodes]]
name = "n1"
gpus = 1
[[queues]]
name = "q"
nominal = { gpu = 1 }
[[jobs]]
id = "a"
queue = "q"
duration = 5.0
[[expect]]
finished = ["a"]
[[invariant]]
no_partial_gangs = true
"""


def test_counts_of_one_are_singular(tmp_path):
    res = run("--summary", write(tmp_path, ONE))
    assert res.exit_code == 0, res.output
    assert "1 expectation, 1 invariant" in res.output
    assert "1 job," in res.output
    for wrong in ("1 expectations", "1 invariants", "1 jobs"):
        assert wrong not in res.output


def test_counts_other_than_one_are_plural(tmp_path):
    text = ONE.replace(
        '[[expect]]\nfinished = ["a"]\n', '[[expect]]\nfinished = ["a"]\n[[expect]]\nat = 1.0\nrunning = ["a"]\n'
    )
    res = run("--summary", write(tmp_path, text.replace("[[invariant]]\nno_partial_gangs = true\n", "")))
    assert res.exit_code == 0, res.output
    assert "2 expectations, 0 invariants" in res.output


def test_partial_gang_message_counts_one_device_in_the_singular(tmp_path):
    from labgang.launcher.scheduler.snapshot import RankPlacement
    from labgang.launcher.simulate import Simulation
    from labgang.launcher.simulate.checks import partial_gangs

    sim = Simulation(load_scenario(write(tmp_path, ONE)))
    sim.run_instant()
    job = sim.jobs["a"]
    assert job.state == "running" and partial_gangs(sim) == []
    job.placement = (RankPlacement(0, "n1", ()),)  # a rank that lost its device
    assert partial_gangs(sim) == ["no_partial_gangs: a rank 0 got 0 of 1 device"]


def test_lending_limit_above_nominal_is_malformed(tmp_path):
    """As in cluster.toml (and Kueue): a queue lends at most its nominal quota."""
    text = BASE.replace("nominal = { gpu = 2 }", 'nominal = { gpu = 2 }\ncohort = "lab"\nlending_limit = { gpu = 3 }')
    res = run(write(tmp_path, text))
    assert res.exit_code == 2, res.output
    assert "queues[0] ('q').lending_limit.gpu: 3 is above the nominal quota (2); allowed: 0..2" in res.output


TWO_TEAMS = """
[scenario]
name = "two-teams"
[[nodes]]
name = "box"
gpus = 4
[[queues]]
name = "team-a"
cohort = "lab"
nominal = { gpu = 2 }
[[queues]]
name = "team-b"
cohort = "lab"
nominal = { gpu = 2 }
reclaim_within_cohort = "any"
[[jobs]]
id = "a-train"
queue = "team-a"
gpus_per_worker = 4
duration = 600
grace = 30
[[jobs]]
id = "b-eval"
queue = "team-b"
gpus_per_worker = 2
submit = 60
duration = 300
"""


def test_wait_after_a_requeue_counts(tmp_path):
    """a-train runs at once, is preempted at 60, stops at 90 (grace) and is readmitted at 390
    when b-eval ends: its wait is 300 s, not 0. b-eval waits 60 -> 90 for the grace."""
    res = run(write(tmp_path, TWO_TEAMS))
    assert res.exit_code == 0, res.output
    rows = {ln.split()[0]: ln.split()[1:] for ln in res.output.splitlines() if ln.startswith("team-")}
    assert rows["team-a"][:7] == ["1", "1", "1", "1", "300.0", "300.0", "300.0"], res.output
    assert rows["team-b"][:7] == ["1", "1", "1", "0", "30.0", "30.0", "30.0"], res.output
    assert "each requeue to readmission" in res.output
