"""How a fast command ends (launcher/cli/quick.py ``_leave``): without the interpreter's teardown
(``os._exit``, ~1 ms of ``labgang queue``) only where the exit handlers were counted from the start
(the launcher without ``site``, ``quick.ExitHandlerCount``) and none was registered."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PROBE = """
import os, sys
class Probe:
    def __del__(self, write=os.write):
        write(2, b"teardown ran\\n")
import builtins
builtins.probe = Probe()  # freed only by the interpreter's teardown
from labgang.launcher.cli import quick
if {watched}:
    quick.ExitHandlerCount.watch()
if {handler}:
    import atexit
    atexit.register(int)
sys.argv = ["labgang", "queue", "--state-dir", {state!r}]
quick.main()
"""


@pytest.mark.parametrize(("watched", "handler"), [(True, False), (True, True), (False, False)])
def test_a_fast_command_skips_teardown_only_when_counted_handlers_are_none(tmp_path, watched, handler):
    code = PROBE.format(watched=watched, handler=handler, state=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ))
    assert done.returncode == 1  # no coordinator: the command's own status
    assert done.stderr.startswith("labgang queue: no labgang coordinator at ")
    assert ("teardown ran" in done.stderr) is (handler or not watched)


def test_everything_a_fast_command_wrote_to_a_pipe_arrives_before_it_ends(fake):
    """``labgang logs`` of a 300 kB log, as a shell runs it (``os._exit`` at the end): all of it
    arrives on the pipe, and the exit status is the command's."""
    fake.log = b"".join(b"line %06d of the log\n" % i for i in range(15_000))
    env = {**os.environ, "LABGANG_STATE_DIR": str(fake.socket_path.parent)}
    done = subprocess.run([sys.executable, "-m", "labgang.launcher", "logs", "1"], capture_output=True, env=env)
    assert (done.returncode, done.stderr) == (0, b"")
    assert done.stdout == fake.log


@pytest.mark.parametrize("path", ["fast", "click"])
def test_a_closed_pipe_ends_logs_quietly_with_status_1(fake, path):
    """``labgang logs 1 | head -2``: stdout is a real pipe whose reader is gone (closed before the
    command writes, so the result does not hang on how much the kernel buffers). The command ends
    quietly (nothing on stderr, no traceback) with status 1, as click ends any command whose stdout
    closed and as the fast path ends ``labgang queue | head`` (README, docs/cli-startup.md)."""
    fake.log = b"".join(b"line %06d of the log\n" % i for i in range(50_000))
    env = {**os.environ, "LABGANG_STATE_DIR": str(fake.socket_path.parent)}
    start = (
        ["-m", "labgang.launcher"] if path == "fast" else ["-c", "from labgang.launcher.cli.main import main; main()"]
    )
    proc = subprocess.Popen(
        [sys.executable, *start, "logs", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # as `head` exits
    stderr = proc.stderr.read()
    assert proc.wait(30) == 1
    assert stderr == b""
