"""``queue -o/--long`` and ``nodes``' one line per node, on JobView and NodeView dicts: squeue's
format fields and widths, sinfo's states and counts."""

from __future__ import annotations

import pytest
from labgang.launcher.cli.node_summary import node_state, node_summary
from labgang.launcher.cli.squeue_format import (
    LONG_FORMAT,
    BadFormat,
    format_jobs,
    parse_format,
    select_ids,
    slurm_duration,
)

RUNNING = {
    "id": "12",
    "name": "train",
    "user": "alice",
    "queue": "vision",
    "state": "running",
    "workers": 4,
    "gpus_per_worker": 2,
    "resource": "gpu",
    "priority": 5,
    "submit_time": 1000.0,
    "start_time": 1100.0,
    "end_time": None,
    "time_limit_s": 7200.0,
    "nodes": ["n1", "n2"],
    "reason": None,
    "argv": ["python", "train.py"],
    "dependency": None,
    "array_id": None,
}
PENDING = {
    **RUNNING,
    "id": "13_4",
    "array_id": "13",
    "name": "sweep",
    "state": "pending",
    "start_time": None,
    "time_limit_s": None,
    "nodes": [],
    "resource": "mig-1g.10gb",
    "gpus_per_worker": 1,
    "reason": {"code": "held", "message": "held by alice; `labgang release 13_4` lets it be scheduled"},
    "dependency": "afterok:12",
}


@pytest.mark.parametrize(
    "seconds,text", [(0, "0:00"), (59, "0:59"), (3725, "1:02:05"), (90061, "1-01:01:01"), (None, "UNLIMITED")]
)
def test_durations_read_as_squeue_prints_them(seconds, text):
    assert slurm_duration(seconds) == text


def test_fields_and_widths_as_squeue_o():
    out = format_jobs([RUNNING, PENDING], "%.6i %-6j|%u %T %t %M %l %D %b %P %p %E %r", now=1100.0 + 3725)
    assert out.splitlines() == [
        " JOBID NAME  |USER  STATE   ST TIME    TIME_LIMIT NODES TRES_PER_NODE PARTITION PRIORITY DEPENDENCY REASON",
        "    12 train |alice RUNNING R  1:02:05 2:00:00    2     gpu:2         vision    5        (null)     None",
        "  13_4 sweep |alice PENDING PD 0:00    UNLIMITED  -     mig-1g.10gb:1 vision    5        afterok:12 held",
    ]


def test_reason_column_and_long_format():
    out = format_jobs([RUNNING, PENDING], LONG_FORMAT, now=1200.0).splitlines()
    long_header = "JOBID PARTITION NAME USER STATE TIME TIME_LIMI NODES NODELIST(REASON)"  # squeue -l cuts it too
    assert out[0].split() == long_header.split()
    assert out[1].split()[-1] == "n1,n2"
    assert out[2].endswith("(held by alice; `labgang release 13_4` lets it be scheduled)")


@pytest.mark.parametrize("fmt", ["%i %Z", "%i %", "%.5"])
def test_an_unknown_field_is_refused_naming_the_allowed_ones(fmt):
    with pytest.raises(BadFormat, match=r"allowed: %i %A %j"):
        format_jobs([RUNNING], fmt, now=0.0)


def test_percent_literal_and_select_ids():
    assert format_jobs([RUNNING], "%i%%", now=0.0, header=False) == "12%"
    assert [j["id"] for j in select_ids([RUNNING, PENDING], ["13"])] == ["13_4"]  # an array id names its tasks
    assert [j["id"] for j in select_ids([RUNNING, PENDING], ["12", "99"])] == ["12"]


def _dev(resource: str, state: str, model: str = "H100") -> dict:
    return {"resource": resource, "state": state, "model": model}


def test_one_line_per_node_with_sinfo_states_and_counts():
    nodes = [
        {"name": "a", "connected": True, "inventory": {}, "devices": []},
        {"name": "b", "connected": True, "inventory": {"x": 1},
         "host_limits": {"enforced": False, "reason": "no cgroup v2 hierarchy is mounted (cgroup v1 only)"},
         "devices": [_dev("gpu", "allocated"), _dev("gpu", "free"), _dev("gpu", "foreign"), _dev("gpu", "free")]},
        {"name": "c", "connected": True, "inventory": {"x": 1}, "cpus": 64, "memory_bytes": 512 * 1024**3,
         "host_limits": {"enforced": True, "reason": "cpu.max and memory.max per rank under /sys/fs/cgroup/x"},
         "devices": [_dev("mig-1g.10gb", "allocated", "A100"), _dev("mig-1g.10gb", "allocated", "A100"),
                     _dev("mig-3g.40gb", "allocated", "A100")]},
        {"name": "d", "connected": False, "inventory": {"x": 1}, "devices": [_dev("gpu", "lost")]},
    ]  # fmt: skip
    assert [node_state(n) for n in nodes] == ["unknown", "mix", "alloc", "down"]
    lines = [line.split() for line in node_summary(nodes).splitlines()]
    assert lines == [
        ["NODE", "STATE", "GPUS(A/I/O/T)", "MIG", "CPUS", "MEMORY", "LIMITS", "MODEL"],
        ["a", "unknown", "0/0/0/0", "-", "-", "-", "-", "-"],
        ["b", "mix", "1/2/1/4", "-", "-", "-", "no", "H100"],
        ["c", "alloc", "0/0/0/0", "1g.10gb:2/2,3g.40gb:1/1", "64", "512G", "yes", "A100"],
        ["d", "down", "0/0/1/1", "-", "-", "-", "-", "H100"],
    ]


def test_a_field_width_beyond_a_thousand_columns_is_refused_before_any_row_is_built():
    """A new user's finding: ``-o "%.99999999999i"`` ended in a MemoryError traceback (each cell padded
    to that width). Now refused in one line naming the field and the widest allowed."""
    assert parse_format("%.1000i") == [("i", 1000, True)]
    for fmt in ("%.1001i", "%-99999999999999999999j", "%2000P"):
        with pytest.raises(BadFormat, match=r"a field width of at most 1000 columns is allowed"):
            parse_format(fmt)
