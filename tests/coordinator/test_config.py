"""cluster.toml validation: key paths and allowed values in every error; `labgang config check`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from labgang.agent.inventory import read_inventory
from labgang.agent.nvml import open_backend
from labgang.launcher.config.cluster import ClusterConfig, ConfigError, load_config, parse_config
from labgang.launcher.model import ReclaimWithinCohort


def test_the_example_config_is_valid(repo_root: Path) -> None:
    cfg = load_config(repo_root / "config" / "cluster.toml")
    specs = {q.name: q for q in cfg.queue_specs()}
    assert specs["team-a"].reclaim_within_cohort is ReclaimWithinCohort.ANY
    assert specs["inference"].nominal == {"mig-1g.10gb": 14}
    assert cfg.resolve_priority("serving") == 1000


@pytest.mark.parametrize(
    "data, expected",
    [
        (
            {"queues": [{"name": "a", "within_queue": "sometimes"}], "default_queue": "a"},
            "queues[0].within_queue: 'sometimes' is not allowed; allowed: never, lower-priority, "
            "lower-or-newer-equal-priority",
        ),
        (
            {"queues": [{"name": "a", "nominal": {"gpus": 2}}], "default_queue": "a"},
            "queues[0].nominal.gpus: unknown resource 'gpus'; allowed: 'gpu' or 'mig-<profile>'",
        ),
        ({"queues": [{"name": "a"}]}, "default_queue: not set, and its default 'default' is not a queue"),
        ({"queues": [{"name": "default", "colour": "red"}]}, "queues[0].colour: unknown key; allowed keys:"),
        (
            {"queues": [{"name": "default", "cohort": "x"}], "cohorts": [{"name": "lab"}]},
            "queues[0].cohort: 'x' is not declared in [[cohorts]]; allowed: lab",
        ),
        (
            {"queues": [{"name": "default", "borrow_within_cohort": {"policy": "always"}}]},
            "queues[0].borrow_within_cohort.policy: 'always' is not allowed; allowed: never, lower-priority",
        ),
        ({"queues": []}, "queues: is empty; allowed: at least 1 entry"),
    ],
    ids=["enum", "resource", "default-queue", "unknown-key", "undeclared-cohort", "nested-enum", "no-queues"],
)
def test_errors_name_the_key_path_and_allowed_values(data: dict, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    assert any(p.startswith(expected) for p in info.value.problems), info.value.problems


def test_unknown_priority_class_lists_the_classes() -> None:
    cfg = parse_config({"priority_classes": {"high": 10}, "queues": [{"name": "default"}]})
    with pytest.raises(ValueError, match=r"^unknown priority class 'urgent'; allowed: an integer or one of high$"):
        cfg.resolve_priority("urgent")


def test_a_priority_class_is_a_priority_a_job_can_have() -> None:
    """A class beyond a job's 32-bit priority was accepted, and every ``-p high`` then refused the
    user's -p for the admin's config (a new admin's finding)."""
    with pytest.raises(ConfigError) as info:
        parse_config({"priority_classes": {"high": 10**20, "low": -(2**31) - 1}, "queues": [{"name": "default"}]})
    assert info.value.problems == [
        "priority_classes.high: 100000000000000000000 is out of range; allowed: a value <= 2147483647",
        "priority_classes.low: -2147483649 is out of range; allowed: a value >= -2147483648",
    ]
    edge = parse_config({"priority_classes": {"top": 2**31 - 1, "bottom": -(2**31)}, "queues": [{"name": "default"}]})
    assert edge.priority_classes == {"top": 2**31 - 1, "bottom": -(2**31)}


def test_default_for_covers_every_allocatable_device(repo_root: Path, sim_scope: str) -> None:
    backend = open_backend(repo_root / "config" / "sim" / "a100x8-mig.toml", scope=sim_scope)
    try:
        inventory = read_inventory(backend)
    finally:
        backend.nvmlShutdown()
    cfg = ClusterConfig.default_for(inventory)
    assert [q.name for q in cfg.queues] == ["default"] and cfg.default_queue == "default"
    counts: dict[str, int] = {}
    for d in inventory.allocatable():
        counts[d.resource] = counts.get(d.resource, 0) + 1
    assert cfg.queues[0].nominal == counts and sum(counts.values()) == len(inventory.allocatable())


def test_config_check_command_exit_codes(repo_root: Path, tmp_path: Path) -> None:
    ok = subprocess.run(
        [sys.executable, "-m", "labgang.launcher", "config", "check", str(repo_root / "config" / "cluster.toml")],
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0 and "ok (3 queue(s)" in ok.stdout
    bad = tmp_path / "bad.toml"
    bad.write_text('[[queues]]\nname = "default"\nqueueing = "lifo"\n')
    out = subprocess.run(
        [sys.executable, "-m", "labgang.launcher", "config", "check", str(bad)], capture_output=True, text=True
    )
    assert out.returncode == 2
    assert "queues[0].queueing: 'lifo' is not allowed; allowed: best-effort-fifo, strict-fifo" in out.stderr


def test_pitfall_thresholds_live_in_the_cluster_config() -> None:
    cfg = parse_config({"queues": [{"name": "default"}], "pitfalls": {"idle_after_s": 30, "busy_util_pct": 70}})
    t = cfg.pitfall_thresholds()
    assert (t.idle_after_s, t.busy_util_pct, t.sm_idle_pct) == (30, 70, 25.0)  # the rest keep their defaults
    assert parse_config({"queues": [{"name": "default"}]}).pitfall_thresholds().idle_after_s == 600
    with pytest.raises(ConfigError) as info:
        parse_config({"queues": [{"name": "default"}], "pitfalls": {"idle_after": 30, "sm_idle_pct": 120}})
    assert info.value.problems == [
        "pitfalls.idle_after: unknown threshold; allowed: busy_util_pct, sm_idle_pct, idle_activity_pct, "
        "idle_after_s, allocation_rate_min_pct, min_allocated_s, history_s, no_process_after_s, "
        "memory_pressure_pct, shared_min_processes, shared_card_memory_pct, sharer_busy_pct",
        "pitfalls.sm_idle_pct: 120.0 is out of range; allowed: a percentage in 0..100",
    ]


def test_queue_quotas_take_host_cpus_and_memory_sizes() -> None:
    cfg = parse_config(
        {
            "default_queue": "a",
            "cohorts": [{"name": "lab", "nominal": {"cpu": 4}}],
            "queues": [
                {
                    "name": "a",
                    "cohort": "lab",
                    "nominal": {"gpu": 4, "cpu": 32, "memory": "256G"},
                    "borrowing_limit": {"memory": 1024},  # a bare number is MiB, as --mem
                    "lending_limit": {"cpu": 8, "memory": "64G"},
                }
            ],
        }
    )
    (a,) = cfg.queue_specs()
    assert a.nominal == {"gpu": 4, "cpu": 32, "memory": 256 * 1024**3}
    assert a.borrowing_limit == {"memory": 1024**3} and a.lending_limit == {"cpu": 8, "memory": 64 * 1024**3}
    assert cfg.cohort_specs()[0].nominal == {"cpu": 4}


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ({"nominal": {"memory": "lots"}}, "queues[0].nominal.memory: 'lots' is not a memory size; allowed: a whole"),
        ({"nominal": {"cpu": -1}}, "queues[0].nominal.cpu: -1 is out of range; allowed: a CPU count from 0 to"),
        ({"nominal": {"cpu": "8"}}, "queues[0].nominal.cpu:"),
        (
            {"cohort": "lab", "nominal": {"memory": "64G"}, "lending_limit": {"memory": "128G"}},
            "queues[0].lending_limit.memory: '128G' is above the nominal quota ('64G'); allowed: at most '64G'",
        ),
    ],
    ids=["memory-not-a-size", "cpu-negative", "cpu-as-text", "memory-lent-above-nominal"],
)
def test_bad_host_quotas_name_the_key_and_what_is_allowed(table: dict, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"default_queue": "a", "queues": [{"name": "a", **table}]})
    assert any(p.startswith(expected) for p in info.value.problems), info.value.problems
