"""``private_data`` for device processes: another user's command line is not shown (docs/security.md).

An agent reports each device process with its user and command line
(``labgang.agent.procfacts``). Under ``private_data`` (Slurm's ``PrivateData=jobs``) a caller
who is not an admin sees the command lines of their own processes only, as with a job's
``argv``; the read token, whose caller is nobody, sees none. labgang's own MPS servers
(``mps_server`` set by the agent) run labgang's command and are shown to everyone.
"""

from __future__ import annotations

from typing import Any


def hide_commands(node: dict[str, Any], user: str) -> dict[str, Any]:
    """A copy of one ``GET /v1/nodes`` element whose processes of users other than ``user`` have
    ``command`` null; the node itself when it holds no such process (nothing is copied then).

    Args:
        node: a :func:`~labgang.launcher.coordinator.views.node_views` element (not modified).
        user: the caller's login name.
    """
    inv = node.get("inventory")
    if not isinstance(inv, dict) or not any(_foreign(p, user) for p in _processes(inv)):
        return node

    def procs(items: Any) -> Any:
        if not isinstance(items, list):
            return items
        return [{**p, "command": None} if _foreign(p, user) else p for p in items]

    gpus = [
        {
            **g,
            "processes": procs(g.get("processes")),
            **({"mps_processes": procs(g["mps_processes"])} if "mps_processes" in g else {}),
            "mig_devices": [{**m, "processes": procs(m.get("processes"))} for m in g.get("mig_devices") or ()],
        }
        for g in inv.get("gpus") or ()
    ]
    return {**node, "inventory": {**inv, "gpus": gpus}}


def _processes(inv: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for g in inv.get("gpus") or ():
        out.extend(p for p in g.get("processes") or () if isinstance(p, dict))
        out.extend(p for p in g.get("mps_processes") or () if isinstance(p, dict))  # MPS clients
        for m in g.get("mig_devices") or ():
            out.extend(p for p in m.get("processes") or () if isinstance(p, dict))
    return out


def _foreign(p: Any, user: str) -> bool:
    # labgang's own MPS server (mps_server set by the agent) runs labgang's command, nobody's secret
    return isinstance(p, dict) and p.get("command") is not None and p.get("user") != user and not p.get("mps_server")
