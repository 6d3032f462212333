"""The confinement writer for real: a temporary cgroup v2 mount, the kernel's eBPF device filter,
the real supervisor and small parent, and a rank that tries to open devices.

No NVIDIA driver here, so the fence guards the ``mem`` devices' major instead (``NodeDevices``
told that ``mem`` is the frontend and that the rank's "GPU" is minor 3): the rank may open
``/dev/null`` (1:3) and is refused ``/dev/zero`` (1:5) and ``/dev/urandom`` (1:9), exactly as a
rank given ``/dev/nvidia1`` is refused ``/dev/nvidia0``. Skips, saying why, where no cgroup v2
hierarchy can be mounted (not root, no ``CAP_SYS_ADMIN``, a container) or ``bpf(2)`` is refused.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from labgang.agent.confine import NodeDevices, RankCgroups
from labgang.agent.confine.bpfdev import BpfError, device_filter_program, load_device_filter
from labgang.agent.supervisor import RankState, Supervisor

FAKE_GPU = "GPU-test-0"
PYTHON = sys.executable


@pytest.fixture
def cgroup2() -> Iterator[Path]:
    """A cgroup v2 hierarchy mounted on a temporary folder, with a ranks folder in it."""
    where = Path(tempfile.mkdtemp(prefix="lg-cg2-", dir="/tmp"))
    done = subprocess.run(["mount", "-t", "cgroup2", "none", str(where)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        where.rmdir()
        pytest.skip(f"cannot mount a cgroup v2 hierarchy here: {done.stderr.strip() or done.returncode}")
    try:
        os.close(load_device_filter(device_filter_program((), ())))
    except BpfError as exc:
        subprocess.run(["umount", str(where)], check=False)
        where.rmdir()
        pytest.skip(f"the kernel refuses eBPF device filters here: {exc}")
    ranks = where / f"labgang-test-{os.getpid()}"
    ranks.mkdir()
    try:
        yield ranks
    finally:
        for child in ranks.iterdir():
            if child.is_dir():
                child.rmdir()
        ranks.rmdir()
        subprocess.run(["umount", str(where)], check=True)
        where.rmdir()


PROBE = (
    "import json, os, sys\n"
    "out = {}\n"
    "for dev in ('/dev/null', '/dev/zero', '/dev/urandom'):\n"
    "    try:\n"
    "        os.close(os.open(dev, os.O_RDONLY))\n"
    "        out[dev] = 'ok'\n"
    "    except OSError as exc:\n"
    "        out[dev] = exc.strerror\n"
    "child = os.fork()\n"  # a descendant is fenced as well
    "if child == 0:\n"
    "    try:\n"
    "        os.close(os.open('/dev/zero', os.O_RDONLY)); os._exit(0)\n"
    "    except OSError:\n"
    "        os._exit(7)\n"
    "out['child /dev/zero'] = 'refused' if os.waitpid(child, 0)[1] >> 8 == 7 else 'ok'\n"
    "out['cgroup'] = open('/proc/self/cgroup').read()\n"
    "open(sys.argv[1], 'w').write(json.dumps(out))\n"
)


def test_a_confined_rank_opens_only_its_devices(
    cgroup2: Path, state_dir: Path, cleanup, make_spec, h, tmp_path
) -> None:
    devices = NodeDevices({"nvidia-frontend": 1}, {FAKE_GPU: 3}, {}, {})
    sup = Supervisor(state_dir, allow_root=True, cgroups=RankCgroups(str(cgroup2), devices))
    cleanup.append(sup)
    result = tmp_path / "probe.json"
    sup.launch(make_spec([PYTHON, "-c", PROBE, str(result)], devices=(FAKE_GPU,)))
    h.run_until(sup, h.all_in(sup, RankState.GONE))
    seen = json.loads(result.read_text())
    assert seen["/dev/null"] == "ok"
    assert seen["/dev/zero"] == "Operation not permitted"
    assert seen["/dev/urandom"] == "Operation not permitted"
    assert seen["child /dev/zero"] == "refused"
    rank_cgroup = cgroup2 / "job1.0"
    assert f"/{cgroup2.name}/job1.0" in seen["cgroup"]  # the rank ran inside its own cgroup
    assert rank_cgroup.is_dir()
    sup.forget("job1")
    assert not rank_cgroup.exists()  # removed once the rank is gone


def test_an_unconfinable_rank_is_not_started(cgroup2: Path, state_dir: Path, cleanup, make_spec) -> None:
    devices = NodeDevices({"nvidia-frontend": 1}, {}, {}, {})  # no minor known for the rank's GPU
    sup = Supervisor(state_dir, allow_root=True, cgroups=RankCgroups(str(cgroup2), devices))
    cleanup.append(sup)
    with pytest.raises(OSError, match="cannot confine rank 0 of job job1: device GPU-test-0: no minor number"):
        sup.launch(make_spec([PYTHON, "-c", "pass"], devices=(FAKE_GPU,)))
    assert sup.ranks() == []
    assert [p for p in cgroup2.iterdir() if p.is_dir()] == []  # no rank cgroup left behind
