"""systemd readiness notification (``Type=notify``) without a C library.

systemd passes the path of a datagram socket in ``$NOTIFY_SOCKET`` to a service
with ``Type=notify``; the service sends newline-separated ``KEY=VALUE``
assignments there (``READY=1``, ``STOPPING=1``, ``STATUS=...``). A path starting
with ``@`` names a socket in the abstract namespace (Linux). The protocol is
documented in ``sd_notify(3)``; this module implements only the datagram part
(no file-descriptor passing), which is all labgang needs.

Outside systemd ``$NOTIFY_SOCKET`` is unset and every call is a cheap no-op,
so the coordinator and the agent call :func:`ready` unconditionally.

The rank processes an agent starts must not inherit ``$NOTIFY_SOCKET`` (with
``NotifyAccess=main`` systemd would ignore them anyway); pass
``unset_environment=True`` on the first call, as ``sd_notify(3)`` allows.
"""

from __future__ import annotations

import os
import socket

NOTIFY_SOCKET_ENV = "NOTIFY_SOCKET"


def notify_address(value: str | None) -> str | bytes | None:
    """Turn a ``$NOTIFY_SOCKET`` value into a ``socket.sendto`` address.

    Args:
        value: the environment value; ``None`` or ``""`` when unset.

    Returns:
        ``None`` when there is nothing to notify; the path as ``str`` for a
        filesystem socket; ``bytes`` starting with NUL for an abstract socket
        (``"@name"`` → ``b"\\0name"``).

    Raises:
        ValueError: the value is neither an absolute path nor ``@name`` (for
            example ``vsock:`` addresses, which labgang does not support).
    """
    if not value:
        return None
    if value.startswith("@"):
        return b"\0" + value[1:].encode()
    if value.startswith("/"):
        return value
    raise ValueError(f"{NOTIFY_SOCKET_ENV}={value!r}: expected an absolute socket path or '@abstract-name'")


def notify(*assignments: str, unset_environment: bool = False) -> bool:
    """Send ``KEY=VALUE`` assignments to the service manager in one datagram.

    Args:
        *assignments: lines such as ``"READY=1"`` or ``"STATUS=serving on :7420"``;
            none may contain a newline.
        unset_environment: remove ``$NOTIFY_SOCKET`` from this process's
            environment afterwards, so children do not inherit it.

    Returns:
        True when a datagram was sent; False when ``$NOTIFY_SOCKET`` is unset
        (not running under systemd ``Type=notify``).

    Raises:
        ValueError: no assignment, an assignment without ``=``, or with a newline;
            or an unsupported ``$NOTIFY_SOCKET`` value.
        OSError: the socket exists but the datagram could not be sent.
    """
    if not assignments:
        raise ValueError("notify: give at least one KEY=VALUE assignment")
    for line in assignments:
        if "=" not in line or "\n" in line:
            raise ValueError(f"notify: {line!r} is not a single-line KEY=VALUE assignment")
    address = notify_address(os.environ.get(NOTIFY_SOCKET_ENV))
    if unset_environment:
        os.environ.pop(NOTIFY_SOCKET_ENV, None)
    if address is None:
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
        sock.sendto("\n".join(assignments).encode(), address)
    return True


def ready(status: str | None = None, *, unset_environment: bool = False) -> bool:
    """Tell systemd the service is ready to serve (``READY=1``), with an optional status line.

    Call it once the listening sockets are bound (coordinator) or the node
    state has been recovered (agent): ``systemctl start`` returns then.

    Returns:
        True when systemd was notified; False outside ``Type=notify``.
    """
    lines = ["READY=1"] + ([f"STATUS={status}"] if status else [])
    return notify(*lines, unset_environment=unset_environment)


def stopping(status: str | None = None) -> bool:
    """Tell systemd the service is shutting down (``STOPPING=1``).

    Returns:
        True when systemd was notified; False outside ``Type=notify``.
    """
    lines = ["STOPPING=1"] + ([f"STATUS={status}"] if status else [])
    return notify(*lines)


def status(text: str) -> bool:
    """Set the one-line status ``systemctl status`` shows (``STATUS=...``).

    Returns:
        True when systemd was notified; False outside ``Type=notify``.
    """
    return notify(f"STATUS={text}")
