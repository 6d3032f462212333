"""A stand-in agent process for the restart test: supervise ranks, report them, then tick forever.

Usage: ``python agent_child.py STATE_DIR SPECS_JSON [STOP_GRACE READY_FILE]``. It launches
every spec in SPECS_JSON (a list of ``LaunchSpec.to_dict()``), ticks until all report
``started``, optionally waits for READY_FILE and stops every job with grace STOP_GRACE
seconds, prints one JSON line
``{"ranks": [RankStatus.to_dict(), ...]}`` and keeps ticking until it is killed (the test
kills it with SIGKILL).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from labgang.agent.supervisor import LaunchSpec, RankState, Supervisor


def main(state_dir: str, specs_file: str, stop_grace: str | None = None, ready_file: str | None = None) -> None:
    sup = Supervisor(Path(state_dir), allow_root=True)
    for data in json.loads(Path(specs_file).read_text()):
        sup.launch(LaunchSpec.from_dict(data))
    while not all(r.state is RankState.RUNNING for r in sup.ranks()):
        sup.tick()
        time.sleep(0.02)
    if stop_grace is not None:
        while ready_file is not None and not Path(ready_file).exists():
            sup.tick()
            time.sleep(0.02)
        for job_id in sorted({r.job_id for r in sup.ranks()}):
            sup.stop_job(job_id, grace=float(stop_grace))
    print(json.dumps({"ranks": [r.to_dict() for r in sup.ranks()]}), flush=True)
    while True:
        sup.tick()
        time.sleep(0.05)


if __name__ == "__main__":
    main(*sys.argv[1:5])
