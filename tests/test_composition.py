"""Issue 23 (items 2-3): the classes that were spread over files by mixin bases are composed of parts.

``SimulatedNvml``, ``Supervisor``, ``Lifecycle`` and ``Coordinator`` inherit from nothing of
labgang's; each holds its parts (STYLE.md 24). A class given a labgang base again fails here.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from labgang.agent.nvml.simgpm import GpmModel
from labgang.agent.nvml.simprocs import ProcessModel
from labgang.agent.nvml.simtopo import TopologyModel
from labgang.agent.nvml.simulated import SimulatedNvml
from labgang.agent.supervisor.ranks import RankTable
from labgang.agent.supervisor.spares import SpareShims
from labgang.agent.supervisor.stopping import RankStopper
from labgang.agent.supervisor.supervisor import Supervisor
from labgang.launcher.coordinator.core import Coordinator
from labgang.launcher.coordinator.dispatch import Dispatcher
from labgang.launcher.lifecycle.dependents import DependencyRules
from labgang.launcher.lifecycle.fencing import FenceRules
from labgang.launcher.lifecycle.gang import GangRules
from labgang.launcher.lifecycle.machine import Lifecycle


@pytest.mark.parametrize(
    "cls",
    [
        SimulatedNvml,
        ProcessModel,
        GpmModel,
        TopologyModel,
        Supervisor,
        RankTable,
        SpareShims,
        RankStopper,
        Lifecycle,
        GangRules,
        DependencyRules,
        FenceRules,
        Coordinator,
        Dispatcher,
    ],
    ids=lambda cls: cls.__name__,
)
def test_no_labgang_base_class(cls: type) -> None:
    labgang_bases = [base.__qualname__ for base in cls.__mro__[1:] if base.__module__.startswith("labgang.")]
    assert labgang_bases == [], f"{cls.__name__} inherits {labgang_bases}: hold them as parts instead"


def test_the_parts_are_held_not_inherited(tmp_path: Path) -> None:
    from labgang.agent.nvml.machine import machine_from_toml
    from labgang.launcher.lifecycle.gang import LifecyclePolicy

    sim = Path(__file__).resolve().parents[1] / "config" / "sim" / "n1-4gpu.toml"
    machine = machine_from_toml(sim.read_text(), str(sim))
    nvml = SimulatedNvml(machine, scan_processes=False)
    assert not hasattr(nvml, "_live_processes") and not hasattr(nvml, "_topo_gpu")  # the parts' own helpers
    policy = LifecyclePolicy(1.0, 1.0, 1.0, 1, 1.0)
    model = Lifecycle(policy)
    assert not hasattr(model, "begin_termination") and not hasattr(model, "after_event")
    sup = Supervisor(tmp_path / "state")
    try:
        assert not hasattr(sup, "begin_term") and not hasattr(sup, "start_shim")
    finally:
        sup.close()


def test_no_class_is_spread_across_modules_by_inheritance() -> None:
    """Every class of agent/, launcher/ and tui/ whose base is a labgang class of another module:
    the base must be an abstract interface (a Protocol, an ABC with abstract methods) or one of the
    frameworks' own ways to extend a type (an exception family, a pydantic schema extended by the
    cluster configuration, a Textual widget's base); anything else is a class spread across files,
    to be composed of parts instead (issue 23 item 3)."""
    import importlib
    import inspect
    import pkgutil

    from pydantic import BaseModel
    from textual.widget import Widget

    modules, idioms, spread = 0, [], []
    for package in ("labgang.agent", "labgang.launcher", "labgang.tui"):
        root = importlib.import_module(package)
        for info in pkgutil.walk_packages(root.__path__, package + "."):
            if info.name.endswith(".__main__"):  # runs the CLI when imported
                continue
            module = importlib.import_module(info.name)
            modules += 1
            for cls in vars(module).values():
                if not inspect.isclass(cls) or cls.__module__ != info.name:
                    continue
                for base in cls.__bases__:
                    if not base.__module__.startswith("labgang.") or base.__module__ == info.name:
                        continue
                    name = f"{cls.__module__}.{cls.__qualname__}({base.__qualname__})"
                    if getattr(base, "_is_protocol", False) or inspect.isabstract(base):
                        continue
                    if issubclass(base, (BaseException, BaseModel, Widget)):
                        idioms.append(name)
                    else:
                        spread.append(name)
    assert modules > 200  # the walk saw the tree
    assert idioms  # the allowed cases are found, so the check above is not vacuous
    assert spread == [], f"compose these of parts instead: {spread}"
