"""How a fast command ends (launcher/cli/quick.py ``_leave``): without the interpreter's teardown
(``os._exit``, ~1 ms of ``labgang queue``) unless an ``atexit`` handler waits for the exit."""

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
if {handler}:
    import atexit
    atexit.register(int)
sys.argv = ["labgang", "queue", "--state-dir", {state!r}]
from labgang.launcher.cli import quick
quick.main()
"""


@pytest.mark.parametrize("handler", [False, True])
def test_a_fast_command_skips_teardown_only_when_no_atexit_handler_waits(tmp_path, handler):
    code = PROBE.format(handler=handler, state=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ))
    assert done.returncode == 1  # no coordinator: the command's own status
    assert done.stderr.startswith("labgang queue: no labgang coordinator at ")
    assert ("teardown ran" in done.stderr) is handler
