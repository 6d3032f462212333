"""One job: its fields and history, a row per rank, and the tail of the selected rank's log."""

from __future__ import annotations

from typing import ClassVar

from labgang.launcher.pitfalls import JobView
from labgang.tui.messages import LogChunkReady
from labgang.tui.rows import job_detail_lines
from labgang.tui.sources import DataSource
from labgang.tui.state import ClusterState
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Log, Static
from textual.worker import Worker

RANK_COLUMNS = ("rank", "node", "devices", "state", "pid", "exit")
LOG_POLL_S = 1.0


class JobDetailScreen(ModalScreen[None]):
    """Details of job ``job_id``; follows the App's state and polls the selected rank's log.

    Args:
        job_id: the job to show.
        source: where logs come from (local sources have none: the log pane says so).
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,d", "dismiss", "close"),
        Binding("c", "cancel_job", "cancel job"),
    ]

    def __init__(self, job_id: str, source: DataSource) -> None:
        super().__init__()
        self.job_id = job_id
        self.source = source
        self.rank = 0
        self._offset = 0
        self._finished = False
        self._log_worker: Worker | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="detail-box"):
            yield Static("", id="detail-head", markup=False)
            yield DataTable(id="detail-ranks", cursor_type="row")
            yield Log(id="detail-log", max_lines=2000)

    def on_mount(self) -> None:
        self.query_one("#detail-ranks", DataTable).add_columns(*RANK_COLUMNS)
        self.watch(self.app, "state", self._show, init=True)
        self.set_interval(LOG_POLL_S, self._poll_log)
        self._poll_log()

    def action_cancel_job(self) -> None:
        self.app.ask_cancel(self.job_id)  # type: ignore[attr-defined]  # textual types Screen.app as App[object]

    @property
    def job(self) -> JobView | None:
        state: ClusterState | None = self.app.state  # type: ignore[attr-defined]  # (the same)
        return state.snapshot.job(self.job_id) if state is not None else None

    def _show(self, state: ClusterState | None) -> None:
        job = state.snapshot.job(self.job_id) if state is not None else None
        head = self.query_one("#detail-head", Static)
        if state is None or job is None:
            head.update(f"job {self.job_id}: no longer listed by the coordinator")
            return
        head.update("\n".join(job_detail_lines(job, state.snapshot.now)))
        table = self.query_one("#detail-ranks", DataTable)
        cursor = table.cursor_row
        table.clear()
        for r in job.ranks:
            table.add_row(
                str(r.rank),
                r.node or "-",
                ",".join(d[:12] for d in r.devices) or "-",
                r.state,
                "-" if r.pid is None else str(r.pid),
                "-" if r.exit_status is None else str(r.exit_status),
                key=str(r.rank),
            )
        if job.ranks:
            table.move_cursor(row=min(cursor, len(job.ranks) - 1), animate=False)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        rank = int(event.row_key.value) if event.row_key.value is not None else 0
        if rank != self.rank:
            if self._log_worker is not None:
                self._log_worker.cancel()
            self.rank, self._offset, self._finished, self._log_worker = rank, 0, False, None
            self.query_one("#detail-log", Log).clear()
            self._poll_log()

    def _poll_log(self) -> None:
        """Ask for more of the selected rank's log unless it is complete or a request is in flight."""
        if self._finished or (self._log_worker is not None and not self._log_worker.is_finished):
            return
        self._log_worker = self._fetch_log(self.rank, self._offset)

    @work(exclusive=True, group="log", exit_on_error=False)
    async def _fetch_log(self, rank: int, offset: int) -> None:
        try:
            text, nxt, finished = await self.source.log_tail(self.job_id, rank, offset)
        except PermissionError as exc:
            text, nxt, finished = f"({exc})\n", offset, True
        except Exception as exc:  # coordinator down or job unknown: say so and stop polling
            text, nxt, finished = f"(log unavailable: {exc}; reopen the details to retry)\n", offset, True
        self.post_message(LogChunkReady(self.job_id, rank, text, nxt, finished))

    def on_log_chunk_ready(self, msg: LogChunkReady) -> None:
        if msg.rank != self.rank or msg.job_id != self.job_id:
            return
        self._offset, self._finished = msg.next_offset, msg.finished
        if msg.text:
            self.query_one("#detail-log", Log).write(msg.text)
