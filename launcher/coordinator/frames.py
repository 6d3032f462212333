"""The agent link's frames as typed values: every text frame an agent sends is parsed here
before anything acts on it (:mod:`.link`).

A frame of the wrong shape (not JSON, a list or string where an object belongs, a missing
``uid`` on a forwarded request, a body that is not base64) raises :class:`ProtocolError`
with one line naming the field; the link logs that line and closes the connection (code
4400). A real agent never sends one: it is a bug or a hostile peer, and never a traceback.
The message kinds are described in :mod:`.agents`.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from typing import Any


class ProtocolError(ValueError):
    """A frame that does not follow the agent link's contract; ``str()`` is one line."""


@dataclass(frozen=True, slots=True)
class Hello:
    """The first frame of a link: who the agent is.

    Attributes:
        node: the node's name (non-empty).
        version: the agent's version ("" when it sent none).
        address: the address its ranks are reached at (None: the peer address).
        policy: the agent's uid policy facts, or None.
        confinement: its confinement facts, or None.
        host_limits: whether it enforces ranks' CPUs and memory (``{"enforced", "reason"}``), or None.
        violations: its current device violations (a list, or None when it sent none).
        message: the whole frame, for the parts the coordinator reconciles (``inventory``,
            ``ranks``), their shapes checked here.
    """

    node: str
    version: str
    address: str | None
    policy: dict[str, Any] | None
    confinement: dict[str, Any] | None
    violations: list[Any] | None
    message: dict[str, Any] = field(repr=False)
    host_limits: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Reply:
    """An answer to a command the coordinator sent (``message``: id, ok, result or error)."""

    message: dict[str, Any] = field(repr=False)


@dataclass(frozen=True, slots=True)
class Inventory:
    """A fresh inventory (and the ranks the agent supervises) to reconcile."""

    violations: list[Any] | None
    message: dict[str, Any] = field(repr=False)


@dataclass(frozen=True, slots=True)
class RankEvents:
    """Rank events to apply and acknowledge.

    Attributes:
        events: one object per event (job_id, rank, kind, ...).
        seq: the agent's sequence number, echoed in the ``ack``.
        inventory: the inventory taken before the events, or None.
        violations: current device violations, or None.
        sharing: how the node serves shares (``{"mps", "gpu_mem"}``), sent with the inventory, or None.
    """

    events: list[dict[str, Any]]
    seq: Any
    inventory: dict[str, Any] | None
    violations: list[Any] | None
    sharing: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class ApiRequest:
    """A user request the agent forwards from its node's socket, with the caller's uid.

    Attributes:
        id: the agent's request id, echoed in the ``api_reply``.
        uid: the caller's uid (>= 0), as the agent's socket saw it.
        method: HTTP method.
        path: request path (``/v1/...``).
        query: query parameters.
        body: the request body, decoded from base64.
    """

    id: Any
    uid: int
    method: str
    path: str
    query: dict[str, str]
    body: bytes


@dataclass(frozen=True, slots=True)
class Ping:
    """A keep-alive."""


@dataclass(frozen=True, slots=True)
class Lease:
    """A lease renewal; ``id`` is echoed in the answer."""

    id: Any


@dataclass(frozen=True, slots=True)
class Unknown:
    """A frame of a type this coordinator does not know (a newer agent): logged and ignored."""

    kind: Any


Frame = Reply | Inventory | RankEvents | ApiRequest | Ping | Lease | Unknown


def decode(text: str | bytes) -> dict[str, Any]:
    """A text frame's JSON object.

    Raises:
        ProtocolError: not JSON, or JSON that is not an object.
    """
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ProtocolError(f"a frame is not JSON ({type(exc).__name__})") from None
    return _object(data, "frame")


def parse_hello(data: Any) -> Hello:
    """The ``hello`` frame.

    Raises:
        ProtocolError: not an object, ``type`` is not "hello", no node name, or a field of the wrong type.
    """
    msg = _object(data, "hello")
    if msg.get("type") != "hello":
        raise ProtocolError(f"expected a hello frame, got type {_shown(msg.get('type'))}")
    node = msg.get("node")
    if not isinstance(node, str) or not node:
        raise ProtocolError("hello.node must be a non-empty string")
    _optional(msg, "inventory", dict, "hello")
    _list_of_objects(msg, "ranks", "hello")
    return Hello(
        node=node,
        version=_optional(msg, "version", str, "hello") or "",
        address=_optional(msg, "address", str, "hello") or None,
        policy=msg.get("policy") if isinstance(msg.get("policy"), dict) else None,
        confinement=msg.get("confinement") if isinstance(msg.get("confinement"), dict) else None,
        violations=_optional(msg, "violations", list, "hello"),
        message=msg,
        host_limits=msg.get("host_limits") if isinstance(msg.get("host_limits"), dict) else None,
    )


def parse_frame(data: Any) -> Frame:
    """One frame after ``hello``.

    Raises:
        ProtocolError: not an object, or a field of its type missing or of the wrong type.
    """
    msg = _object(data, "frame")
    kind = msg.get("type")
    if kind == "reply":
        return Reply(msg)
    if kind == "inventory":
        _optional(msg, "inventory", dict, "inventory")
        _list_of_objects(msg, "ranks", "inventory")
        return Inventory(_optional(msg, "violations", list, "inventory"), msg)
    if kind == "rank_events":
        return RankEvents(
            events=_list_of_objects(msg, "events", "rank_events"),
            seq=msg.get("seq"),
            inventory=_optional(msg, "inventory", dict, "rank_events"),
            violations=_optional(msg, "violations", list, "rank_events"),
            sharing=_optional(msg, "sharing", dict, "rank_events"),
        )
    if kind == "api":
        return _api(msg)
    if kind == "ping":
        return Ping()
    if kind == "lease":
        return Lease(msg.get("id"))
    return Unknown(kind)


def _api(msg: dict[str, Any]) -> ApiRequest:
    uid = msg.get("uid")
    if not isinstance(uid, int) or isinstance(uid, bool) or uid < 0:
        raise ProtocolError(f"api.uid must be an integer >= 0, got {_shown(uid)}")
    method, path = msg.get("method"), msg.get("path")
    if not isinstance(method, str) or not method:
        raise ProtocolError(f"api.method must be a non-empty string, got {_shown(method)}")
    if not isinstance(path, str) or not path.startswith("/"):
        raise ProtocolError(f"api.path must be a string starting with /, got {_shown(path)}")
    query = _optional(msg, "query", dict, "api") or {}
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in query.items()):
        raise ProtocolError("api.query must map strings to strings")
    body = _optional(msg, "body", str, "api") or ""
    try:
        raw = base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        raise ProtocolError("api.body is not base64") from None
    return ApiRequest(msg.get("id"), uid, method, path, query, raw)


def _object(data: Any, what: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ProtocolError(f"a {what} must be a JSON object, got {_kind(data)}")
    return data


def _optional(msg: dict[str, Any], key: str, kind: type, what: str) -> Any:
    value = msg.get(key)
    if value is not None and not isinstance(value, kind):
        raise ProtocolError(f"{what}.{key} must be {_article(kind)} or null, got {_kind(value)}")
    return value


def _list_of_objects(msg: dict[str, Any], key: str, what: str) -> list[dict[str, Any]]:
    value = _optional(msg, key, list, what) or []
    if not all(isinstance(item, dict) for item in value):
        raise ProtocolError(f"{what}.{key} must be a list of objects")
    return value


_ARTICLES: dict[type, str] = {dict: "an object", list: "a list", str: "a string"}


def _article(kind: type) -> str:
    return _ARTICLES.get(kind, kind.__name__)


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
