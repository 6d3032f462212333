"""``labgang top``: the Textual App and :func:`make_app`, the factory the CLI and the tests share.

A timer starts a fetch worker at most once a second (a thread worker for NVML, an async
worker for the coordinator); the worker builds an immutable
:class:`~labgang.tui.state.ClusterState` and posts it in a :class:`StateReady` message;
the App assigns it to the reactive ``state``, and every widget is bound to that with
``data_bind`` and redraws in its ``watch_*``. Nothing on the UI thread calls NVML or HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import signal
import sys
import threading
import time
from typing import ClassVar

from labgang.launcher.pitfalls import ClusterSnapshot, PitfallThresholds
from labgang.tui import served_to_a_browser
from labgang.tui.messages import CancelFailed, FetchFailed, JobCancelled, StateReady
from labgang.tui.processes import PROCESS_SORTS
from labgang.tui.rows import finding_keys
from labgang.tui.screens.confirm import ConfirmScreen
from labgang.tui.screens.filter import FilterScreen
from labgang.tui.screens.help import HelpScreen
from labgang.tui.screens.job_detail import JobDetailScreen
from labgang.tui.screens.process_filter import ProcessFilterScreen
from labgang.tui.sources import DataSource, current_user
from labgang.tui.state import JOB_SORTS, ClusterState, Filters, StateBuilder
from labgang.tui.widgets.devices import DevicesTable
from labgang.tui.widgets.graphs import GraphsView
from labgang.tui.widgets.jobs import JobsTable
from labgang.tui.widgets.pitfalls import PitfallTable
from labgang.tui.widgets.processes import ProcessesTable
from labgang.tui.widgets.queues import QueuesTable
from labgang.tui.widgets.rows_table import RowsTable
from labgang.tui.widgets.summary import Summary
from textual import events, work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.reactive import reactive
from textual.widgets import Footer, Static, TabbedContent, TabPane
from textual.worker import Worker

MIN_REFRESH_S = 1.0
SHORT_LINES = 20
"""Terminals with fewer lines than this hide the finding detail line (see app.tcss)."""


def describe_error(exc: BaseException) -> str:
    """One line for the summary bar."""
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


TERMINAL_CHECK_S = 0.5
"""How often the app looks whether its terminal has hung up."""
TERMINAL_EXIT_GRACE_S = 3.0
"""How long the app may take to exit once its terminal is gone before the process is ended."""


def _hung_up(fd: int) -> bool:
    """Whether the terminal on ``fd`` has hung up (its other end closed) or ``fd`` is no longer open."""
    poller = select.poll()
    poller.register(fd, select.POLLHUP | select.POLLERR | select.POLLNVAL)
    return any(mask & (select.POLLHUP | select.POLLERR | select.POLLNVAL) for _, mask in poller.poll(0))


class LabgangTop(App[None]):
    """The TUI. Build it with :func:`make_app`.

    Reactive attributes (bound to the widgets): ``state`` (latest :class:`ClusterState`,
    None before the first fetch), ``filters``, ``sort`` (a key of :data:`JOB_SORTS`),
    ``show_finished``, and the process view's ``proc_sort`` (a key of :data:`PROCESS_SORTS`)
    and ``proc_text`` (its ``/`` filter).

    ``read_only`` (``top --web`` for a viewer without the cluster token) refuses to cancel.
    """

    CSS_PATH = "app.tcss"
    TITLE = "labgang top"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "quit"),
        # Ctrl-C quits at once, as top and htop do (Textual's own ctrl+c only says "press ctrl+q")
        Binding("ctrl+c", "quit", "quit", show=False, priority=True),
        Binding("question_mark", "help", "help"),
        Binding("1", "show_tab('devices')", "devices"),
        Binding("2", "show_tab('jobs')", "jobs"),
        Binding("3", "show_tab('queues')", "queues"),
        Binding("4", "show_tab('processes')", "processes"),
        Binding("5", "show_tab('graphs')", "graphs"),
        Binding("f", "filter", "filter"),
        Binding("m", "mine", "mine"),
        Binding("x", "clear_filters", "clear filter", show=False),
        Binding("s", "cycle_sort", "sort"),
        Binding("o", "cycle_process_sort", "process sort", show=False),
        Binding("slash", "process_filter", "process filter", show=False),
        Binding("a", "toggle_finished", "finished", show=False),
        Binding("d", "details", "details"),
        Binding("c", "cancel_job", "cancel"),
        Binding("r", "refresh", "refresh", show=False),
    ]

    state: reactive[ClusterState | None] = reactive(None, always_update=True)
    filters: reactive[Filters] = reactive(Filters())
    sort: reactive[str] = reactive("state")
    show_finished: reactive[bool] = reactive(False)
    proc_sort: reactive[str] = reactive("gpu_memory")
    proc_text: reactive[str] = reactive("")

    def __init__(self, source: DataSource, builder: StateBuilder, refresh_s: float, read_only: bool = False) -> None:
        super().__init__()
        self.source = source
        self.builder = builder
        self.refresh_s = refresh_s
        self.read_only = read_only
        self._fetch: Worker | None = None
        self._fetch_again = False  # a fetch was asked for while one was in flight (see _want_series)

    # -- layout ------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Summary(id="summary").data_bind(LabgangTop.state, LabgangTop.filters, LabgangTop.sort)
        with TabbedContent(initial="devices", id="tabs"):
            with TabPane("Devices [1]", id="devices"):
                yield DevicesTable(id="devices-table").data_bind(LabgangTop.state, LabgangTop.filters)
            with TabPane("Jobs [2]", id="jobs"):
                yield JobsTable(id="jobs-table").data_bind(
                    LabgangTop.state, LabgangTop.filters, LabgangTop.show_finished, order=LabgangTop.sort
                )
            with TabPane("Queues [3]", id="queues"):
                yield QueuesTable(id="queues-table").data_bind(LabgangTop.state, LabgangTop.filters)
            with TabPane("Processes [4]", id="processes"):
                yield ProcessesTable(id="processes-table").data_bind(
                    LabgangTop.state, LabgangTop.filters, LabgangTop.proc_sort, LabgangTop.proc_text
                )
            with TabPane("Graphs [5]", id="graphs"), VerticalScroll(id="graphs-table"):
                yield GraphsView(id="graphs-view").data_bind(LabgangTop.state, LabgangTop.filters)
        yield PitfallTable(id="pitfalls").data_bind(LabgangTop.state, LabgangTop.filters)
        yield Static("", id="pitfall-detail", markup=False)
        yield Footer()

    def on_resize(self, event: events.Resize) -> None:
        """Mark the screen ``short`` below :data:`SHORT_LINES` lines (CSS then drops the finding detail)."""
        self.screen.set_class(event.size.height < SHORT_LINES, "short")

    def on_mount(self) -> None:
        if self.source.mode == "local":  # no jobs or queues without a coordinator
            tabs = self.query_one(TabbedContent)
            tabs.hide_tab("jobs")
            tabs.hide_tab("queues")
        self.query_one(DevicesTable).focus()
        self.set_interval(self.refresh_s, self.request_refresh)
        self.request_refresh()
        if not self.is_headless:
            self._watch_terminal()

    async def on_unmount(self) -> None:
        await self.source.aclose()

    # -- the terminal going away ---------------------------------------------------------

    def _watch_terminal(self) -> None:
        """Exit when the terminal goes away: on SIGHUP, or (SIGHUP ignored or never sent, e.g. an
        orphaned ``top`` under a killed ``script``) when the terminal on standard input hangs up.
        Otherwise the app would keep running, and refreshing, with no one to see it. A viewer's
        app of ``top --web`` (Textual's web driver; its terminal is a pipe from the server) exits
        too when that pipe hangs up or the server that started it is gone.

        A thread watches, not the event loop: once the terminal is gone Textual's writer can block
        the loop. It asks the app to exit and, if it has not within :data:`TERMINAL_EXIT_GRACE_S`,
        ends the process (status 0: nothing is left to show or restore)."""
        gone = threading.Event()
        loop = asyncio.get_running_loop()
        with contextlib.suppress(ValueError):  # not the main thread: no SIGHUP handler
            signal.signal(signal.SIGHUP, lambda *_: gone.set())
        stdin = sys.__stdin__
        served = served_to_a_browser()
        usable = stdin is not None and not stdin.closed and (stdin.isatty() or served)
        fd = stdin.fileno() if usable and stdin is not None else None
        parent = os.getppid()

        def watch() -> None:
            while not gone.wait(TERMINAL_CHECK_S):
                if fd is not None and _hung_up(fd):
                    break
                if served and os.getppid() != parent:  # the web server went away (even kill -9)
                    break
            with contextlib.suppress(RuntimeError):  # the loop already closed
                loop.call_soon_threadsafe(self.exit)
            time.sleep(TERMINAL_EXIT_GRACE_S)
            os._exit(0)

        threading.Thread(target=watch, name="labgang-top-terminal", daemon=True).start()

    # -- data --------------------------------------------------------------------------

    def request_refresh(self) -> bool:
        """Start a fetch worker unless one is still running (so at most one fetch is in flight).
        Returns whether one was started."""
        if self._fetch is not None and not self._fetch.is_finished:
            return False
        self._fetch = self._fetch_blocking() if self.source.blocking else self._fetch_async()
        return True

    @work(thread=True, exclusive=True, group="fetch", exit_on_error=False)
    def _fetch_blocking(self) -> None:
        try:
            state = self.builder.build(self.source.read())
        except Exception as exc:  # NVML or /proc trouble: keep the old data, show the error
            self.post_message(FetchFailed(describe_error(exc)))
            return
        self.post_message(StateReady(state))

    @work(exclusive=True, group="fetch", exit_on_error=False)
    async def _fetch_async(self) -> None:
        try:
            snapshot = await self.source.fetch()
            state = await asyncio.to_thread(self.builder.build, snapshot)
        except Exception as exc:  # coordinator down or refusing: keep the old data, show the error
            self.post_message(FetchFailed(describe_error(exc)))
            return
        self.post_message(StateReady(state))

    def on_state_ready(self, message: StateReady) -> None:
        self.state = message.state
        self._fetch_again_if_asked()

    def _fetch_again_if_asked(self) -> None:
        """Start the fetch the Graphs tab asked for while another was in flight (that one may
        have been started before the tab asked for series)."""
        if self._fetch_again:
            self._fetch_again = False
            self.request_refresh()

    def on_fetch_failed(self, message: FetchFailed) -> None:
        self._fetch_again_if_asked()
        if self.state is None:
            empty = ClusterSnapshot(now=0.0, nodes=())
            self.state = ClusterState(
                empty,
                mode=self.source.mode,
                source=self.source.description,
                user=self.builder.user,
                error=message.error,
            )
        else:
            self.state = self.state.with_error(message.error)

    # -- selection ---------------------------------------------------------------------

    def selected_job_id(self) -> str | None:
        """The job under the cursor: a job row, the holder of a device row, or a finding's job."""
        focused = self.focused
        if isinstance(focused, PitfallTable) and self.state is not None:
            key = focused.selected_key
            return next((f.job for k, f in finding_keys(self.state) if k == key), None)
        tab = self.query_one(TabbedContent).active
        if tab == "jobs":
            return self.query_one(JobsTable).selected_key
        if tab == "processes" and self.state is not None:
            return self._process_job(self.query_one(ProcessesTable).selected_key)
        if tab == "devices" and self.state is not None:
            uuid = self.query_one(DevicesTable).selected_key
            for dev in self.state.devices:
                if dev.uuid == uuid and dev.holder is not None:
                    return dev.holder.job
        return None

    def _process_job(self, key: str | None) -> str | None:
        """The job of the process row ``key`` (``node|uuid|pid``), or None for a foreign process."""
        if key is None or self.state is None:
            return None
        node, uuid, pid = key.split("|")
        for dev in self.state.devices:
            if dev.node == node and dev.uuid == uuid and isinstance(dev.info.processes, tuple):
                return next((p.job for p in dev.info.processes if str(p.pid) == pid), None)
        return None

    # -- actions -----------------------------------------------------------------------

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        """Hidden tables and graphs skip refills; bring the ones just shown up to date."""
        for table in event.pane.query(RowsTable):
            table.show_pending()
        for view in event.pane.query(GraphsView):
            view.show_pending()
        self._want_series(event.pane.id == "graphs")

    def _want_series(self, graphs: bool) -> None:
        """The graphs' samples are fetched (``CoordinatorSource.series_wanted``) or viewed from the
        builder's own history (``StateBuilder.series_wanted``) only while their tab is shown: when
        it is shown and the state has none to draw, fetch now (once more after the fetch in flight,
        if one is)."""
        changed = self.builder.series_wanted != graphs
        self.builder.series_wanted = graphs
        if hasattr(self.source, "series_wanted") and self.source.series_wanted != graphs:
            self.source.series_wanted = graphs
            changed = True
        if graphs and changed and (self.state is None or self.state.snapshot.series is None):
            self._fetch_again = not self.request_refresh()

    def on_data_table_row_highlighted(self, event: PitfallTable.RowHighlighted) -> None:
        """Show the highlighted finding in full under the panel (the table cuts long lines)."""
        if not isinstance(event.data_table, PitfallTable) or self.state is None:
            return
        finding = next((f for k, f in finding_keys(self.state) if k == event.row_key.value), None)
        text = f"{finding.subject}: {finding.summary} -> {finding.advice}" if finding else ""
        self.query_one("#pitfall-detail", Static).update(text)

    def action_show_tab(self, tab: str) -> None:
        if self.source.mode == "local" and tab in ("jobs", "queues"):
            self.notify("local mode shows devices only; jobs and queues need the coordinator", timeout=3)
            return
        self.query_one(TabbedContent).active = tab
        self.query_one(f"#{tab}-table").focus()

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_filter(self) -> None:
        def done(filters: Filters | None) -> None:
            if filters is not None:
                self.filters = filters

        self.push_screen(FilterScreen(self.filters), done)

    def action_mine(self) -> None:
        me = self.builder.user
        self.filters = Filters(
            user=None if self.filters.user == me else me, queue=self.filters.queue, node=self.filters.node
        )

    def action_clear_filters(self) -> None:
        self.filters = Filters()

    def action_cycle_sort(self) -> None:
        keys = [k for k, _ in JOB_SORTS]
        self.sort = keys[(keys.index(self.sort) + 1) % len(keys)]
        self.notify(f"jobs sorted by {dict(JOB_SORTS)[self.sort]}", timeout=2)

    def action_cycle_process_sort(self) -> None:
        keys = [k for k, _ in PROCESS_SORTS]
        self.proc_sort = keys[(keys.index(self.proc_sort) + 1) % len(keys)]
        self.notify(f"processes sorted by {dict(PROCESS_SORTS)[self.proc_sort]}", timeout=2)

    def action_process_filter(self) -> None:
        def done(text: str | None) -> None:
            if text is not None:
                self.proc_text = text

        self.push_screen(ProcessFilterScreen(self.proc_text), done)

    def action_toggle_finished(self) -> None:
        self.show_finished = not self.show_finished

    def action_refresh(self) -> None:
        self.request_refresh()

    def action_details(self) -> None:
        job_id = self.selected_job_id()
        if job_id is None:
            self.notify("select a job (jobs tab, or an allocated device) first", severity="warning")
            return
        self.push_screen(JobDetailScreen(job_id, self.source))

    def on_data_table_row_selected(self, event: JobsTable.RowSelected) -> None:
        if isinstance(event.data_table, JobsTable):
            self.action_details()

    def action_cancel_job(self) -> None:
        job_id = self.selected_job_id()
        if job_id is None:
            self.notify("select a job to cancel first", severity="warning")
            return
        self.ask_cancel(job_id)

    def ask_cancel(self, job_id: str) -> None:
        """Check the job may be cancelled by this user, ask, then cancel in a worker."""
        if self.read_only:
            self.notify(
                "read-only view: cancelling needs the cluster token (open the page with ?token=...)", severity="error"
            )
            return
        if not self.source.can_cancel:
            self.notify("cancelling needs the coordinator; local mode only watches", severity="warning")
            return
        job = self.state.snapshot.job(job_id) if self.state is not None else None
        if job is None:
            self.notify(f"job {job_id} is not listed", severity="warning")
            return
        me = self.builder.user
        if job.user != me and me != "root":
            self.notify(f"job {job_id} belongs to {job.user}, not {me}", severity="error")
            return
        if job.finished:
            self.notify(f"job {job_id} already {job.state}", severity="warning")
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self._cancel(job_id)

        self.push_screen(
            ConfirmScreen(f"Cancel job {job_id} ({job.name or '-'}, {job.state}, {job.shape_with_resource})?"),
            answered,
        )

    @work(exclusive=True, group="cancel", exit_on_error=False)
    async def _cancel(self, job_id: str) -> None:
        try:
            job = await self.source.cancel(job_id)
        except Exception as exc:  # refused (403/404) or coordinator gone
            self.post_message(CancelFailed(job_id, describe_error(exc)))
            return
        self.post_message(JobCancelled(job))

    def on_job_cancelled(self, message: JobCancelled) -> None:
        self.notify(f"job {message.job.id}: {message.job.state}")
        self.request_refresh()

    def on_cancel_failed(self, message: CancelFailed) -> None:
        self.notify(f"cancel {message.job_id} failed: {message.error}", severity="error")


def make_app(
    source: DataSource,
    *,
    thresholds: PitfallThresholds | None = None,
    refresh_s: float = 1.0,
    user: str | None = None,
    read_only: bool = False,
) -> LabgangTop:
    """Build the TUI for a data source (the CLI and the tests both call this).

    Args:
        source: :class:`~labgang.tui.sources.LocalSource` or :class:`~labgang.tui.sources.CoordinatorSource`.
        thresholds: pitfall thresholds (defaults: :class:`PitfallThresholds`).
        refresh_s: seconds between fetches; values below 1 s are raised to 1 s.
        user: who runs the TUI (for ``m`` and cancel checks); defaults to the real uid's name.
        read_only: refuse every action that changes state (cancel): ``top --web`` for a viewer
            who did not present the cluster token.
    """
    builder = StateBuilder(thresholds, mode=source.mode, source=source.description, user=user or current_user())
    return LabgangTop(source, builder, max(MIN_REFRESH_S, refresh_s), read_only=read_only)
