"""A job that holds its GPUs and does nothing with them: the *allocated but idle* pitfall.

The classic case is a notebook or a training script stalled on data loading, holding
devices nobody else can use. Here every rank allocates a little device memory and then
waits, so NVML shows a process on the device and 0 % activity. On a simulated node the
rank declares its memory (docs/simulated-activity.md) and, sleeping, uses no CPU, which
the simulated NVML reports as an idle device.

Run it; the finding appears once the devices have been idle for ``idle_after_s`` (600 s by
default; 30 s with config/workstation.toml, see the README's pitfall thresholds)::

    labgang run -n 2 -g 1 --name idle-notebook -- python examples/allocated_but_idle.py 300

The argument is how long to hold the devices, in seconds (default 300).
"""

from __future__ import annotations

import os
import sys
import time

DECLARED = {"SIM_GPU_MEMORY_MIB": "8192"}


def main() -> int:
    """Declare the memory (re-exec once), then sleep for argv[1] seconds."""
    missing = {k: v for k, v in DECLARED.items() if k not in os.environ}
    if missing:
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **missing})  # noqa: S606  # same program, declared env
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 300.0
    print(f"holding {os.environ.get('CUDA_VISIBLE_DEVICES', '?')} idle for {seconds:g} s", flush=True)
    time.sleep(seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
