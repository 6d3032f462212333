"""The hostile agent-link frames of issue 23 item 4, each sent over a real websocket on loopback
to a real coordinator process: a list and a string where an object belongs, a forwarded request
without its ``uid``, and compressed frames (permessage-deflate) that do not inflate, before and
after the hello. Each must be exactly one protocol-error line in the coordinator's log and a
closed link (4400), never a traceback, and the coordinator goes on serving.

The client is a plain socket speaking RFC 6455 (with RFC 7692's permessage-deflate), so a frame
marked compressed whose payload is not deflate data can really be sent: a library client would
compress it properly. The coordinator's repeat filter lets five lines of one kind through per
minute (``launcher/coordinator/ratelog.py``), so this file's own coordinator is sent five
protocol errors, one link each, and every one must show up as its own line.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import struct
import zlib
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest
from harness import Cluster, wait_for

TOKEN = "s3cret-cluster-token"

NOT_DEFLATE = b"\xff\xfe this is not a deflate stream \x00\x01"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    c = Cluster({})
    try:
        c.start_coordinator()
        yield c
    finally:
        c.stop()


def frame(payload: bytes, *, opcode: int = 0x1, compressed: bool = False) -> bytes:
    """One final client frame (masked, as RFC 6455 requires of a client); ``compressed`` sets RSV1,
    the permessage-deflate bit, whatever the payload holds."""
    head = bytes([0x80 | (0x40 if compressed else 0) | opcode])
    n = len(payload)
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 1 << 16:
        head += bytes([0x80 | 126]) + struct.pack("!H", n)
    else:
        head += bytes([0x80 | 127]) + struct.pack("!Q", n)
    mask = os.urandom(4)
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def deflated(data: bytes) -> bytes:
    """``data`` as one permessage-deflate message (raw deflate, the trailing empty block dropped)."""
    c = zlib.compressobj(wbits=-15)
    out = c.compress(data) + c.flush(zlib.Z_SYNC_FLUSH)
    return out[:-4] if out.endswith(b"\x00\x00\xff\xff") else out


class RawLink:
    """A websocket to the coordinator's ``/v1/agent/link`` over a plain TCP connection, offering
    permessage-deflate; frames go out as given, frames coming in are read until a close."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, deflate: bool) -> None:
        self.reader, self.writer, self.deflate = reader, writer, deflate

    @classmethod
    async def open(cls, port: int) -> RawLink:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        key = base64.b64encode(os.urandom(16)).decode()
        writer.write(
            (
                "GET /v1/agent/link HTTP/1.1\r\n"
                f"Host: 127.0.0.1:{port}\r\n"
                "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                "Sec-WebSocket-Extensions: permessage-deflate\r\n"
                f"Authorization: Bearer {TOKEN}\r\n\r\n"
            ).encode()
        )
        head = (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)).decode("latin-1")
        assert head.startswith("HTTP/1.1 101"), head
        return cls(reader, writer, "permessage-deflate" in head.lower())

    def send(self, data: bytes) -> None:
        self.writer.write(data)

    async def receive(self) -> tuple[int, bytes]:
        """The next whole frame from the coordinator: (opcode, payload, inflated when compressed)."""
        b0, b1 = await self.reader.readexactly(2)
        n = b1 & 0x7F
        if n == 126:
            (n,) = struct.unpack("!H", await self.reader.readexactly(2))
        elif n == 127:
            (n,) = struct.unpack("!Q", await self.reader.readexactly(8))
        payload = await self.reader.readexactly(n)  # a server's frames are not masked
        if b0 & 0x40:
            payload = zlib.decompressobj(wbits=-15).decompress(payload + b"\x00\x00\xff\xff")
        return b0 & 0x0F, payload

    async def close_code(self) -> tuple[int | None, str]:
        """Read until the coordinator's close frame: its code and reason (None when it dropped the
        connection without one)."""
        try:
            while True:
                opcode, payload = await asyncio.wait_for(self.receive(), 30)
                if opcode == 0x8:
                    code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None
                    return code, payload[2:].decode(errors="replace")
        except asyncio.IncompleteReadError:
            return None, ""
        finally:
            self.writer.close()

    async def welcome(self) -> dict[str, Any]:
        """The first text frame: the coordinator's answer to a hello."""
        while True:
            opcode, payload = await asyncio.wait_for(self.receive(), 30)
            if opcode == 0x1:
                return json.loads(payload)


def hello(version: str) -> bytes:
    return json.dumps({"type": "hello", "node": "hostile", "version": version, "address": "127.0.0.1"}).encode()


UNREADABLE = "a frame that cannot be read"  # and aiohttp's words: "Error -3 while decompressing data"
API_NO_UID = {"type": "api", "id": 1, "method": "GET", "path": "/v1/jobs", "query": {}, "body": ""}

# name: (frame bytes, whether a valid hello goes first, what the log line names, whether the close is
# the coordinator's 4400 with that reason; a frame aiohttp cannot read is closed by aiohttp itself
# before the coordinator sees the error, with aiohttp's code)
HOSTILE = {
    "a-list": (frame(b"[1, 2, 3]"), True, "must be a JSON object, got a list", True),
    "a-string": (frame(b'"just a string"'), True, "must be a JSON object, got a string", True),
    "api-without-uid": (frame(json.dumps(API_NO_UID).encode()), True, "api.uid", True),
    "compressed-not-inflating": (frame(NOT_DEFLATE, compressed=True), True, UNREADABLE, False),
    "compressed-hello-not-inflating": (frame(NOT_DEFLATE, compressed=True), False, UNREADABLE, False),
}


def protocol_error_lines(cluster: Cluster) -> list[str]:
    return [line for line in cluster.log_text("coordinator").splitlines() if "protocol error from " in line]


def at_least(cluster: Cluster, n: int) -> list[str] | None:
    """The protocol-error lines once there are ``n`` of them, else None (to wait on)."""
    lines = protocol_error_lines(cluster)
    return lines if len(lines) >= n else None


async def send_hostile(cluster: Cluster, data: bytes, after_hello: bool) -> tuple[int | None, str]:
    link = await RawLink.open(cluster.port)
    assert link.deflate, "the coordinator no longer offers permessage-deflate: the compressed cases test nothing"
    if after_hello:
        with cluster.client() as c:
            version = c.version()["version"]
        link.send(frame(deflated(hello(version)), compressed=True))  # a well-formed compressed frame is read
        assert (await link.welcome())["type"] == "welcome"
    link.send(data)
    return await link.close_code()


def test_each_hostile_frame_is_one_protocol_error_line_and_a_closed_link(cluster: Cluster) -> None:
    assert protocol_error_lines(cluster) == []
    for i, (name, (data, after_hello, named, ours)) in enumerate(HOSTILE.items(), start=1):
        code, reason = asyncio.run(send_hostile(cluster, data, after_hello))
        assert code is not None, name  # a close frame, not a dropped connection
        if ours:
            assert code == 4400, (name, code, reason)
            assert reason.startswith("protocol error: ") and named in reason, (name, reason)
        # aiohttp closes an unreadable frame's link before the coordinator reads the error: wait for the line
        lines = wait_for(partial(at_least, cluster, i), what=f"the line of {name}")
        assert len(lines) == i, (name, lines)  # exactly one more line for this frame
        assert named in lines[-1] and " WARNING labgang.coordinator.link: " in lines[-1], (name, lines[-1])
        with cluster.client() as c:
            assert c.version()["version"], name  # still serving
    assert len(protocol_error_lines(cluster)) == len(HOSTILE)
    log = cluster.log_text("coordinator")
    assert "Traceback" not in log
    assert " ERROR " not in log  # no error line beside the warnings either
