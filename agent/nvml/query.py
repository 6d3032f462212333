"""The one NVML query helper: every NVML error becomes an :class:`Unavailable` field state.

Mapping (NVML return code → ``Unavailable.reason``, nvml.h ``nvmlReturn_t``):

* 3 NOT_SUPPORTED, 13 FUNCTION_NOT_FOUND, and pynvml's ``NVMLLibraryMismatchError``
  (an unversioned call whose symbol the driver lacks) → ``"unsupported"``;
* 4 NO_PERMISSION → ``"no_permission"``;
* 15 GPU_IS_LOST → ``"gpu_lost"``;
* anything else → ``"error"`` with the code.

Expected gaps (NOT_SUPPORTED per field, FUNCTION_NOT_FOUND on older drivers) are logged
once per function name, in a bounded set, never on every poll (nvitop's ``nvmlQuery``
does the same with its ``UNKNOWN_FUNCTIONS`` cache).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from labgang.agent.inventory import Unavailable

if TYPE_CHECKING:
    from labgang.agent.nvml.backend import NvmlBackend

log = logging.getLogger("labgang.agent.nvml")

NOT_SUPPORTED = 3
NO_PERMISSION = 4
NOT_FOUND = 6
INVALID_ARGUMENT = 2
FUNCTION_NOT_FOUND = 13
GPU_IS_LOST = 15
NVML_ERROR_UNKNOWN = 999

_LOG_ONCE_LIMIT = 1024
_logged: OrderedDict[tuple[str, int], None] = OrderedDict()


def reason_for(code: int | None) -> str:
    """The ``Unavailable.reason`` for an NVML return code (see the module docstring)."""
    if code in (NOT_SUPPORTED, FUNCTION_NOT_FOUND):
        return "unsupported"
    if code == NO_PERMISSION:
        return "no_permission"
    if code == GPU_IS_LOST:
        return "gpu_lost"
    return "error"


def _log_once(func: str, code: int, text: str) -> None:
    key = (func, code)
    if key in _logged:
        return
    _logged[key] = None
    if len(_logged) > _LOG_ONCE_LIMIT:
        _logged.popitem(last=False)
    if code in (NOT_FOUND, INVALID_ARGUMENT):
        level = logging.DEBUG  # empty MIG slots, no samples yet: normal
    elif code in (NOT_SUPPORTED, FUNCTION_NOT_FOUND):
        level = logging.INFO
    else:
        level = logging.WARNING
    log.log(level, "NVML %s: %s (code %d); reported as unavailable", func, text, code)


def logged_once() -> frozenset[tuple[str, int]]:
    """The (function, code) pairs logged so far (bounded to 1024 entries)."""
    return frozenset(_logged)


def to_unavailable(backend: NvmlBackend, func: str, exc: BaseException) -> Unavailable:
    """Turn an exception raised by ``backend.<func>`` into an :class:`Unavailable`.

    Raises:
        BaseException: ``exc`` itself when it is neither an ``NVMLError`` nor pynvml's
            ``NVMLLibraryMismatchError`` (a programming error must not be hidden).
    """
    if isinstance(exc, backend.NVMLError):
        code = getattr(exc, "value", NVML_ERROR_UNKNOWN)
        try:
            text = str(exc)
        except Exception:  # str() may call into a library that is gone
            text = f"NVML Error with code {code}"
        _log_once(func, code, text)
        return Unavailable(reason_for(code), code)
    mismatch = getattr(backend, "NVMLLibraryMismatchError", None)
    if mismatch is not None and isinstance(exc, mismatch):
        _log_once(func, FUNCTION_NOT_FOUND, str(exc))
        return Unavailable("unsupported", FUNCTION_NOT_FOUND)
    raise exc


def query(backend: NvmlBackend, func: str, *args: Any, **kwargs: Any) -> Any:
    """Call ``backend.<func>(*args, **kwargs)``; return its answer or an :class:`Unavailable`.

    ``bytes`` answers (nvidia-ml-py < 11.515) are decoded to ``str``. A function the
    bindings do not have at all is ``Unavailable("unsupported", 13)``.

    Args:
        backend: pynvml, a SimulatedNvml, a replay or a recorder.
        func: pynvml function name, e.g. ``"nvmlDeviceGetPowerUsage"``.

    Returns:
        The answer, or ``Unavailable`` for any NVML error.
    """
    fn = getattr(backend, func, None)
    if fn is None:
        _log_once(func, FUNCTION_NOT_FOUND, "not in these NVML bindings")
        return Unavailable("unsupported", FUNCTION_NOT_FOUND)
    try:
        value = fn(*args, **kwargs)
    except Exception as exc:  # narrowed in to_unavailable, which re-raises non-NVML errors
        return to_unavailable(backend, func, exc)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


__all__ = ["logged_once", "query", "reason_for", "to_unavailable"]
