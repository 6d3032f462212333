"""What to tell a user when no coordinator answers at a socket: only what is true here.

The advice depends on facts this module checks, never assumes:

* whether labgang's systemd units are installed (:data:`UNIT_DIRS`): only then is
  ``systemctl status labgang-coordinator labgang-agent`` worth running; a ``labgang up``
  instance has none;
* whether the socket's state directory belongs to another user: then ``start one with
  `labgang up``` would be wrong (the caller cannot start labgang in someone else's directory);
  the line names the owner to ask instead;
* whether it is this machine's system instance (:func:`labgang.launcher.api.discovery.is_system_socket`):
  a user is never advised to start a second scheduler over the GPUs it serves.

Only the error path loads this module (the client imports it when raising).
"""

import os

UNIT_DIRS = ("/etc/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system")
"""Where systemd looks for the units ``labgang install`` writes (``labgang-coordinator.service``,
``labgang-agent.service``)."""


def installed_units(unit_dirs: "tuple[str, ...]" = UNIT_DIRS) -> "list[str]":
    """The names of labgang's systemd units installed on this machine (``labgang-coordinator``,
    ``labgang-agent``), in that order; empty when neither is (an instance started with ``labgang up``)."""
    names = ("labgang-coordinator", "labgang-agent")
    return [name for name in names if any(os.path.exists(os.path.join(d, f"{name}.service")) for d in unit_dirs)]


def _owner(directory: str) -> "tuple[int, str] | None":
    """The uid and login name (the uid as text when unknown) of ``directory``'s owner; None when it
    cannot be seen (missing, or a parent the caller may not search)."""
    try:
        uid = os.stat(directory).st_uid
    except OSError:
        return None
    import pwd

    try:
        return uid, pwd.getpwuid(uid).pw_name
    except KeyError:
        return uid, str(uid)


def unanswered_message(socket_path: str, *, system: bool, unit_dirs: "tuple[str, ...]" = UNIT_DIRS) -> str:
    """The one line for a command whose coordinator does not answer at ``socket_path``.

    Args:
        socket_path: the socket tried.
        system: whether it is this machine's system instance's socket.
        unit_dirs: where to look for labgang's systemd units (:data:`UNIT_DIRS`; tests pass their own).

    Returns:
        The message, without the command's name: for another user's instance whom to ask (the
        state directory's owner, and ``systemctl status`` only when the units are installed); for
        one's own how to start it (``systemctl start`` only when the unit is installed).
    """
    units = installed_units(unit_dirs)
    directory = os.path.dirname(socket_path) or "."
    owner = _owner(directory)
    others = owner is not None and owner[0] != os.geteuid()
    owner_name = owner[1] if owner is not None else "?"
    agent_hint = " (on a lab node the agent serves this socket: see `systemctl status labgang-agent`)"
    if system and os.geteuid() != 0:
        # Never advise a second scheduler over the GPUs this machine's system instance serves.
        if units:
            whom = f"(as root: `systemctl status {' '.join(units)}`)"
        elif others:
            whom = f"({owner_name}, whose state directory {directory} it is; no labgang systemd unit is installed here)"
        else:
            whom = "(no labgang systemd unit is installed here)"
        return f"this machine's labgang at {socket_path} does not answer; ask whoever runs it {whom}"
    if others:  # someone else's state directory (LABGANG_STATE_DIR, --state-dir): not the caller's to start
        hint = f"; as root: `systemctl status {' '.join(units)}`" if system and units else ""
        return (
            f"no labgang coordinator at {socket_path}; its state directory {directory} belongs to {owner_name}: "
            f"ask them to start it (`labgang up`){hint}"
        )
    agent = agent_hint if "labgang-agent" in units else ""  # systemctl only where the unit is installed
    if system:
        start = " or `systemctl start labgang-coordinator`" if "labgang-coordinator" in units else ""
        return f"no labgang coordinator at {socket_path}; start this machine's with `labgang up`{start}{agent}"
    return f"no labgang coordinator at {socket_path}; start one with `labgang up`{agent}"
