"""The process view and the history graphs: rows (pure), the Processes and Graphs tabs (Pilot),
``--once``'s PROCESSES section, and the read-only app of ``top --web`` refusing to cancel."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from labgang.launcher.pitfalls import ClusterSnapshot
from labgang.tui.app import LabgangTop, make_app
from labgang.tui.graphs import graph_blocks, graph_lines, spark
from labgang.tui.plain import render_frame
from labgang.tui.processes import GONE, HIDDEN, NOT_LABGANGS, process_rows
from labgang.tui.screens.confirm import ConfirmScreen
from labgang.tui.sources import CoordinatorSource, DataSource
from labgang.tui.state import ClusterState, Filters, StateBuilder
from labgang.tui.widgets.graphs import GraphsView
from labgang.tui.widgets.jobs import JobsTable
from labgang.tui.widgets.processes import ProcessesTable
from tui_fakes import NOW, Call, FakeClient, small_cluster

GiB = 1024**3
SIZE = (160, 50)


def with_facts() -> tuple[list, list, list]:
    """The small cluster, its device processes filled in as an agent reports them."""
    nodes, jobs, queues = small_cluster()
    a = nodes[0]["inventory"]["gpus"]
    a[0]["processes"][0].update(
        user="alice",
        command="python train.py --lr 3e-4",
        cpu_pct=97.0,
        rss_bytes=3 * GiB,
        started_at=NOW - 3600,
        job="j-101",
        rank=0,
        alive=True,
        sm_pct=61.0,
    )
    a[1]["processes"][0].update(
        user="alice",
        command="python train.py --lr 3e-4",
        cpu_pct=12.0,
        rss_bytes=2 * GiB,
        started_at=NOW - 3500,
        job="j-101",
        rank=1,
        alive=True,
    )
    a[2]["processes"][0].update(
        user="mallory", command=None, cpu_pct=3.0, rss_bytes=GiB, started_at=NOW - 60, alive=True
    )
    a[2]["processes"][1].update(alive=False)
    a[2]["processes"][1]["used_memory_bytes"] = 40 * GiB
    return nodes, jobs, queues


class SeriesClient(FakeClient):
    """The fake coordinator, with ``GET /v1/series``: three samples of gpu-a's GPU 0 and one marker."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        uuid = self._nodes[0]["inventory"]["gpus"][0]["uuid"]
        self.series_body = {
            "window_s": 600.0,
            "devices": [
                {
                    "node": "gpu-a",
                    "uuid": uuid,
                    "label": "GPU 0",
                    "t": [NOW - 4, NOW - 2, NOW],
                    "util_pct": [10.0, 97.0, 97.0],
                    "sm_pct": [10.0, 8.0, None],
                    "mem_used_bytes": [GiB, 30 * GiB, 30 * GiB],
                    "mem_total_bytes": [80 * GiB] * 3,
                    "job": [None, "j-101", "j-101"],
                }
            ],
            "markers": [
                {
                    "t": NOW - 2,
                    "kind": "kernel-busy-sm-idle",
                    "severity": "warning",
                    "subject": "job j-101",
                    "uuid": uuid,
                    "job": "j-101",
                }
            ],
        }

    async def series(self):
        self.calls.append(Call("series", ()))
        return dict(self.series_body)


def state_of(client: FakeClient, user: str = "alice", series: bool = True) -> ClusterState:
    source = CoordinatorSource(client, clock=lambda: NOW)
    source.series_wanted = series
    snapshot = asyncio.run(source.fetch())
    return StateBuilder(mode="coordinator", user=user).build(snapshot)


@pytest.fixture
def facts_client() -> SeriesClient:
    return SeriesClient(*with_facts(), user="alice")


def test_rows_name_job_and_rank_foreign_and_gone_processes_and_hide_others_commands(facts_client) -> None:
    rows = process_rows(state_of(facts_client))
    by_pid = {r.cells[2]: r for r in rows}
    assert [r.cells[2] for r in rows][:3] == ["4243", "1001", "1002"]  # GPU memory, largest first
    r0 = by_pid["1001"].cells
    assert r0[:5] == ("gpu-a", "0", "1001", "alice", "j-101 r0")
    assert r0[5:] == ("20.0G", "61%", "97%", "3.0G", "1h00m", "python train.py --lr 3e-4")
    assert by_pid["4242"].cells[3:5] == ("mallory", NOT_LABGANGS) and by_pid["4242"].kind == "foreign"
    assert by_pid["4242"].cells[-1] == HIDDEN  # the coordinator blanked another user's command
    assert by_pid["4243"].cells[4] == GONE and by_pid["4243"].kind == "gone"
    assert by_pid["2001"].cells[4] == "?"  # a node whose agent sent no host facts: not guessed


def test_sort_and_filters(facts_client) -> None:
    state = state_of(facts_client)
    assert [r.cells[2] for r in process_rows(state, sort="cpu")][:3] == ["1001", "1002", "4242"]
    assert [r.cells[2] for r in process_rows(state, sort="pid")][:2] == ["1001", "1002"]
    assert [r.cells[2] for r in process_rows(state, text="MALL")] == ["4242"]
    assert {r.cells[2] for r in process_rows(state, Filters(user="alice"))} == {"1001", "1002"}
    assert {r.cells[2] for r in process_rows(state, Filters(node="gpu-b"))} == {"3003", "2001", "2002"}
    with pytest.raises(ValueError, match="process sort 'nope': allowed gpu_memory, sm, cpu"):
        process_rows(state, sort="nope")


def test_local_mode_shows_another_users_command_to_root_only(facts_client) -> None:
    nodes, _, _ = with_facts()
    nodes[0]["inventory"]["gpus"][2]["processes"][0]["command"] = "python mine.py"
    client = FakeClient(nodes, [], [])
    for viewer, shown in (("alice", HIDDEN), ("root", "python mine.py"), ("mallory", "python mine.py")):
        state = state_of(client, user=viewer)
        local = ClusterState(state.snapshot, mode="local", user=viewer)
        (row,) = [r for r in process_rows(local) if r.cells[2] == "4242"]
        assert row.cells[-1] == shown, viewer


def test_once_prints_the_processes(facts_client) -> None:
    text = render_frame(state_of(facts_client), width=200)
    section = text.split("PROCESSES (7)\n", 1)[1]
    assert "j-101 r0" in section and NOT_LABGANGS in section and "python train.py" in section


def test_series_are_fetched_only_when_wanted(facts_client) -> None:
    state_of(facts_client, series=False)
    assert [c.method for c in facts_client.calls].count("series") == 0
    state = state_of(facts_client, series=True)
    assert [c.method for c in facts_client.calls].count("series") == 1
    assert state.snapshot.series is not None and state.snapshot.series.markers  # the coordinator's, with its marker


def test_graphs_draw_the_series_and_mark_the_pitfall(facts_client) -> None:
    assert spark([0, 50, 100, None], 6) == "  ▁▄█ "
    blocks = graph_blocks(state_of(facts_client), width=10)
    titles = [b.title for b in blocks]
    assert titles == ["gpu-a GPU 0", "job j-101 train (alice, 2 dev)"]
    dev = blocks[0]
    assert dict((n, v) for n, _, v in dev.rows) == {"util": "97%", "SM": "8%", "mem": "30.0G"}
    assert dev.markers == "        ▲ " and dev.marker_notes == ("kernel-busy-sm-idle: job j-101",)
    lines = graph_lines(blocks, 80)
    assert any(line.startswith("  pitfalls") and "▲" in line for line in lines)


async def test_processes_tab_sorts_and_filters_with_keys(facts_client) -> None:
    app = make_app(CoordinatorSource(facts_client, clock=lambda: NOW), refresh_s=3600, user="alice")
    async with app.run_test(size=SIZE) as pilot:
        await app.workers.wait_for_complete()
        await pilot.press("4")
        await pilot.pause()
        table = app.query_one(ProcessesTable)
        assert table.has_focus and table.row_count == 7
        keys = [str(r.key.value) for r in table.ordered_rows]
        assert keys[0].endswith("|4243")
        await pilot.press("o")
        assert app.proc_sort == "sm"
        await pilot.press("slash")
        await pilot.press(*"mallory", "enter")
        await pilot.pause()
        assert app.proc_text == "mallory" and [str(r.key.value).split("|")[2] for r in table.ordered_rows] == ["4242"]
        await pilot.press("slash", "ctrl+u", "enter")  # empty clears
        await pilot.pause()
        assert table.row_count == 7


async def test_graphs_tab_shows_sparklines_and_the_marker(facts_client) -> None:
    app = make_app(CoordinatorSource(facts_client, clock=lambda: NOW), refresh_s=3600, user="alice")
    async with app.run_test(size=SIZE) as pilot:
        await app.workers.wait_for_complete()
        assert "series" not in [c.method for c in facts_client.calls]  # not fetched while no graph is shown
        await pilot.press("5")
        await pilot.pause()
        await app.workers.wait_for_complete()  # the refresh the tab asked for
        await pilot.pause()
        assert "series" in [c.method for c in facts_client.calls]
        text = app.query_one(GraphsView).render().plain
        assert "gpu-a GPU 0" in text and "kernel-busy-sm-idle: job j-101" in text and "▲" in text


@pytest.mark.parametrize("read_only", [True, False])
async def test_a_read_only_app_never_cancels(facts_client, read_only: bool) -> None:
    app: LabgangTop = make_app(
        CoordinatorSource(facts_client, clock=lambda: NOW), refresh_s=3600, user="alice", read_only=read_only
    )
    async with app.run_test(size=SIZE) as pilot:
        await app.workers.wait_for_complete()
        await pilot.press("2")
        await pilot.pause()
        assert app.query_one(JobsTable).selected_key == "j-101"
        await pilot.press("c")
        await pilot.pause()
        if read_only:
            assert not isinstance(app.screen, ConfirmScreen)
            assert any("read-only view" in n.message for n in app._notifications)
        else:
            assert isinstance(app.screen, ConfirmScreen)
            await pilot.press("y")
            await app.workers.wait_for_complete()
    assert [c.args for c in facts_client.calls if c.method == "cancel"] == ([] if read_only else [("j-101",)])


def test_mps_clients_are_rows_of_their_own_next_to_their_server() -> None:
    nodes, jobs, queues = with_facts()
    gpu = nodes[0]["inventory"]["gpus"][1]
    server = {"pid": 3000, "used_memory_bytes": 5 * GiB, "user": "alice", "alive": True}
    client = {"pid": 3001, "used_memory_bytes": 5 * GiB, "user": "alice", "alive": True, "job": "j-101", "rank": 1,
              "command": "python eval.py"}  # fmt: skip
    gpu["processes"].append(server)
    gpu["mps_processes"] = [client]
    rows = {r.cells[2]: r for r in process_rows(state_of(SeriesClient(nodes, jobs, queues, user="alice")))}
    assert rows["3001"].cells[:6] == ("gpu-a", "1", "3001", "alice", "j-101 r1", "5.0G")
    assert rows["3001"].kind == "labgang" and rows["3000"].kind == "foreign"


async def test_the_hidden_graphs_tab_waits_and_draws_what_changed_once_shown(facts_client, monkeypatch) -> None:
    """While another tab is shown a new state or filter only marks the graphs stale (no layout refresh
    of the screen each refresh of ``top``); shown again, they draw the latest, not what they drew last."""
    app = make_app(CoordinatorSource(facts_client, clock=lambda: NOW), refresh_s=3600, user="alice")
    async with app.run_test(size=SIZE) as pilot:
        await app.workers.wait_for_complete()
        await pilot.press("5")
        await pilot.pause()
        view = app.query_one(GraphsView)

        def drawn() -> str:
            return "\n".join(strip.text for strip in view.render_lines(view.region.reset_offset))

        assert "gpu-a GPU 0" in drawn()
        await pilot.press("1")
        await pilot.pause()
        assert isinstance(app.source, CoordinatorSource)
        app.source.series_wanted = True  # fetched on every refresh: showing the tab again asks for no new one
        refreshes: list[dict] = []
        refresh = view.refresh

        def counted(**kw: bool) -> object:
            refreshes.append(kw)
            return refresh(**kw)

        monkeypatch.setattr(view, "refresh", counted)
        app.request_refresh()
        await app.workers.wait_for_complete()
        await pilot.pause()
        app.filters = Filters(node="gpu-b")  # gpu-a's graphs go
        await pilot.pause()
        assert refreshes and not any(kw.get("layout") for kw in refreshes)  # the reactives' own repaints only
        calls = len(facts_client.calls)
        await pilot.press("5")
        await pilot.pause()
        await app.workers.wait_for_complete()
        assert len(facts_client.calls) == calls  # no new fetch: what is drawn now is the stale mark's doing
        assert {"layout": True} in refreshes
        assert "gpu-a GPU 0" not in drawn()


class TickingLocal(DataSource):
    """A local source (blocking, as NVML's): each read is one second later, utilization moving."""

    mode, description, blocking = "local", "ticking", True

    def __init__(self) -> None:
        self.snapshots: list[ClusterSnapshot] = []

    def read(self) -> ClusterSnapshot:
        nodes, jobs, queues = with_facts()
        i = len(self.snapshots)
        nodes[0]["inventory"]["gpus"][0]["utilization_gpu_pct"] = float(10 * i % 100)
        snap = ClusterSnapshot.from_api(NOW + i, {"nodes": nodes}, {"jobs": jobs}, {"queues": queues})
        self.snapshots.append(snap)
        return snap

    async def fetch(self) -> ClusterSnapshot:
        return self.read()


async def test_local_graphs_view_the_history_only_while_shown_and_show_every_point(monkeypatch) -> None:
    """``labgang top --local`` records a point per device at every refresh but views them (a copy of
    every device's points) only while the Graphs tab is shown; showing it fetches once, and the graphs
    drawn are those of a builder that viewed its history at every refresh."""
    source = TickingLocal()
    app = make_app(source, refresh_s=3600, user="alice")
    async with app.run_test(size=SIZE) as pilot:
        await app.workers.wait_for_complete()
        views: list[object] = []
        view = app.builder.series.view

        def counted(*args: Any, **kw: Any) -> Any:
            views.append(args)
            return view(*args, **kw)

        monkeypatch.setattr(app.builder.series, "view", counted)
        for _ in range(3):
            app.request_refresh()
            await app.workers.wait_for_complete()
            await pilot.pause()
        assert app.state is not None and app.state.snapshot.series is None and views == []
        await pilot.press("5")
        await pilot.pause()
        await app.workers.wait_for_complete()  # the refresh the tab asked for
        await pilot.pause()
        assert len(source.snapshots) == 5 and len(views) == 1
        shown = app.state.snapshot.series
        assert shown is not None
        d0 = shown.device(source.snapshots[0].nodes[0].devices[0].uuid)
        assert d0 is not None and [p.t for p in d0.points] == [NOW + i for i in range(5)]
        assert [p.util_pct for p in d0.points] == [0.0, 10.0, 20.0, 30.0, 40.0]
        reference = StateBuilder(mode="local", user="alice")
        reference.series_wanted = True
        for snap in source.snapshots:
            expected = reference.build(snap)
        assert expected.snapshot.series == shown
        assert graph_blocks(app.state, width=20) == graph_blocks(expected, width=20) != []
        text = app.query_one(GraphsView).render().plain
        assert "gpu-a GPU 0" in text and "job j-101" in text
        await pilot.press("1")  # hidden again: no view
        await pilot.pause()
        app.request_refresh()
        await app.workers.wait_for_complete()
        assert app.state.snapshot.series is None and len(views) == 1
