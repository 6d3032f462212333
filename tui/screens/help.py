"""The ``?`` help screen: every key and what the columns mean."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

HELP_TEXT = """\
labgang top — who holds which GPU, why jobs wait, what wastes GPUs

  1 .. 5      devices / jobs / queues / processes / graphs tab (or click the tab)
  f           filter: user=NAME queue=NAME node=NAME (any subset)
  m           only my jobs and devices (toggle)
  x           clear filters
  s           cycle the jobs sort order
  a           show finished jobs too (toggle)
  enter, d    details of the selected job: ranks and log tail
  c           cancel the selected job (yours only; asks first; not in a read-only web view)
  o           cycle the processes sort (GPU memory, SM, CPU, host memory, time, pid, user)
  /           processes: show those whose pid, user, job or command contains a text
  r           refresh now
  ?           this help;  q  quit

Devices: "util" is NVML utilization.gpu (time any kernel ran); "SM act" is GPM SM
activity (share of SMs busy; n/a before Hopper). Holder: job user queue, or
free / foreign (processes labgang did not start) / held (memory left after a job) / lost.
Pitfalls list the numbers that triggered them and one line on what to do.
Processes: every process on every device, with its job and rank ("not labgang's" for
others, "MPS server (user: jobs)" for labgang's own MPS daemon of a card); another user's
command only for admins. Graphs: utilization, SM activity and
memory over the last minutes per device and per running job; a red mark where a pitfall fired.

Press escape or ? to close."""


class HelpScreen(ModalScreen[None]):
    """Keys and column meanings."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,question_mark,q", "dismiss", "close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Static(HELP_TEXT, markup=False)
