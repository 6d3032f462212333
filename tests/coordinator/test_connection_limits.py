"""Connection caps and timeouts on real sockets on loopback: idle and half-sent connections are
closed, one peer cannot hold every connection, a flood of one error is logged a few times."""

from __future__ import annotations

import asyncio
import configparser
import logging
import tempfile
from pathlib import Path

import pytest
from aiohttp import web
from labgang.agent.connguard import GuardedTCPSite, GuardedUnixSite
from labgang.launcher.config.cluster import parse_config
from labgang.launcher.coordinator import keys, ratelog
from labgang.launcher.coordinator.app import create_app, serve

LIMITS = {
    "max_connections": 6,
    "max_connections_per_peer": 3,
    "header_timeout_s": 0.5,
    "body_timeout_s": 0.5,
    "idle_timeout_s": 1.0,
}
VERSION = b"GET /v1/version HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\r\n\r\n"


@pytest.fixture
async def listeners():
    base = Path(tempfile.mkdtemp(prefix="lgn-", dir="/tmp"))
    config = parse_config({"limits": LIMITS, "queues": [{"name": "default", "nominal": {"gpu": 1}}]})
    app = create_app(config, base, token="t")
    runner = web.AppRunner(app)
    await runner.setup()
    tcp = GuardedTCPSite(runner, "127.0.0.1", 0, guard=app[keys.GUARD])
    await tcp.start()
    sock = base / "labgang.sock"
    await GuardedUnixSite(runner, str(sock), guard=app[keys.GUARD]).start()
    try:
        yield app, tcp.bound[1], sock
    finally:
        await runner.cleanup()


async def connect(port: int, source: str = "127.0.0.1") -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))


async def status_of(reader: asyncio.StreamReader) -> int:
    line = await asyncio.wait_for(reader.readline(), 10)
    return int(line.split()[1]) if line else 0


async def closed(reader: asyncio.StreamReader) -> bool:
    """True once the server has closed the connection (bounded: at most 10 s)."""
    await asyncio.wait_for(reader.read(), 10)  # whatever is left of a response, then EOF
    return reader.at_eof()


async def test_one_peer_cannot_take_every_connection(listeners) -> None:
    app, port, _ = listeners
    held = [await connect(port) for _ in range(3)]
    reader, writer = await connect(port)
    assert await status_of(reader) == 503
    assert b"per peer" in await reader.read()
    writer.close()
    other_r, other_w = await connect(port, "127.0.0.2")  # another peer still gets in
    other_w.write(VERSION)
    assert await status_of(other_r) == 200
    for _, w in held:
        w.close()
    other_w.close()
    for _ in range(200):  # the guard counts them out as they close
        if app[keys.GUARD].open_connections == 0:
            break
        await asyncio.sleep(0.02)
    assert app[keys.GUARD].open_connections == 0


async def test_the_global_cap_holds_across_peers(listeners) -> None:
    _, port, _ = listeners
    held = [await connect(port, f"127.0.0.{2 + i // 3}") for i in range(6)]
    reader, _writer = await connect(port, "127.0.0.9")
    assert await status_of(reader) == 503
    assert b"open connections" in await reader.read()
    for _, w in held:
        w.close()


async def test_root_on_the_unix_socket_is_not_capped_per_peer(listeners) -> None:
    _, _, sock = listeners
    held = [await asyncio.open_unix_connection(str(sock)) for _ in range(5)]
    reader, writer = held[-1]
    writer.write(VERSION)
    assert await status_of(reader) == 200
    for _, w in held:
        w.close()


async def test_a_silent_connection_is_closed(listeners) -> None:
    _, port, _ = listeners
    reader, _ = await connect(port)
    assert await closed(reader)


async def test_headers_sent_a_byte_at_a_time_are_cut_off(listeners) -> None:
    _, port, _ = listeners
    reader, writer = await connect(port)
    writer.write(b"GET /v1/version HTTP/1.1\r\n")
    cut = False
    for _ in range(200):  # 20 s of dribbling at most; the header timeout is 0.5 s
        try:
            writer.write(b"X-A: b\r\n")
            await writer.drain()
        except (ConnectionError, OSError):
            cut = True
            break
        if reader.at_eof() or (await _eof_soon(reader)):
            cut = True
            break
    assert cut


async def _eof_soon(reader: asyncio.StreamReader) -> bool:
    try:
        data = await asyncio.wait_for(reader.read(1), 0.1)
    except TimeoutError:
        return False
    return data == b""


async def test_a_body_that_never_arrives_is_a_408(listeners) -> None:
    _, _, sock = listeners
    reader, writer = await asyncio.open_unix_connection(str(sock))
    writer.write(b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
    assert await status_of(reader) == 408
    assert b"limits.body_timeout_s" in await asyncio.wait_for(reader.read(), 10)


async def test_an_idle_keep_alive_connection_is_closed_after_its_request(listeners) -> None:
    _, port, _ = listeners
    reader, writer = await connect(port)
    writer.write(VERSION)
    assert await status_of(reader) == 200
    assert await closed(reader)


def test_a_flood_of_one_message_is_logged_a_few_times() -> None:
    now = [0.0]
    repeat = ratelog.RepeatFilter(burst=3, window_s=60, clock=lambda: now[0])
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    logger = logging.getLogger("labgang.test.flood")
    logger.propagate = False
    handler = Keep()
    logger.addHandler(handler)
    assert ratelog.install(logger) is ratelog.install(logger)  # idempotent
    handler.filters[0] = repeat
    for i in range(1000):
        logger.warning("connection from %s refused", f"10.0.0.{i % 250}")
    logger.warning("another kind")
    assert len(records) == 4
    now[0] = 61.0
    logger.warning("connection from %s refused", "10.0.0.1")
    assert records[-1] == "connection from 10.0.0.1 refused [997 similar message(s) dropped in the last 60 s]"
    logger.removeHandler(handler)


def test_installed_takes_the_filter_off_the_handlers_it_put_it_on_and_no_other() -> None:
    logger = logging.getLogger("labgang.test.installed")
    logger.propagate = False
    plain, kept = logging.Handler(), logging.Handler()
    earlier = ratelog.RepeatFilter()
    kept.addFilter(earlier)  # one already there (another coordinator of the process): it stays
    for handler in (plain, kept):
        logger.addHandler(handler)
    try:
        with ratelog.installed(logger) as repeat:
            assert repeat is earlier and plain.filters == [earlier]
        assert (plain.filters, kept.filters) == ([], [earlier])
    finally:
        for handler in (plain, kept):
            logger.removeHandler(handler)


async def test_a_coordinator_that_served_leaves_no_repeat_filter_on_the_root_handlers(tmp_path: Path) -> None:
    """What an in-process coordinator leaves: the root logger's handlers as they were (its filter,
    left there, dropped another test's repeated log lines later in the same process)."""
    root = logging.getLogger()
    watch = logging.Handler()
    root.addHandler(watch)
    seen: list[bool] = []
    stop = asyncio.Event()

    def ready(info: dict) -> None:
        seen.append(any(isinstance(f, ratelog.RepeatFilter) for f in watch.filters))  # on while it serves
        stop.set()

    try:
        config = parse_config({"queues": [{"name": "default", "nominal": {"gpu": 1}}]})
        await asyncio.wait_for(serve(config, tmp_path / "s", stop=stop, ready=ready), 30)
        assert seen == [True]
        assert not any(isinstance(f, ratelog.RepeatFilter) for h in root.handlers for f in h.filters)
    finally:
        root.removeHandler(watch)


def test_the_coordinator_unit_raises_the_open_files_limit(repo_root: Path) -> None:
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment, method-assign]
    unit.read_string((repo_root / "systemd" / "labgang-coordinator.service").read_text())
    default = parse_config({"queues": [{"name": "default"}]}).limits.max_connections
    assert int(unit["Service"]["LimitNOFILE"]) >= 4 * default
