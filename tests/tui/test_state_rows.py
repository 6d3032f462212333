"""Filters, sorting and the rows shared by the widgets and --once."""

from __future__ import annotations

import asyncio

import pytest
from labgang.tui.plain import render_frame, table
from labgang.tui.rows import device_rows, finding_rows, job_rows, mem_bar, queue_rows, summary_line
from labgang.tui.sources import CoordinatorSource
from labgang.tui.state import Filters, StateBuilder, sort_jobs
from tui_fakes import NOW, FakeClient, small_cluster


@pytest.fixture
def state():
    src = CoordinatorSource(FakeClient(), description="fake", clock=lambda: NOW)
    snap = asyncio.run(src.fetch())
    return StateBuilder(mode="coordinator", source="fake", user="alice").build(snap)


def test_filters_parse_and_reject():
    assert Filters.parse("user=alice node=gpu-a") == Filters(user="alice", node="gpu-a")
    assert Filters.parse("") == Filters()
    with pytest.raises(ValueError, match="key one of user, queue, node"):
        Filters.parse("owner=alice")
    assert Filters(user="bob", queue="q").describe() == "user=bob queue=q"


def test_sort_orders(state):
    jobs = state.snapshot.jobs
    assert [j.id for j in sort_jobs(jobs, "state", NOW)] == ["j-101", "j-102", "j-104", "j-103", "j-090"]
    assert [j.id for j in sort_jobs(jobs, "age", NOW)][:2] == ["j-090", "j-101"]
    assert [j.id for j in sort_jobs(jobs, "priority", NOW)][:2] == ["j-101", "j-104"]
    with pytest.raises(ValueError, match="allowed state, age, priority, user, queue"):
        sort_jobs(jobs, "size", NOW)


def test_device_rows_show_holders_and_unavailable(state):
    rows = {r.cells[0] + " " + r.cells[1]: r for r in device_rows(state)}
    assert rows["gpu-a 0"].cells[-1] == "j-101 alice vision" and rows["gpu-a 0"].state == "allocated"
    assert rows["gpu-a 2"].state == "foreign"
    assert rows["gpu-b 1"].cells[-1] == "held after j-090"
    assert rows["gpu-b 0.2 1g.10gb"].cells[5] == "n/a (unsupported)"  # no GPM on A100: never 0
    assert rows["gpu-a 3"].cells[8] == "thermal-throttle"
    assert [r.key for r in device_rows(state, Filters(user="carol"))] == [
        "GPU-b-0002-0000-0000-000000000000",
        "GPU-b-0003-0000-0000-000000000000",
    ]


def test_job_rows_hide_finished_unless_asked(state):
    assert "j-090" not in [r.key for r in job_rows(state)]
    assert "j-090" in [r.key for r in job_rows(state, show_finished=True)]
    [frag] = [r for r in job_rows(state) if r.key == "j-103"]
    assert frag.cells[-1] == "FRAGMENTED: 5 GPUs free, largest node has 1" and frag.cells[6] == "2×4 gpu"


def test_queue_rows_and_summary(state):
    [nlp] = [r for r in queue_rows(state) if r.key == "nlp"]
    assert nlp.borrowing and nlp.cells[4] == "gpu=1" and nlp.cells[-1] == "1m00s"  # as `labgang queues` writes it
    line = summary_line(state, Filters(node="gpu-a"), "age")
    assert "10 devices: 4 allocated, 1 foreign, 4 free, 1 held" in line
    assert "filter node=gpu-a" in line and "sort age" in line


def test_findings_filtered_by_node(state):
    subjects = [r.cells[2] for r in finding_rows(state, Filters(node="gpu-b"))]
    assert "gpu-b GPU 1" in subjects and not any(s.startswith("gpu-a") for s in subjects)


def test_mem_bar_and_table():
    assert mem_bar(40 * 1024**3, 80 * 1024**3, width=4, ascii_only=True) == "##.. 40.0/80G"
    assert table(("a", "bb"), [("xxx", "y")], 80) == ["A    BB", "xxx  y"]


def test_render_frame_sections(state):
    text = render_frame(state, width=120)
    for header in ("DEVICES (10)", "JOBS (4)", "QUEUES (3)", "PITFALLS (8)"):
        assert header in text
    assert all(len(line) <= 120 for line in text.splitlines())
    with pytest.raises(ValueError, match="width"):
        render_frame(state, width=10)


def test_control_characters_in_a_job_name_are_escaped_in_the_tui_rows():
    from tui_fakes import small_cluster

    nodes, jobs, queues = small_cluster()
    jobs = [dict(j, name="evil\n\x1b[31mred") if j["id"] == "j-101" else j for j in jobs]
    src = CoordinatorSource(FakeClient(nodes, jobs, queues), description="fake", clock=lambda: NOW)
    state = StateBuilder(mode="coordinator", source="fake", user="alice").build(asyncio.run(src.fetch()))
    [row] = [r for r in job_rows(state) if r.key == "j-101"]
    assert row.cells[1] == "evil\\n\\x1b[31mred"
    assert all("\n" not in c and "\x1b" not in c for r in job_rows(state) for c in r.cells)


def test_pending_tasks_of_one_job_array_fold_into_one_row_as_queue_shows_them():
    from tui_fakes import job, small_cluster

    nodes, jobs, queues = small_cluster()

    def task(i: int, state: str = "pending") -> dict:
        started = 60.0 if state == "running" else None
        return dict(
            job(f"45_{i}", "bob", "vision", state, age_s=300, started_s=started, reason=("QUOTA", "over quota")),
            array_id="45",
            array_index=i,
            array_limit=4,
        )

    jobs = [*jobs, task(0, "running"), *(task(i) for i in range(1, 31))]
    src = CoordinatorSource(FakeClient(nodes, jobs, queues), description="fake", clock=lambda: NOW)
    state = StateBuilder(mode="coordinator", source="fake", user="alice").build(asyncio.run(src.fetch()))
    keys = [r.key for r in job_rows(state)]
    assert "45_0" in keys  # a running task keeps its own row
    [folded] = [r for r in job_rows(state) if r.key.startswith("45_") and r.key != "45_0"]
    assert folded.cells[0] == "45_[1-30%4]" and folded.cells[4] == "pending"
    assert sum(k.startswith("45_") for k in keys) == 2
    frame = render_frame(state, width=160)
    assert "45_[1-30%4]" in frame and "45_7" not in frame


def test_a_shared_card_shows_its_sharers_shares_and_memory():
    nodes, jobs, queues = small_cluster()
    gpu_a = next(n for n in nodes if n["name"] == "gpu-a")
    gpu_a["shards_per_gpu"] = 4
    sharers = [
        {"job": "j-201", "rank": 0, "kind": "shard", "shards": 1, "sm_percent": None, "gpu_mem_bytes": None,
         "used_memory_bytes": 5 * 1024**3},
        {"job": "j-202", "rank": 0, "kind": "shard", "shards": 2, "sm_percent": None, "gpu_mem_bytes": 2 * 1024**3,
         "used_memory_bytes": 300 * 1024**2},
    ]  # fmt: skip
    gpu_a["inventory"]["gpus"][1]["sharers"] = sharers
    src = CoordinatorSource(FakeClient(nodes, jobs, queues), description="fake", clock=lambda: NOW)
    state = StateBuilder(mode="coordinator", source="fake", user="alice").build(asyncio.run(src.fetch()))
    rows = {r.cells[0] + " " + r.cells[1]: r for r in device_rows(state)}
    # j-202 has a --gpu-mem budget: its usage shows against it
    assert rows["gpu-a 1"].cells[-1] == "shared 3/4: j-201 5.0G, j-202 300M/2.0G"
    assert rows["gpu-a 0"].cells[-1] == "j-101 alice vision"  # a card nobody shares keeps its holder


def test_a_sharer_past_its_gpu_mem_budget_is_marked_over_budget_in_top():
    nodes, jobs, queues = small_cluster()
    gpu_a = next(n for n in nodes if n["name"] == "gpu-a")
    gpu_a["shards_per_gpu"] = 4
    sharers = [
        {"job": "1", "rank": 0, "kind": "shard", "shards": 1, "sm_percent": None, "gpu_mem_bytes": 16 * 1024**2,
         "used_memory_bytes": 512 * 1024**2},
        {"job": "2", "rank": 0, "kind": "shard", "shards": 1, "sm_percent": None, "gpu_mem_bytes": 512 * 1024**2,
         "used_memory_bytes": 512 * 1024**2},
    ]  # fmt: skip
    gpu_a["inventory"]["gpus"][1]["sharers"] = sharers
    src = CoordinatorSource(FakeClient(nodes, jobs, queues), description="fake", clock=lambda: NOW)
    state = StateBuilder(mode="coordinator", source="fake", user="alice").build(asyncio.run(src.fetch()))
    rows = {r.cells[0] + " " + r.cells[1]: r for r in device_rows(state)}
    # job 1 uses 512 MiB of a 16 MiB budget; job 2 exactly its budget, which is not over it
    assert rows["gpu-a 1"].cells[-1] == "shared 2/4: 1 512M/16M OVER BUDGET, 2 512M/512M"
    assert "OVER BUDGET" in render_frame(state, width=200)


def test_queue_amounts_are_written_as_labgang_queues_writes_them():
    from labgang.tui.rows import _res

    assert _res({"gpu": 4, "cpu": 4, "memory": 8589934592}) == "cpu=4,gpu=4,memory=8G"
    assert _res({}) == "0"


def test_a_running_share_with_a_gpu_mem_budget_says_its_memory_in_the_jobs_table():
    nodes, jobs, queues = small_cluster()
    gpu_a = next(n for n in nodes if n["name"] == "gpu-a")
    sharers = [
        {"job": "j-101", "rank": 0, "kind": "shard", "shards": 1, "sm_percent": None, "gpu_mem_bytes": 16 * 1024**2,
         "used_memory_bytes": 512 * 1024**2},
        {"job": "j-102", "rank": 0, "kind": "shard", "shards": 1, "sm_percent": None, "gpu_mem_bytes": 2 * 1024**3,
         "used_memory_bytes": 300 * 1024**2},
    ]  # fmt: skip
    gpu_a["inventory"]["gpus"][1]["sharers"] = sharers
    src = CoordinatorSource(FakeClient(nodes, jobs, queues), description="fake", clock=lambda: NOW)
    state = StateBuilder(mode="coordinator", source="fake", user="alice").build(asyncio.run(src.fetch()))
    reasons = {r.key: r.cells[-1] for r in job_rows(state)}
    assert reasons["j-101"] == "gpu-mem 512M/16M OVER BUDGET"
    assert reasons["j-102"] == "gpu-mem 300M/2.0G"
    assert reasons["j-104"].startswith("OVER_QUOTA")  # a pending job keeps its pending reason


def test_a_share_is_written_without_a_resource_word_in_the_jobs_table_as_the_readme_says():
    """README: ``top`` shows a share as ``1×shard:N`` or ``1×mps:P`` in RANKS×DEV (not ``1×shard:1 gpu``)."""
    nodes, jobs, queues = small_cluster()
    by_id = {j["id"]: j for j in jobs}
    by_id["j-101"].update(workers=1, shards=1)
    by_id["j-102"].update(workers=1, mps=50)
    src = CoordinatorSource(FakeClient(nodes, jobs, queues), description="fake", clock=lambda: NOW)
    state = StateBuilder(mode="coordinator", source="fake", user="alice").build(asyncio.run(src.fetch()))
    shapes = {r.key: r.cells[6] for r in job_rows(state)}
    assert shapes["j-101"] == "1×shard:1"
    assert shapes["j-102"] == "1×mps:50"
    assert shapes["j-103"] == "2×4 gpu"  # whole devices keep their resource


def test_a_drained_nodes_free_devices_say_so_with_the_reason():
    """``labgang drain gpu-b``: its free devices take no new job, and top's holder column says why;
    a device a job still holds there keeps its holder (the node is draining)."""
    nodes, jobs, queues = small_cluster()
    gpu_b = next(n for n in nodes if n["name"] == "gpu-b")
    gpu_b["drain"] = {"reason": "PSU swap", "by": "root", "since": NOW - 60}
    src = CoordinatorSource(FakeClient(nodes, jobs, queues), description="fake", clock=lambda: NOW)
    state = StateBuilder(mode="coordinator", source="fake", user="alice").build(asyncio.run(src.fetch()))
    rows = {r.cells[0] + " " + r.cells[1]: r for r in device_rows(state)}
    free_b = [r for k, r in rows.items() if k.startswith("gpu-b") and r.state == "free"]
    assert free_b and all(r.cells[-1] == "drained: PSU swap" for r in free_b)
    assert not any(r.cells[-1].startswith("drained") for r in rows.values() if r.state != "free")
    assert all(not r.cells[-1].startswith("drained") for k, r in rows.items() if k.startswith("gpu-a"))


def test_a_pending_task_moved_to_another_queue_keeps_its_own_row_in_top():
    from tui_fakes import job, small_cluster

    nodes, jobs, queues = small_cluster()

    def task(i: int, queue: str = "vision") -> dict:
        return dict(
            job(f"45_{i}", "bob", queue, "pending", age_s=300, reason=("QUOTA", "over quota")),
            array_id="45",
            array_index=i,
        )

    jobs = [*jobs, *(task(i) for i in range(4)), task(4, "nlp")]
    src = CoordinatorSource(FakeClient(nodes, jobs, queues), description="fake", clock=lambda: NOW)
    state = StateBuilder(mode="coordinator", source="fake", user="alice").build(asyncio.run(src.fetch()))
    rows = sorted((r.cells[0], r.cells[3]) for r in job_rows(state) if r.cells[0].startswith("45_"))
    assert rows == [("45_4", "nlp"), ("45_[0-3]", "vision")]
