"""Who may do what through ``labgang top --web`` (tui/web.py), on a real aiohttp server on loopback:
the token gate, the session cookie, the Origin check, and the command each viewer's app runs."""

from __future__ import annotations

import json
import re
import sys
import urllib.parse
from pathlib import Path

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer
from labgang.tui.web import CONTROL, COOKIE, READ, WebTop, WebTopError, is_loopback

CLUSTER, READER = "cluster-secret", "read-secret"
LAN = "192.0.2.10"  # a non-loopback address (TEST-NET-1); the tests serve on loopback whatever the setting


def recorder(out: Path) -> list[str]:
    """A stand-in app: writes the argv it was started with, then says it is done as a Textual app
    under textual-serve does (the ``__GANGLION__`` line, then an ``exit`` meta packet), so the
    server ends the session."""
    script = (
        "import json, sys\n"
        f"open({str(out)!r}, 'w').write(json.dumps(sys.argv[1:]))\n"
        "meta = json.dumps({'type': 'exit'}).encode()\n"
        "sys.stdout.buffer.write(b'__GANGLION__\\n' + b'M' + len(meta).to_bytes(4, 'big') + meta)\n"
        "sys.stdout.flush()\n"
        "sys.stdin.read()\n"  # until the server closes our stdin (its quit)
    )
    return [sys.executable, "-c", script]


async def client_for(server: WebTop) -> TestClient:
    client = TestClient(TestServer(await server._make_app(), host="127.0.0.1"))
    await client.start_server()
    return client


def test_beyond_loopback_needs_a_read_token() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback(LAN)  # noqa: S104  # a check, not a bind
    with pytest.raises(WebTopError, match=rf"--host {LAN}: serving beyond loopback needs a read token"):
        WebTop(["true"], host=LAN)
    WebTop(["true"], host=LAN, read_token=READER)  # accepted


def test_read_viewers_run_the_app_read_only() -> None:
    server = WebTop(["labgang", "top", "--interval", "1"])
    assert server.command_for(READ) == "exec labgang top --interval 1 --read-only"  # the shell execs the app
    assert server.command_for(CONTROL) == "exec labgang top --interval 1"


async def test_loopback_lets_anyone_read_and_the_page_points_at_its_own_address() -> None:
    client = await client_for(WebTop(["true"], cluster_token=CLUSTER))
    try:
        page = await client.get("/")
        assert page.status == 200
        body = await page.text()
        assert f'data-session-websocket-url="ws://{page.url.host}:{page.url.port}/ws"' in body
        own = f"{page.url.host}:{page.url.port}"
        xmlns = "http://www.w3.org/2000/svg"  # the logo's namespace name: never fetched
        urls = [u for u in re.findall(r"""(?:https?|wss?)://[^"'\s)]+""", body) if u != xmlns]
        assert urls and all(urllib.parse.urlsplit(u).netloc == own for u in urls), urls  # nothing from outside
        font = await client.get("/static/fonts/RobotoMono-VariableFont_wght.ttf")
        assert font.status == 200
    finally:
        await client.close()


async def test_beyond_loopback_a_viewer_needs_a_token_and_gets_a_session_cookie() -> None:
    server = WebTop(["true"], host=LAN, cluster_token=CLUSTER, read_token=READER)
    client = await client_for(server)
    try:
        refused = await client.get("/")
        assert refused.status == 401 and "?token=" in await refused.text()
        assert (await client.get("/ws")).status == 401
        assert (await client.get("/?token=guess")).status == 401
        assert (await client.get("/static/js/textual.js")).status == 200  # the page's code is not the cluster's
        for token, level in ((READER, READ), (CLUSTER, CONTROL)):
            client.session.cookie_jar.clear()
            hop = await client.get(f"/?token={token}&fontsize=14", allow_redirects=False)
            assert hop.status == 303 and hop.headers["Location"] == "/?fontsize=14"  # the token leaves the URL
            session = hop.cookies[COOKIE]
            assert session["httponly"] and session["samesite"] == "Strict"
            assert server._sessions[session.value] == level
            assert (await client.get("/")).status == 200  # the cookie now lets the viewer in
    finally:
        await client.close()


async def run_viewer(server: WebTop, client: TestClient, out: Path, **kw) -> list[str]:
    async with client.ws_connect("/ws?width=100&height=30", **kw) as ws:
        async for _ in ws:  # until the stand-in app exits and the server closes the session
            pass
    assert server.viewers == {CONTROL: 0, READ: 0}  # a closed session holds nothing
    return json.loads(out.read_text())


async def test_each_viewer_runs_the_app_at_its_own_level(tmp_path: Path) -> None:
    out = tmp_path / "argv.json"
    server = WebTop(recorder(out), cluster_token=CLUSTER)
    client = await client_for(server)
    try:
        assert await run_viewer(server, client, out) == ["--read-only"]  # loopback, no token: reads only
        await client.get(f"/?token={CLUSTER}", allow_redirects=False)
        out.unlink()
        assert await run_viewer(server, client, out) == []  # the cluster token's session: may cancel
    finally:
        await client.close()


async def test_a_websocket_from_another_site_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "argv.json"
    client = await client_for(WebTop(recorder(out), cluster_token=CLUSTER))
    try:
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await client.ws_connect("/ws", headers={"Origin": "http://evil.example"})
        assert refused.value.status == 403 and not out.exists()
    finally:
        await client.close()
