"""Can this agent confine its ranks to their devices? The host facts, and the decision over them.

:func:`probe_host` reads what matters (``/proc/self/status``, ``/proc/self/mountinfo``,
``/proc/self/cgroup``, ``/proc/devices``), tries to make the ranks' cgroup folder and asks the
kernel to load an empty device filter; :func:`decide` turns those facts into a
:class:`Confinement`, pure, so every path is tested without root. The one way to confine
built here is cgroup v2 with an eBPF device filter per rank (``bpfdev.py``): it needs a root
agent (``CAP_SYS_ADMIN``), a cgroup v2 hierarchy, a writable (delegated) folder in it and the
NVIDIA driver's device nodes. Where any is missing the agent says why, once, and the fence
left is the violation check (``agent/supervisor/violations.py``). docs/security.md.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .bpfdev import BpfError, device_filter_program, load_device_filter
from .devices import NodeDevices

CONFINE_SETTINGS = ("auto", "off", "required")
"""``[supervisor] confine``: confine where possible, never, or refuse to start the agent without it."""
CGROUP_BPF = "cgroup2-bpf"
NONE = "none"
RANKS_FOLDER = "labgang.ranks"
CAP_SYS_ADMIN = 21


@dataclass(frozen=True, slots=True)
class HostFacts:
    """What :func:`decide` looks at.

    Attributes:
        simulated: the NVML backend is simulated (no device nodes behind its GPUs).
        cap_sys_admin: the agent holds ``CAP_SYS_ADMIN`` (``CapEff`` bit 21).
        cgroup2_mount: where the cgroup v2 hierarchy is mounted, or None (cgroup v1 only).
        own_cgroup: the agent's cgroup v2 path (``0::/…`` of ``/proc/self/cgroup``), or None.
        ranks_dir: the folder ranks' cgroups go in (``cgroup_root`` or the agent's cgroup
            + ``labgang.ranks``), or None when there is no cgroup v2 hierarchy.
        ranks_dir_error: why ``ranks_dir`` could not be made, or None when it exists.
        has_nvidia_majors: ``/proc/devices`` lists the NVIDIA driver's frontend major.
        bpf_error: why the kernel refused a device filter, or None when it loaded one.
    """

    simulated: bool
    cap_sys_admin: bool
    cgroup2_mount: str | None
    own_cgroup: str | None
    ranks_dir: str | None
    ranks_dir_error: str | None
    has_nvidia_majors: bool
    bpf_error: str | None


@dataclass(frozen=True, slots=True)
class Confinement:
    """How this agent fences ranks: ``mode`` ``"cgroup2-bpf"`` (``ranks_dir`` set) or ``"none"``;
    ``reason`` says why in one line (shown at start-up and in ``labgang nodes``)."""

    mode: str
    reason: str
    ranks_dir: str | None = None

    @property
    def confined(self) -> bool:
        """True when ranks get a device filter."""
        return self.mode == CGROUP_BPF

    def to_dict(self) -> dict[str, Any]:
        """The ``confinement`` field of the agent's hello: ``{"mode", "reason"}``."""
        return {"mode": self.mode, "reason": self.reason}


def decide(setting: str, facts: HostFacts) -> Confinement:
    """Choose how to confine ranks (first missing condition wins; see the module docstring).

    Args:
        setting: ``[supervisor] confine``: ``auto``, ``off`` or ``required`` (``required``
            decides like ``auto``; the caller refuses to start when the answer is ``none``).
        facts: what :func:`probe_host` found.

    Raises:
        ValueError: ``setting`` is not one of :data:`CONFINE_SETTINGS`.
    """
    if setting not in CONFINE_SETTINGS:
        raise ValueError(f"confine: {setting!r} is not a setting (allowed: {', '.join(CONFINE_SETTINGS)})")
    if setting == "off":
        return Confinement(NONE, "turned off (confine = off in the agent config)")
    if facts.simulated:
        return Confinement(NONE, "simulated GPUs have no device nodes to fence")
    if not facts.cap_sys_admin:
        return Confinement(NONE, "the agent lacks CAP_SYS_ADMIN, which attaching an eBPF device filter needs")
    if facts.cgroup2_mount is None:
        return Confinement(NONE, "no cgroup v2 hierarchy is mounted (cgroup v1 only)")
    if facts.ranks_dir is None or facts.ranks_dir_error is not None:
        where = facts.ranks_dir or f"{facts.cgroup2_mount} (agent's cgroup unknown)"
        return Confinement(
            NONE, f"cgroup {where} is not writable ({facts.ranks_dir_error}); delegate it (Delegate=yes)"
        )
    if not facts.has_nvidia_majors:
        return Confinement(NONE, "no NVIDIA device nodes (/proc/devices lists no nvidia-frontend major)")
    if facts.bpf_error is not None:
        return Confinement(NONE, f"the kernel refused an eBPF device filter: {facts.bpf_error}")
    return Confinement(CGROUP_BPF, f"each rank in its own cgroup under {facts.ranks_dir}", facts.ranks_dir)


def _cap_sys_admin(status_text: str) -> bool:
    for line in status_text.splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> CAP_SYS_ADMIN & 1)
    return False


def cgroup2_mount_point(mountinfo_text: str) -> str | None:
    """The first cgroup v2 mount point in ``/proc/self/mountinfo`` text, or None."""
    for line in mountinfo_text.splitlines():
        left, sep, right = line.partition(" - ")
        if sep and right.split()[:1] == ["cgroup2"]:
            fields = left.split()
            if len(fields) >= 5:
                return fields[4].replace("\\040", " ")
    return None


def own_cgroup_path(proc_cgroup_text: str) -> str | None:
    """The cgroup v2 path (``0::/…`` line) of ``/proc/self/cgroup`` text, or None."""
    for line in proc_cgroup_text.splitlines():
        if line.startswith("0::"):
            return line[3:].strip() or "/"
    return None


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def probe_host(
    *,
    simulated: bool,
    cgroup_root: str | None = None,
    proc: str = "/proc",
    make_dir: Callable[[str], None] | None = None,
    try_bpf: Callable[[], str | None] | None = None,
) -> HostFacts:
    """Gather the facts :func:`decide` needs, in :func:`decide`'s order, stopping at the first
    that rules confinement out: the ranks' cgroup folder is made (and ``bpf(2)`` asked) only on a
    host with ``CAP_SYS_ADMIN``, a cgroup v2 hierarchy and the NVIDIA driver's device nodes.

    Args:
        simulated: whether the NVML backend is simulated (nothing else is probed then).
        cgroup_root: ``[supervisor] cgroup_root``, a cgroup v2 folder to put rank cgroups in;
            None: ``labgang.ranks`` inside the agent's own cgroup.
        proc: where procfs is mounted (tests point it at a copy).
        make_dir: makes a folder (default ``os.makedirs(..., exist_ok=True)``).
        try_bpf: loads an empty device filter; returns None or why it failed.
    """
    if simulated:
        return HostFacts(True, False, None, None, None, None, False, None)
    cap = _cap_sys_admin(_read(f"{proc}/self/status"))
    mount = cgroup2_mount_point(_read(f"{proc}/self/mountinfo"))
    own = own_cgroup_path(_read(f"{proc}/self/cgroup"))
    driver = NodeDevices(_majors(proc), {}, {}, {}).frontend_major is not None
    ranks_dir: str | None = None
    if cgroup_root is not None:
        ranks_dir = cgroup_root
    elif mount is not None and own is not None:
        ranks_dir = os.path.normpath(os.path.join(mount, own.lstrip("/"), RANKS_FOLDER))
    facts = HostFacts(False, cap, mount, own, ranks_dir, None, driver, None)
    if not (cap and mount is not None and ranks_dir is not None and driver):
        return facts  # ruled out already: touch nothing
    try:
        (make_dir or (lambda p: os.makedirs(p, exist_ok=True)))(ranks_dir)
    except OSError as exc:
        return dataclasses.replace(facts, ranks_dir_error=exc.strerror or str(exc))
    return dataclasses.replace(facts, bpf_error=(try_bpf or _try_bpf)())


def _majors(proc: str) -> dict[str, int]:
    from .devices import parse_proc_devices

    return parse_proc_devices(_read(f"{proc}/devices"))


def _try_bpf() -> str | None:
    try:
        fd = load_device_filter(device_filter_program((), ()))
    except BpfError as exc:
        return str(exc)
    os.close(fd)
    return None
