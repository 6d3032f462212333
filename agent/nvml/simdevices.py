"""The devices of a simulated machine as NVML calls see them: handles, UUID look-up, the checks of every call.

:class:`SimDevices` is the part :class:`~labgang.agent.nvml.simulated.SimulatedNvml` and its
process, GPM and topology models (:mod:`~labgang.agent.nvml.simprocs`,
:mod:`~labgang.agent.nvml.simgpm`, :mod:`~labgang.agent.nvml.simtopo`) share: it turns a
:class:`SimHandle` or a UUID into the simulated GPU (and MIG device) it names, failing with the
``NVMLError`` codes the real driver gives (uninitialised, missing symbol, lost GPU, per-GPU
injected errors, stale MIG handles).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

import pynvml

if TYPE_CHECKING:  # machine.py imports simtopo.py, which imports this module
    from labgang.agent.nvml.machine import SimGpu, SimMachine, SimMigDevice


def fail(code: int) -> NoReturn:
    """Raise pynvml's ``NVMLError`` subclass for ``code`` (an ``NVML_ERROR_*`` value)."""
    raise pynvml.NVMLError(code)


def legacy_mig_uuid(gpu: SimGpu, mig: SimMigDevice) -> str:
    """The pre-R470 MIG UUID form ``MIG-GPU-<gpu uuid>/<gi>/<ci>``."""
    return f"MIG-{gpu.uuid}/{mig.gi_id}/{mig.ci_id}"


class SimHandle:
    """An opaque device handle: a new object per call, equal only to itself, unhashable (like ctypes pointers)."""

    __slots__ = ("generation", "gpu_index", "mig_index")
    __hash__ = None  # type: ignore[assignment]  # unhashable like pynvml's handles; typeshed wants a method

    def __init__(self, gpu_index: int, mig_index: int | None = None, generation: int = 0):
        self.gpu_index = gpu_index
        self.mig_index = mig_index
        self.generation = generation

    def __eq__(self, other: object) -> bool:
        return self is other

    def __repr__(self) -> str:
        kind = "gpu" if self.mig_index is None else f"mig {self.mig_index} of gpu"
        return f"<simulated NVML handle: {kind} {self.gpu_index}>"


class SimDevices:
    """Handle and UUID resolution over one :class:`SimMachine`, with the checks of every NVML call.

    Args:
        machine: the machine whose devices the handles name.
        initialised: whether NVML is initialised now (the backend's ``nvmlInit`` reference count > 0).
    """

    def __init__(self, machine: SimMachine, initialised: Callable[[], bool]) -> None:
        self.machine = machine
        self._initialised = initialised
        self._generation = {gpu.index: 0 for gpu in machine.gpus}

    def generation(self, gpu_index: int) -> int:
        """The MIG layout generation of GPU ``gpu_index``: MIG handles of an older one are stale."""
        return self._generation[gpu_index]

    def new_layout(self, gpu_index: int) -> None:
        """Mark GPU ``gpu_index``'s MIG layout replaced: its MIG handles handed out so far go stale."""
        self._generation[gpu_index] += 1

    def enter(self, fn: str) -> None:
        """The checks of every call: NVML initialised (else ``UNINITIALIZED``), ``fn`` present in this
        driver (else ``FUNCTION_NOT_FOUND``)."""
        if not self._initialised():
            fail(pynvml.NVML_ERROR_UNINITIALIZED)
        if fn in self.machine.missing_functions:
            fail(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)

    def device(self, fn: str, handle: Any) -> tuple[SimGpu, SimMigDevice | None]:
        """:meth:`enter`, then the GPU (and MIG device, else None) ``handle`` names.

        Raises:
            pynvml.NVMLError: ``INVALID_ARGUMENT`` for a foreign or stale handle, ``GPU_IS_LOST``
                for a lost GPU, the GPU's injected error for ``fn``.
        """
        self.enter(fn)
        if not isinstance(handle, SimHandle) or not 0 <= handle.gpu_index < len(self.machine.gpus):
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        gpu = self.machine.gpus[handle.gpu_index]
        if gpu.lost:
            fail(pynvml.NVML_ERROR_GPU_IS_LOST)
        if fn in gpu.errors:
            fail(gpu.errors[fn])
        if handle.mig_index is None:
            return gpu, None
        if handle.generation != self._generation[gpu.index] or not gpu.mig_current:
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        mig = next((m for m in gpu.mig_devices if m.index == handle.mig_index), None)
        if mig is None:
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return gpu, mig

    def by_uuid(self, uuid: str) -> tuple[SimGpu, SimMigDevice | None]:
        """The GPU (and MIG device) with a GPU, ``MIG-…`` or legacy ``MIG-GPU-…/gi/ci`` UUID (any case).

        Raises:
            ValueError: no such device on this machine.
        """
        for gpu in self.machine.gpus:
            if gpu.uuid.lower() == uuid.lower():
                return gpu, None
            for mig in gpu.mig_devices:
                if mig.uuid.lower() == uuid.lower() or legacy_mig_uuid(gpu, mig).lower() == uuid.lower():
                    return gpu, mig
        raise ValueError(f"uuid: {uuid!r} is not a device of simulated machine {self.machine.hostname}")


__all__ = ["SimDevices", "SimHandle", "fail", "legacy_mig_uuid"]
