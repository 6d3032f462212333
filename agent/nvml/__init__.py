"""The one seam between labgang and NVML.

``agent/nvml/`` is the only package that imports ``pynvml`` (from nvidia-ml-py).
:func:`open_backend` returns an initialised backend object exposing the pynvml
function names, constants and ``NVMLError`` classes:

* the real ``pynvml`` module (NVIDIA driver present);
* a :class:`~labgang.agent.nvml.simulated.SimulatedNvml` loaded from a machine
  file, an ``nvidia-smi`` capture or a recorder JSON (``simulate=FILE``);
* either of those wrapped in a :class:`~labgang.agent.nvml.recorder.Recorder`
  that writes every call and its answer to JSON (``record=FILE``).

Callers finish with ``backend.nvmlShutdown()`` (the recorder writes its file then).
"""

from __future__ import annotations

from pathlib import Path

from labgang.agent.nvml.backend import NvmlBackend

NO_DRIVER_MESSAGE = (
    "NVML is not available: {detail} (the NVIDIA driver's libnvidia-ml.so.1 could not be used); "
    "to run without a GPU, pass --simulate FILE, e.g. --simulate config/sim/h100x8.toml"
)


class NvmlUnavailable(RuntimeError):
    """NVML cannot be initialised on this machine (no driver, library or kernel module).

    The message is one line naming NVML / ``libnvidia-ml.so.1`` and ``--simulate FILE``.
    ``code`` is the NVML error code of the ``nvmlInit`` failure (12 LIBRARY_NOT_FOUND,
    9 DRIVER_NOT_LOADED, 18 LIB_RM_VERSION_MISMATCH, …).
    """

    def __init__(self, detail: str, code: int | None = None) -> None:
        super().__init__(NO_DRIVER_MESSAGE.format(detail=detail))
        self.code = code


def open_backend(
    simulate: str | Path | None = None, record: str | Path | None = None, *, scope: str | None = None
) -> NvmlBackend:
    """Open and initialise an NVML backend.

    Args:
        simulate: a file for the simulated NVML (``config/sim/*.toml``, ``nvidia-smi -q -x``
            XML, ``nvidia-smi -q`` text, ``nvidia-smi -L`` listing, or a recorder JSON;
            the format is detected from the content). None = the real driver.
        record: if given, every NVML call is written with its arguments and answer or
            error to this JSON file when ``nvmlShutdown()`` is called.
        scope: with ``simulate``, the simulated instance's scope (see
            :class:`~labgang.agent.nvml.simulated.SimulatedNvml`): processes tagged
            ``LABGANG_SIM_SCOPE`` with another scope are not reported. Ignored for the real
            driver and for recorder JSON replays (which do not look at processes).

    Returns:
        An initialised backend with the pynvml function names (``nvmlDeviceGetCount``, …).

    Raises:
        NvmlUnavailable: the real NVML could not be initialised (``nvmlInit`` failed).
        ValueError: ``simulate`` names a file whose format is not recognised or is invalid
            (the message names the file and the field).
        FileNotFoundError: ``simulate`` does not exist.
    """
    if simulate is not None:
        from labgang.agent.nvml.simulated import SimulatedNvml

        backend: NvmlBackend = SimulatedNvml.from_file(simulate, scope=scope)
    else:
        import pynvml

        backend = pynvml
    if record is not None:
        from labgang.agent.nvml.recorder import Recorder

        backend = Recorder(backend, record)
    try:
        backend.nvmlInit()
    except backend.NVMLError as exc:
        if simulate is not None:
            raise
        raise NvmlUnavailable(_describe(exc), getattr(exc, "value", None)) from None
    return backend


def _describe(exc: Exception) -> str:
    try:
        text = str(exc)
    except Exception:  # pynvml's str() may need the library it failed to load
        text = f"NVML Error with code {getattr(exc, 'value', '?')}"
    return f"nvmlInit failed with {type(exc).__name__} ({text})"


__all__ = ["NO_DRIVER_MESSAGE", "NvmlBackend", "NvmlUnavailable", "open_backend"]
