"""A TCP relay on loopback between one agent and the coordinator that can cut the link.

Cut, it drops every byte both ways and holds new connections without answering them, as a
network partition would: neither side sees the connection close, both just stop hearing from
the other. Mended, it closes the connections it held, so the agent dials afresh and gets through.
"""

from __future__ import annotations

import socket
import threading


class LinkCutter:
    """Relay ``127.0.0.1:<port>`` → ``127.0.0.1:<target_port>``; :meth:`cut` and :meth:`mend` it.

    Args:
        target_port: the coordinator's TCP port.
    """

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._cut = threading.Event()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True, name="linkcut-accept").start()

    def cut(self) -> None:
        """From now on nothing gets through, either way."""
        self._cut.set()

    def mend(self) -> None:
        """Let bytes through again; connections held while cut are closed (the agent redials)."""
        with self._lock:
            held, self._sockets = self._sockets, []
        self._cut.clear()
        for s in held:
            _close(s)

    def close(self) -> None:
        """Stop relaying and close everything."""
        self._closed = True
        _close(self._listener)
        self.mend()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                _close(client)
                continue
            with self._lock:
                self._sockets += [client, upstream]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True, name="linkcut-pump").start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            if not data:
                _close(dst)
                return
            if self._cut.is_set():
                continue  # lost in the partition
            try:
                dst.sendall(data)
            except OSError:
                _close(src)
                return


def _close(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    s.close()
