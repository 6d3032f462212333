"""A job whose kernels keep the GPU "busy" while most SMs idle: the *kernel busy, SMs idle* pitfall.

On a real GPU this is a loop of tiny kernels (or a spin on a stream) that never fills the
device: ``nvidia-smi`` shows 100 % utilization while GPM SM activity stays in single digits.
On a simulated node (``labgang up --simulate ...``) the rank declares exactly that to the
simulated NVML through its environment (docs/simulated-activity.md)::

    SIM_GPU_UTIL_PCT=100 SIM_GPU_SM_ACTIVE_PCT=5 SIM_GPU_MEMORY_MIB=20000

Run it (the pitfall shows in `labgang top`, `labgang show JOB` and /metrics within seconds)::

    labgang run -g 1 --name busy-kernels -- python examples/busy_kernels_idle_sms.py 120

The argument is how long to run, in seconds (default 120). It re-executes itself once with
those variables set when they are missing, so NVML (which reads a process's environment as it
started) sees them; variables you set yourself are kept.
"""

from __future__ import annotations

import os
import sys
import time

DECLARED = {"SIM_GPU_UTIL_PCT": "100", "SIM_GPU_SM_ACTIVE_PCT": "5", "SIM_GPU_MEMORY_MIB": "20000"}


def main() -> int:
    """Declare the activity (re-exec once), then keep a tiny "kernel" loop running for argv[1] seconds."""
    missing = {k: v for k, v in DECLARED.items() if k not in os.environ}
    if missing:
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **missing})  # noqa: S606  # same program, declared env
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 120.0
    print(f"launching tiny kernels for {seconds:g} s on {os.environ.get('CUDA_VISIBLE_DEVICES', '?')}", flush=True)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.05)  # one "kernel" per step: the device is never idle, its SMs mostly are
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
