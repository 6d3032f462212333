"""Which NVIDIA device nodes a rank may open: the pure translation from device UUIDs to ``(major, minor)``.

The NVIDIA driver's character devices (``/proc/devices`` names them):

* ``nvidia-frontend`` (or ``nvidia``), major 195: ``/dev/nvidiaN`` has minor N, the GPU's
  ``nvmlDeviceGetMinorNumber``; ``/dev/nvidiactl`` is minor 255, ``/dev/nvidia-modeset`` 254.
* ``nvidia-uvm`` (a dynamic major): ``/dev/nvidia-uvm`` (minor 0) and ``/dev/nvidia-uvm-tools`` (1).
* ``nvidia-caps`` (a dynamic major): ``/dev/nvidia-caps/nvidia-capN``, the MIG capabilities. A
  process reaches a MIG device through its GPU's ``/dev/nvidiaN`` plus the ``access`` capability
  of the device's GPU instance and of its compute instance. ``/proc/driver/nvidia-caps/mig-minors``
  maps each capability to its minor, one ``gpu<G>/gi<I>/access <minor>`` or
  ``gpu<G>/gi<I>/ci<C>/access <minor>`` per line (G is the GPU's minor number).

A rank may open its GPUs (for a MIG device: the parent GPU and the two capabilities of its GPU
instance and compute instance) and the control devices; every other device of the majors
``nvidia-frontend`` and ``nvidia-caps`` is denied. docs/security.md describes the fence.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .bpfdev import DeviceRule

NVIDIA_MAJOR = 195
CTL_MINOR = 255
MODESET_MINOR = 254
FRONTEND_NAMES = ("nvidia-frontend", "nvidia")
UVM_NAME = "nvidia-uvm"
CAPS_NAME = "nvidia-caps"


class DeviceNodeError(ValueError):
    """A rank's device cannot be translated to device nodes (its GPU's minor or MIG capability is unknown)."""


@dataclass(frozen=True, slots=True)
class MigPlace:
    """Where a MIG device lives: its parent GPU's UUID, GPU instance id and compute instance id."""

    parent_uuid: str
    gi_id: int
    ci_id: int


@dataclass(frozen=True, slots=True)
class NodeDevices:
    """What the host says about NVIDIA device nodes.

    Attributes:
        majors: character-device majors by driver name, from ``/proc/devices``.
        gpu_minors: GPU UUID → its ``/dev/nvidiaN`` minor (``nvmlDeviceGetMinorNumber``).
        mig: MIG device UUID → :class:`MigPlace`.
        mig_minors: capability name (``gpu0/gi1/access``, ``gpu0/gi1/ci0/access``) → its minor.
    """

    majors: Mapping[str, int]
    gpu_minors: Mapping[str, int]
    mig: Mapping[str, MigPlace]
    mig_minors: Mapping[str, int]

    @property
    def frontend_major(self) -> int | None:
        """The major of ``/dev/nvidiaN`` and ``/dev/nvidiactl``, or None when the driver is not loaded."""
        return next((self.majors[n] for n in FRONTEND_NAMES if n in self.majors), None)

    def guarded_majors(self) -> tuple[int, ...]:
        """Majors whose devices a rank may open only when allowed: the GPUs' and the MIG capabilities'."""
        found = [self.frontend_major, self.majors.get(CAPS_NAME)]
        return tuple(sorted(m for m in found if m is not None))

    def rules_for(self, devices: Iterable[str]) -> tuple[DeviceRule, ...]:
        """The device nodes a rank given ``devices`` (GPU-… and MIG-… UUIDs) may open.

        Raises:
            DeviceNodeError: the driver's frontend major is unknown, a GPU has no known minor
                number, or a MIG device's capabilities are not in ``mig-minors``.
        """
        front = self.frontend_major
        if front is None:
            raise DeviceNodeError("no nvidia-frontend major in /proc/devices: is the NVIDIA driver loaded?")
        rules = {DeviceRule(front, CTL_MINOR), DeviceRule(front, MODESET_MINOR)}
        uvm = self.majors.get(UVM_NAME)
        if uvm is not None:
            rules.add(DeviceRule(uvm, None))  # nvidia-uvm and nvidia-uvm-tools
        caps = self.majors.get(CAPS_NAME)
        for uuid in devices:
            place = self.mig.get(uuid)
            gpu_uuid = place.parent_uuid if place is not None else uuid
            minor = self.gpu_minors.get(gpu_uuid)
            if minor is None:
                raise DeviceNodeError(f"device {uuid}: no minor number known for GPU {gpu_uuid}")
            rules.add(DeviceRule(front, minor))
            if place is None:
                continue
            gi = f"gpu{minor}/gi{place.gi_id}/access"
            ci = f"gpu{minor}/gi{place.gi_id}/ci{place.ci_id}/access"
            if caps is None or gi not in self.mig_minors or ci not in self.mig_minors:
                raise DeviceNodeError(f"MIG device {uuid}: no nvidia-caps minors for {gi} and {ci}")
            rules.add(DeviceRule(caps, self.mig_minors[gi]))
            rules.add(DeviceRule(caps, self.mig_minors[ci]))
        return tuple(sorted(rules, key=lambda r: (r.major, -1 if r.minor is None else r.minor)))


def parse_proc_devices(text: str) -> dict[str, int]:
    """Character-device majors by name from ``/proc/devices`` (the block section is ignored)."""
    majors: dict[str, int] = {}
    in_char = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.endswith(":"):
            in_char = stripped == "Character devices:"
            continue
        parts = stripped.split(None, 1)
        if in_char and len(parts) == 2 and parts[0].isdigit():
            majors.setdefault(parts[1], int(parts[0]))
    return majors


def parse_mig_minors(text: str) -> dict[str, int]:
    """``/proc/driver/nvidia-caps/mig-minors``: capability name → minor (lines ``NAME MINOR``)."""
    found: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            found[parts[0]] = int(parts[1])
    return found
