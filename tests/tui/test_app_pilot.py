"""Drive the TUI with keys (Textual Pilot) and check its state and the messages its workers post."""

from __future__ import annotations

import pytest
from labgang.launcher.api.client import CoordinatorUnavailable
from labgang.tui.app import LabgangTop, make_app
from labgang.tui.messages import CancelFailed, FetchFailed, JobCancelled, LogChunkReady, StateReady
from labgang.tui.screens.confirm import ConfirmScreen
from labgang.tui.screens.filter import FilterScreen
from labgang.tui.screens.help import HelpScreen
from labgang.tui.screens.job_detail import JobDetailScreen
from labgang.tui.sources import CoordinatorSource, DataSource
from labgang.tui.state import Filters
from labgang.tui.widgets.devices import DevicesTable
from labgang.tui.widgets.jobs import JobsTable
from labgang.tui.widgets.pitfalls import PitfallTable
from tui_fakes import NOW, FakeClient

SIZE = (160, 50)


async def settle(app: LabgangTop, pilot) -> None:
    await app.workers.wait_for_complete()
    await pilot.pause()


def of_type(messages, kind):
    return [m for m in messages if isinstance(m, kind)]


async def test_first_fetch_fills_every_table(app, client):
    seen = []
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await settle(app, pilot)
        assert len(of_type(seen, StateReady)) == 1
        assert app.state.snapshot.now == NOW and app.state.mode == "coordinator"
        assert app.query_one(DevicesTable).row_count == 10
        assert app.query_one(PitfallTable).row_count == len(app.state.findings) == 8
        # tables on hidden tabs are filled when their tab is shown, not on every refresh
        assert app.query_one(JobsTable).row_count == 0
        await pilot.press("2")
        assert app.query_one(JobsTable).row_count == 4  # the finished job is hidden
        assert {c.method for c in client.calls} == {"nodes", "jobs", "queues"}
        assert ("jobs", (True, None)) in [(c.method, c.args) for c in client.calls]


async def test_tabs_filter_mine_sort_and_finished(app):
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("2")
        assert app.query_one("#tabs").active == "jobs"
        await pilot.press("m")
        assert app.filters == Filters(user="alice")
        assert app.query_one(JobsTable).row_count == 2
        await pilot.press("m")
        assert app.filters == Filters()
        await pilot.press("s")
        assert app.sort == "age"
        assert app.query_one(JobsTable).selected_key == "j-101"  # cursor follows the row, not the index
        await pilot.press("a")
        assert app.show_finished and app.query_one(JobsTable).row_count == 5

        await pilot.press("f")
        assert isinstance(app.screen, FilterScreen)
        await pilot.press(*"owner=x", "enter")
        assert isinstance(app.screen, FilterScreen)  # refused, with the reason shown
        assert "key one of user, queue, node" in str(app.screen.query_one("#filter-error").render())
        app.screen.query_one("#filter-input").value = ""
        await pilot.press(*"node=gpu-b", "enter")
        assert app.filters == Filters(node="gpu-b")
        await pilot.press("1")
        assert app.query_one(DevicesTable).row_count == 6
        await pilot.press("x")
        assert app.query_one(DevicesTable).row_count == 10


async def test_cancel_own_job_after_confirmation(app, client):
    seen = []
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await settle(app, pilot)
        await pilot.press("2")
        assert app.query_one(JobsTable).selected_key == "j-101"
        await pilot.press("c")
        assert isinstance(app.screen, ConfirmScreen)
        assert "j-101" in app.screen.question
        await pilot.press("y")
        await settle(app, pilot)
        [done] = of_type(seen, JobCancelled)
        assert done.job.id == "j-101" and done.job.state == "cancelled"
        assert [c.args for c in client.calls if c.method == "cancel"] == [("j-101",)]
        # the refresh after the cancel shows the new state
        assert app.state.snapshot.job("j-101").state == "cancelled"
        assert "j-101" not in [
            app.query_one(JobsTable).get_row_at(i)[0].plain for i in range(app.query_one(JobsTable).row_count)
        ]


async def test_declining_or_others_jobs_never_cancel(app, client):
    seen = []
    async with app.run_test(size=SIZE, message_hook=seen.append, notifications=True) as pilot:
        await settle(app, pilot)
        await pilot.press("2", "c")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        assert not isinstance(app.screen, ConfirmScreen)
        await pilot.press("down", "c")  # j-102 belongs to carol
        assert app.query_one(JobsTable).selected_key == "j-102"
        assert not isinstance(app.screen, ConfirmScreen)
        assert any("belongs to carol" in n.message for n in app._notifications)
        await settle(app, pilot)
        assert [c for c in client.calls if c.method == "cancel"] == []
        assert of_type(seen, JobCancelled) == []


async def test_refused_cancel_is_reported(client):
    # the TUI thinks the caller is root (may cancel anything); the coordinator still says 403
    source = CoordinatorSource(client, clock=lambda: NOW)
    app = make_app(source, refresh_s=3600, user="root")
    seen = []
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await settle(app, pilot)
        await pilot.press("2", "down", "c", "y")
        await settle(app, pilot)
        [failed] = of_type(seen, CancelFailed)
        assert failed.job_id == "j-102" and "belongs to carol" in failed.error


async def test_details_show_ranks_and_log_tail(app, client):
    seen = []
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await settle(app, pilot)
        await pilot.press("2", "enter")
        assert isinstance(app.screen, JobDetailScreen)
        await pilot.pause()
        await app.screen.workers.wait_for_complete()
        await pilot.pause()
        screen = app.screen
        assert screen.query_one("#detail-ranks").row_count == 2
        assert "job j-101 train  user alice" in str(screen.query_one("#detail-head").render())
        assert "step 2 loss 2.05" in "\n".join(screen.query_one("#detail-log").lines)
        await pilot.press("down")
        await pilot.pause()
        await screen.workers.wait_for_complete()
        await pilot.pause()
        assert screen.rank == 1 and "rank 1 ready" in "\n".join(screen.query_one("#detail-log").lines)
        assert [(m.rank, m.finished) for m in of_type(seen, LogChunkReady)] == [(0, True), (1, True)]
        await pilot.press("escape")
        assert not isinstance(app.screen, JobDetailScreen)


async def test_details_from_an_allocated_device_row(app):
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("d")  # first device row: gpu-a GPU 0, held by j-101
        assert isinstance(app.screen, JobDetailScreen) and app.screen.job_id == "j-101"


async def test_help_opens_and_closes(app):
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_mouse_click_switches_tab(app):
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.click("#tabs Tab#--content-tab-queues")
        assert app.query_one("#tabs").active == "queues"


async def test_fetch_failure_keeps_old_data_and_shows_error(app, client):
    seen = []
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await settle(app, pilot)
        client.fail = CoordinatorUnavailable(__import__("pathlib").Path("/nowhere/labgang.sock"))
        await pilot.press("r")
        await settle(app, pilot)
        [failed] = of_type(seen, FetchFailed)
        assert "no labgang coordinator at /nowhere/labgang.sock" in failed.error
        assert app.state.error == failed.error
        assert app.query_one(DevicesTable).row_count == 10  # stale beats blank
        assert "ERROR no labgang coordinator" in str(app.query_one("#summary").render())
        client.fail = None
        await pilot.press("r")
        await settle(app, pilot)
        assert app.state.error is None


class _SlowSource(DataSource):
    """Counts fetches that overlap, to check that the App never runs two at once."""

    mode = "coordinator"
    description = "slow"

    def __init__(self) -> None:
        import asyncio

        self.gate = asyncio.Event()
        self.started = 0

    async def fetch(self):
        from labgang.launcher.pitfalls import ClusterSnapshot

        self.started += 1
        await self.gate.wait()
        return ClusterSnapshot(now=NOW, nodes=())


async def test_at_most_one_fetch_in_flight():
    source = _SlowSource()
    app = make_app(source, refresh_s=3600, user="alice")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("r", "r", "r")
        assert source.started == 1
        source.gate.set()
        await settle(app, pilot)
        await pilot.press("r")
        await pilot.pause()
        assert source.started == 2
        source.gate.set()
        await settle(app, pilot)


async def test_local_source_cannot_cancel():
    class Local(DataSource):
        mode, description, blocking = "local", "test", True

        def read(self):
            from labgang.launcher.pitfalls import ClusterSnapshot

            return ClusterSnapshot(now=NOW, nodes=())

        async def fetch(self):
            return self.read()

    app = make_app(Local(), refresh_s=3600, user="alice")
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(app, pilot)
        assert app.state is not None and app.state.mode == "local"
        app.ask_cancel("j-1")
        await pilot.pause()
        assert any("local mode only watches" in n.message for n in app._notifications)


def test_refresh_is_never_faster_than_once_a_second():
    app = make_app(CoordinatorSource(FakeClient(), clock=lambda: NOW), refresh_s=0.05, user="a")
    assert app.refresh_s == 1.0


def _table_cells(table) -> list[tuple[str, ...]]:
    return [tuple(c.plain for c in table.get_row_at(i)) for i in range(table.row_count)]


async def test_refresh_patches_rows_to_exactly_the_new_rows(app, client):
    from labgang.tui.rows import job_rows

    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("2", "down")  # cursor on j-102
        table = app.query_one(JobsTable)
        assert table.selected_key == "j-102"
        jobs = client._jobs
        jobs[:] = [j for j in jobs if j["id"] != "j-101"]  # a job leaves
        jobs[0]["restart_count"] = 7  # a cell changes (j-102)
        jobs.append(dict(jobs[1], id="j-200", priority=99, state="running"))  # a job arrives, sorts first
        await pilot.press("r")
        await settle(app, pilot)
        expected = [r.cells for r in job_rows(app.state, app.filters, app.sort)]
        assert _table_cells(table) == expected
        assert expected[0][0] == "j-200" and table.selected_key == "j-102"  # cursor followed its row
        [j102] = [row for row in expected if row[0] == "j-102"]
        assert j102[9] == "7"


async def test_details_from_a_pitfall_row(app):
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        panel = app.query_one(PitfallTable)
        panel.focus()
        keys = [panel.coordinate_to_cell_key((i, 0)).row_key.value for i in range(panel.row_count)]
        panel.move_cursor(row=next(i for i, k in enumerate(keys) if k.startswith("fragmented-gang|")))
        await pilot.press("d")
        assert isinstance(app.screen, JobDetailScreen) and app.screen.job_id == "j-103"


async def test_highlighted_finding_is_shown_in_full(app):
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        panel = app.query_one(PitfallTable)
        panel.focus()
        await pilot.press("down")
        detail = str(app.query_one("#pitfall-detail").render())
        second = app.state.findings[1]
        assert detail == f"{second.subject}: {second.summary} -> {second.advice}"


async def test_local_mode_shows_devices_only(repo_root):
    from labgang.agent.nvml.simulated import SimulatedNvml
    from labgang.tui.sources import LocalSource

    backend = SimulatedNvml.from_file(repo_root / "config/sim/a100x8-mig.toml", scan_processes=False)
    backend.nvmlInit()
    app = make_app(LocalSource(backend, clock=lambda: NOW), refresh_s=3600, user="alice")
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(app, pilot)
        assert app.query_one(DevicesTable).row_count == 20
        await pilot.press("2")
        await pilot.pause()
        assert app.query_one("#tabs").active == "devices"
        assert any("local mode shows devices only" in n.message for n in app._notifications)


@pytest.mark.parametrize("size, rows", [((80, 24), 5), ((50, 12), 2)])
async def test_small_terminals_still_show_devices(source, size, rows):
    """At 80x24 and 50x12 the devices table keeps room for its header and device rows."""
    app = make_app(source, refresh_s=3600, user="alice")
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        table = app.query_one(DevicesTable)
        assert table.row_count == 10
        # header + at least `rows` device lines are on screen
        dev, pit = table.region, app.query_one(PitfallTable).region
        assert dev.height >= rows + 1 and dev.bottom <= pit.y, (size, dev, pit)  # not under the findings
        assert pit.bottom <= size[1] - 1, (size, pit)  # nothing pushed off screen (the footer is last)
        assert pit.height >= 3, size  # the findings stay visible too
