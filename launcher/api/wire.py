"""HTTP/1.1 over an ``AF_UNIX`` stream socket, with nothing but the interpreter's socket type.

What every shell command uses to talk to the coordinator (through
:class:`labgang.launcher.api.client.Client`). ``http.client`` would do the same work but
imports the ``email`` package to parse headers, about 15 ms of a command's start-up: more
than a whole ``squeue``. The coordinator (aiohttp) answers with ``Content-Length`` or
chunked bodies; both are read here, as is a body that ends when the connection closes.

The socket is ``_socket.socket``, the C type that :class:`socket.socket` subclasses: the
:mod:`socket` module around it turns its constants into enums and imports :mod:`selectors`,
about 2 ms of a 10 ms interpreter start (bench/cli_latency.py, regular install), and this
module needs none of that: connect, ``sendall``, ``recv`` and ``close`` are the C type's own
methods, with the same errors (``OSError`` subclasses; ``TimeoutError`` on a timeout).
"""

import _socket

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

_MAX_HEADER_BYTES = 65536
# RFC 3986 unreserved characters: what :func:`urllib.parse.quote` leaves as they are
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~")


def quote(text: str, *, plus: bool = False) -> str:
    """Percent-encode ``text`` (UTF-8) as ``urllib.parse.quote(text, safe="")`` does, or with
    ``plus`` as ``quote_plus`` (a space becomes ``+``).

    :mod:`urllib.parse` imports :mod:`re`, :mod:`ipaddress` and more, milliseconds of a shell
    command's start-up for a job id or a query string (bench/cli_latency.py).
    """
    out = []
    for byte in text.encode("utf-8"):
        if byte in _UNRESERVED:
            out.append(chr(byte))
        elif plus and byte == 0x20:
            out.append("+")
        else:
            out.append(f"%{byte:02X}")
    return "".join(out)


def urlencode(query: "Mapping[str, str]") -> str:
    """A query string as ``urllib.parse.urlencode(query)`` writes it for str keys and values."""
    return "&".join(f"{quote(key, plus=True)}={quote(value, plus=True)}" for key, value in query.items())


class RemoteClosed(ConnectionError):
    """The server closed the connection before a whole response arrived."""


class Response:
    """One response: ``status`` (int), ``headers`` (title-cased names), ``body`` (bytes), ``will_close``."""

    def __init__(self, status: int, headers: "dict[str, str]", body: bytes, will_close: bool) -> None:
        self.status = status
        self.headers = headers
        self.body = body
        self.will_close = will_close


class UnixHTTPConnection:
    """One kept-alive HTTP/1.1 connection to the server listening at ``socket_path``.

    Args:
        socket_path: the Unix socket (at most 107 bytes, Linux's ``sun_path``).
        timeout: seconds for the connect and for each read.

    Raises (from :meth:`connect` and :meth:`request`): :class:`FileNotFoundError`,
    :class:`ConnectionRefusedError`, :class:`PermissionError`, :class:`TimeoutError` as the OS
    reports them, and :class:`RemoteClosed` when the server hangs up mid-response.
    """

    def __init__(self, socket_path: str, timeout: float) -> None:
        self.socket_path = socket_path
        self.timeout = timeout
        self.sock: _socket.socket | None = None
        self._buffer = b""

    def connect(self) -> None:
        """Open the socket."""
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.socket_path)
        except BaseException:
            sock.close()
            raise
        self.sock = sock
        self._buffer = b""

    def close(self) -> None:
        """Close the socket (idempotent)."""
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def request(self, method: str, target: str, body: "bytes | None", headers: "dict[str, str]") -> "Response":
        """Send one request and read its whole response.

        Args:
            method: ``GET``, ``POST``...
            target: the path with its query (``/v1/jobs?all=1``).
            body: the request body, or None.
            headers: extra request headers (``Host`` and ``Content-Length`` are added).
        """
        if self.sock is None:
            self.connect()
        assert self.sock is not None
        lines = [f"{method} {target} HTTP/1.1", "Host: localhost"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        if body is not None or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body or b'')}")
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b""))
        return self._read_response(method)

    # -- reading ------------------------------------------------------------------

    def _recv(self) -> bytes:
        assert self.sock is not None
        data = self.sock.recv(262144)
        return data

    def _read_until(self, marker: bytes, limit: int) -> bytes:
        while marker not in self._buffer:
            if len(self._buffer) > limit:
                raise RemoteClosed("response headers too long")
            data = self._recv()
            if not data:
                raise RemoteClosed("the server closed the connection")
            self._buffer += data
        head, self._buffer = self._buffer.split(marker, 1)
        return head

    def _read_exact(self, n: int) -> bytes:
        # gather the pieces and join once: appending to one bytes object would copy a
        # megabytes-long listing over and over
        parts, have = [self._buffer], len(self._buffer)
        while have < n:
            data = self._recv()
            if not data:
                raise RemoteClosed("the server closed the connection mid-body")
            parts.append(data)
            have += len(data)
        whole = b"".join(parts)
        out, self._buffer = whole[:n], whole[n:]
        return out

    def _read_response(self, method: str) -> "Response":
        head = self._read_until(b"\r\n\r\n", _MAX_HEADER_BYTES).decode("latin-1")
        status_line, *header_lines = head.split("\r\n")
        version, _, rest = status_line.partition(" ")
        try:
            status = int(rest.split(" ", 1)[0])
        except ValueError:
            raise RemoteClosed(f"not an HTTP status line: {status_line!r}") from None
        headers: dict[str, str] = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            headers[name.strip().title()] = value.strip()
        connection = headers.get("Connection", "").lower()
        will_close = connection == "close" or (version == "HTTP/1.0" and connection != "keep-alive")
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            body = b""
        elif headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = self._read_chunked()
        elif "Content-Length" in headers:
            body = self._read_exact(int(headers["Content-Length"]))
        else:
            body = self._read_to_close()
            will_close = True
        if will_close:
            self.close()
        return Response(status, headers, body, will_close)

    def _read_chunked(self) -> bytes:
        parts: list[bytes] = []
        while True:
            size = int(self._read_until(b"\r\n", 1024).split(b";", 1)[0], 16)
            if size == 0:
                # trailers, if any, end with an empty line
                while self._read_until(b"\r\n", _MAX_HEADER_BYTES):
                    pass
                return b"".join(parts)
            parts.append(self._read_exact(size))
            self._read_exact(2)

    def _read_to_close(self) -> bytes:
        parts = [self._buffer]
        self._buffer = b""
        while data := self._recv():
            parts.append(data)
        return b"".join(parts)
