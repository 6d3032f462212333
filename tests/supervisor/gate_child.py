"""A stand-in agent for the start gate's crash test: open a gate, wait until every rank is parked,
say so, then wait to be killed (the test sends SIGKILL between prepare and release).

Usage: ``python gate_child.py STATE_DIR SPECS_JSON``: SPECS_JSON is a list of
``LaunchSpec.to_dict()``. Prints one JSON line ``{"parked": [rank, ...], "shims": [pid, ...]}``
once the gate is settled, then blocks on stdin.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from labgang.agent.supervisor import LaunchSpec, Supervisor


def main(state_dir: str, specs_file: str) -> None:
    sup = Supervisor(Path(state_dir), allow_root=True)
    specs = [LaunchSpec.from_dict(data) for data in json.loads(Path(specs_file).read_text())]
    pending = sup.begin_launch(specs)
    (gate,) = pending.gates
    if not gate.wait(30.0):
        raise SystemExit("the ranks were not parked in 30 s")
    parked = sorted(gate.ranks - gate.waiting - gate.failed)
    shims = [
        json.loads((Path(state_dir) / "ranks" / s.job_id / str(s.rank) / "shim.json").read_text())["pid"] for s in specs
    ]
    print(json.dumps({"parked": parked, "shims": shims}), flush=True)
    sys.stdin.read()  # the test kills this process here: the agent dies between prepare and release


if __name__ == "__main__":
    main(*sys.argv[1:3])
