"""Record every NVML call with its arguments and answer or error; replay such a record.

``labgang nodes --local --record FILE`` wraps the backend in a :class:`Recorder`; the
JSON it writes (on ``nvmlShutdown`` or :meth:`Recorder.save`) is how a capture from a
real GPU becomes a CI fixture. ``--simulate FILE`` detects the record by its content and
serves it through :class:`ReplayNvml`, which answers each call with the recorded answer
for the same function and arguments, in order, so a read replayed with the same code
gives the same snapshot as the live read.

Record schema (``"format": "labgang-nvml-record"``, ``"version": 1``)::

    {"format": ..., "version": 1, "hostname": str, "created": unix seconds,
     "bindings": "nvidia-ml-py version", "calls": [
        {"fn": "nvmlDeviceGetPowerUsage", "args": [{"handle": "h1"}], "kwargs": {},
         "result": 69850}                         # or "error": <NVML code>
                                                  # or "mismatch": "<NVMLLibraryMismatchError text>"
     ]}

Values: handles are ``{"handle": "hN"}``, GPM samples ``{"sample": "sN"}``, ctypes
structs ``{"struct": {field: value}}``, ``nvmlFriendlyObject`` rows ``{"object": {...}}``,
``c_uint`` answers ``{"c_uint": n}``, tuples ``{"tuple": [...]}``; a
``nvmlGpmMetricsGet`` request is ``{"metrics_get": {"sample1", "sample2", "ids"}}`` and its
answer ``{"metrics": [[id, nvmlReturn, value], ...]}``.
"""

from __future__ import annotations

import ctypes
import json
import socket
import time
from collections import defaultdict
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import pynvml
from labgang.agent.nvml.backend import NvmlBackend
from labgang.agent.nvml.formats import RECORD_FORMAT
from labgang.agent.nvml.simulated import VirtualClock

RECORD_VERSION = 1
_HANDLE_FUNCS = {
    "nvmlDeviceGetHandleByIndex",
    "nvmlDeviceGetHandleByUUID",
    "nvmlDeviceGetHandleByPciBusId",
    "nvmlDeviceGetMigDeviceHandleByIndex",
    "nvmlDeviceGetDeviceHandleFromMigDeviceHandle",
}


def _bindings_version() -> str:
    try:
        return version("nvidia-ml-py")
    except PackageNotFoundError:
        return "unknown"


def _plain(value: Any) -> Any:
    """A ctypes/pynvml value as JSON (see the module docstring)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, (ctypes.c_uint, ctypes.c_int, ctypes.c_ulonglong, ctypes.c_ulong)):
        return {"c_uint": int(value.value)}
    if isinstance(value, ctypes.Structure):
        out = {}
        for item in value._fields_:
            name = item[0]
            field = getattr(value, name)
            if isinstance(field, ctypes._Pointer) or callable(field):
                continue
            out[name] = _plain(field)
        return {"struct": out}
    if isinstance(value, ctypes.Array):
        return [_plain(v) for v in value]
    if isinstance(value, pynvml.nvmlFriendlyObject):
        return {"object": {k: _plain(v) for k, v in vars(value).items()}}
    if isinstance(value, tuple):
        return {"tuple": [_plain(v) for v in value]}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return {"repr": repr(value)}


def _sample_token(sample: Any, samples: dict[int, str]) -> str:
    """The recorded token of a GPM sample buffer (``"unknown"`` for one never allocated here)."""
    return samples.get(ctypes.addressof(sample.contents), "unknown")


def _gpm_arg(value: Any, samples: dict[int, str]) -> dict[str, Any] | None:
    """A GPM sample buffer or metrics request as JSON (samples named by their recorded token),
    or None when ``value`` is neither (``nvmlGpmSampleGet``/``nvmlGpmMetricsGet`` arguments)."""
    if isinstance(value, ctypes._Pointer) and type(value) is pynvml.c_nvmlGpmSample_t:
        return {"sample": _sample_token(value, samples)}
    if isinstance(value, pynvml.c_nvmlGpmMetricsGet_t):
        return {
            "metrics_get": {
                "sample1": _sample_token(value.sample1, samples),
                "sample2": _sample_token(value.sample2, samples),
                "ids": [int(value.metrics[i].metricId) for i in range(int(value.numMetrics))],
            }
        }
    return None


class Recorder:
    """Wraps a backend; every ``nvml*`` call and its answer or error is kept and written as JSON.

    Args:
        backend: the backend to record (``pynvml`` or a ``SimulatedNvml``).
        path: the JSON file written by :meth:`save` (called by ``nvmlShutdown``).
    """

    def __init__(self, backend: NvmlBackend, path: str | Path):
        self._backend = backend
        self._path = Path(path)
        self._calls: list[dict[str, Any]] = []
        self._handles: dict[int, tuple[Any, str]] = {}
        self._samples: dict[int, str] = {}
        self._counter = 0
        self.labgang_hostname = getattr(backend, "labgang_hostname", None) or socket.gethostname()

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._backend, name)
        if name.startswith("nvml") and callable(value) and not isinstance(value, type):
            return self._wrap(name, value)
        return value

    @property
    def calls(self) -> list[dict[str, Any]]:
        """The calls recorded so far (JSON-ready dicts)."""
        return list(self._calls)

    def save(self) -> Path:
        """Write the record to the file given at construction; returns its path."""
        data = {
            "format": RECORD_FORMAT,
            "version": RECORD_VERSION,
            "hostname": self.labgang_hostname,
            "created": time.time(),
            "bindings": _bindings_version(),
            "calls": self._calls,
        }
        self._path.parent.mkdir(parents=True, exist_ok=True)
        self._path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        return self._path

    def _token(self, prefix: str) -> str:
        self._counter += 1
        return f"{prefix}{self._counter}"

    def _arg(self, value: Any) -> Any:
        known = self._handles.get(id(value))
        if known is not None and known[0] is value:
            return {"handle": known[1]}
        gpm = _gpm_arg(value, self._samples)
        return gpm if gpm is not None else _plain(value)

    def _wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            entry: dict[str, Any] = {
                "fn": name,
                "args": [self._arg(a) for a in args],
                "kwargs": {k: self._arg(v) for k, v in sorted(kwargs.items())},
            }
            self._calls.append(entry)
            try:
                result = fn(*args, **kwargs)
            except pynvml.NVMLError as exc:
                entry["error"] = int(exc.value)
                if name == "nvmlShutdown":
                    self.save()
                raise
            except pynvml.NVMLLibraryMismatchError as exc:
                entry["mismatch"] = str(exc)
                raise
            if name in _HANDLE_FUNCS:
                token = self._token("h")
                self._handles[id(result)] = (result, token)
                entry["result"] = {"handle": token}
            elif name == "nvmlGpmSampleAlloc":
                token = self._token("s")
                self._samples[ctypes.addressof(result.contents)] = token
                entry["result"] = {"sample": token}
            elif name in ("nvmlGpmSampleGet", "nvmlGpmMigSampleGet"):
                entry["result"] = self._arg(result)
            elif name == "nvmlGpmMetricsGet":
                entry["result"] = {
                    "metrics": [
                        [
                            int(result.metrics[i].metricId),
                            int(result.metrics[i].nvmlReturn),
                            float(result.metrics[i].value),
                        ]
                        for i in range(int(result.numMetrics))
                    ]
                }
            else:
                entry["result"] = _plain(result)
            if name == "nvmlShutdown":
                self.save()
            return result

        call.__name__ = name
        return call


class ReplayStruct:
    """A recorded ctypes struct: its fields as attributes (read-only by convention)."""

    def __init__(self, fields: dict[str, Any]):
        self.__dict__.update(fields)

    def __repr__(self) -> str:
        return f"ReplayStruct({self.__dict__!r})"


class ReplayHandle:
    """A handle from a record: distinct per call, equal only to itself, unhashable."""

    __slots__ = ("token",)
    __hash__ = None  # type: ignore[assignment]  # unhashable like pynvml's handles; typeshed wants a method

    def __init__(self, token: str):
        self.token = token

    def __eq__(self, other: object) -> bool:
        return self is other

    def __repr__(self) -> str:
        return f"<replayed NVML handle {self.token}>"


class ReplayNvml:
    """Serves a recorded NVML session through pynvml's function names.

    A call is answered with the next recorded answer for the same function and arguments
    (the last one repeats); recorded errors are raised as the same ``NVMLError`` subclass.
    A call never recorded raises ``NVMLError_NotSupported``. A function never recorded does
    not exist on the replay (as on bindings that lack it). GPM waits use a virtual clock.

    Args:
        data: the parsed record.
        source: file name for messages.

    Raises:
        ValueError: the record's format or version is not supported.
    """

    def __init__(self, data: dict[str, Any], source: str = ""):
        if data.get("format") != RECORD_FORMAT or data.get("version") != RECORD_VERSION:
            raise ValueError(f"{source}: not a labgang NVML record version {RECORD_VERSION}")
        calls = data.get("calls")
        if not isinstance(calls, list):
            raise ValueError(f"{source}: calls: expected a list of recorded calls")
        self.source = source
        self.labgang_hostname = str(data.get("hostname") or "replay")
        clock = VirtualClock()
        self.labgang_clock = clock
        self.labgang_sleep = clock.sleep
        self._answers: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        self._position: dict[tuple[str, str], int] = defaultdict(int)
        self._functions = {c["fn"] for c in calls}
        for call in calls:
            if call["fn"] in ("nvmlInit", "nvmlInitWithFlags", "nvmlShutdown"):
                continue
            self._answers[(call["fn"], self._key(call["args"], call.get("kwargs", {})))].append(call)
        self._samples: dict[int, str] = {}
        self._sample_refs: list[Any] = []
        self._init_count = 0

    @staticmethod
    def _key(args: list[Any], kwargs: dict[str, Any]) -> str:
        return json.dumps([args, kwargs], sort_keys=True)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("nvml") and name in self.__dict__.get("_functions", ()):
            return lambda *args, **kwargs: self._replay(name, args, kwargs)
        raise AttributeError(name)

    def nvmlInit(self) -> None:
        """Start the replayed session (reference-counted like NVML)."""
        self._init_count += 1

    def nvmlInitWithFlags(self, flags: int) -> None:
        """Start the replayed session; flags are ignored."""
        self._init_count += 1

    def nvmlShutdown(self) -> None:
        """End the replayed session; ``Uninitialized`` when not started."""
        if self._init_count <= 0:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)
        self._init_count -= 1

    def _arg(self, value: Any) -> Any:
        if isinstance(value, ReplayHandle):
            return {"handle": value.token}
        gpm = _gpm_arg(value, self._samples)
        return gpm if gpm is not None else _plain(value)

    def _replay(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self._init_count <= 0:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)
        key = (name, self._key([self._arg(a) for a in args], {k: self._arg(v) for k, v in sorted(kwargs.items())}))
        answers = self._answers.get(key)
        if not answers:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        position = self._position[key]
        self._position[key] = position + 1
        call = answers[min(position, len(answers) - 1)]
        if "error" in call:
            raise pynvml.NVMLError(int(call["error"]))
        if "mismatch" in call:
            raise pynvml.NVMLLibraryMismatchError(call["mismatch"])
        result = call.get("result")
        if name == "nvmlGpmMetricsGet":
            request = args[0]
            for i, (metric_id, code, value) in enumerate(call["result"]["metrics"]):
                request.metrics[i].metricId = metric_id
                request.metrics[i].nvmlReturn = code
                request.metrics[i].value = value
            return request
        if name in ("nvmlGpmSampleGet", "nvmlGpmMigSampleGet"):
            return args[-1]
        return self._value(result)

    def _value(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self._value(v) for v in value]
        if not isinstance(value, dict):
            return value
        if "handle" in value:
            return ReplayHandle(value["handle"])
        if "sample" in value:
            sample = pynvml.c_nvmlGpmSample_t(pynvml.struct_c_nvmlGpmSample_t())
            self._samples[ctypes.addressof(sample.contents)] = value["sample"]
            self._sample_refs.append(sample)
            return sample
        if "struct" in value:
            return ReplayStruct({k: self._value(v) for k, v in value["struct"].items()})
        if "object" in value:
            return pynvml.nvmlFriendlyObject({k: self._value(v) for k, v in value["object"].items()})
        if "c_uint" in value:
            return ctypes.c_uint(value["c_uint"])
        if "tuple" in value:
            return tuple(self._value(v) for v in value["tuple"])
        return value


def _export_pynvml_names(cls: type) -> None:
    for name in dir(pynvml):
        value = getattr(pynvml, name)
        if name.startswith("_") or hasattr(cls, name):
            continue
        if name.startswith("nvml") and callable(value) and not isinstance(value, type):
            continue
        if name.startswith(("NVML", "nvml", "c_nvml", "struct_c_nvml")):
            setattr(cls, name, value)


_export_pynvml_names(ReplayNvml)

__all__ = ["RECORD_VERSION", "Recorder", "ReplayHandle", "ReplayNvml", "ReplayStruct"]
