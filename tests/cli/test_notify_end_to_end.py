"""Notifications end to end: a real ``labgang up --simulate`` whose cluster config names a webhook on
loopback (a real HTTP server in this test) and whose PATH has a ``sendmail`` stand-in; real jobs
submitted with ``--mail-type`` end, and the webhook and the mail receive each end they asked for."""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from up_harness import Up

pytestmark = pytest.mark.slow


class Webhook:
    """An HTTP server on 127.0.0.1 that records each JSON body POSTed to it."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []
        received = self.bodies

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                received.append(json.loads(self.rfile.read(length)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def wait_for(self, what: str, predicate, timeout: float = 60.0) -> list[dict]:
        deadline = time.monotonic() + timeout
        while not predicate(self.bodies):
            assert time.monotonic() < deadline, f"the webhook never got {what}: {self.bodies}"
            time.sleep(0.05)
        return self.bodies

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def lab() -> Iterator[tuple[Up, Webhook, Path]]:
    base = Path(tempfile.mkdtemp(prefix="lgnotify-", dir="/tmp"))
    hook = Webhook()
    outbox = base / "outbox"
    bin_dir = base / "bin"
    bin_dir.mkdir()
    sendmail = bin_dir / "sendmail"  # found on PATH by the coordinator, as the host's would be
    sendmail.write_text(f'#!/bin/sh\necho "$@" >> {outbox}.args\ncat >> {outbox}\necho "----" >> {outbox}\n')
    sendmail.chmod(sendmail.stat().st_mode | stat.S_IXUSR)
    config = base / "cluster.toml"
    config.write_text(
        f'[notify]\nwebhook = "{hook.url}"\nmail_from = "gpu-lab"\nbackoff_s = 0.1\n\n'
        '[[queues]]\nname = "default"\nnominal = { gpu = 8 }\n'
    )
    state = base / "state"
    state.mkdir()
    up = Up(state, start=False, args=("--config", str(config)))
    up.env["PATH"] = f"{bin_dir}{os.pathsep}{up.env['PATH']}"
    up.start()
    try:
        yield up, hook, outbox
    finally:
        code = up.stop()
        hook.close()
        shutil.rmtree(base, ignore_errors=True)
    assert code == 0, up.output()


def test_a_job_end_reaches_the_webhook_and_the_mail(lab) -> None:
    up, hook, outbox = lab
    ok = up.submit("--mail-type", "END", "--mail-user", "alice@example.org", "--name", "train", "--", "true")
    bad = up.submit("--mail-type", "FAIL", "--name", "crash", "--", "sh", "-c", "exit 3")
    quiet = up.submit("--name", "quiet", "--", "true")  # asked for nothing: never notified
    for job in (ok, bad, quiet):
        up.wait_state(job, {"succeeded", "failed"})
    bodies = hook.wait_for("both ends", lambda got: {b["job_id"] for b in got} >= {ok, bad})
    by_job = {b["job_id"]: b for b in bodies}
    assert (by_job[ok]["event"], by_job[ok]["state"], by_job[ok]["name"]) == ("END", "succeeded", "train")
    assert by_job[ok]["mail_user"] == "alice@example.org"
    assert (by_job[bad]["event"], by_job[bad]["state"], by_job[bad]["exit_status"]) == ("FAIL", "failed", 3)
    deadline = time.monotonic() + 60
    while not (outbox.exists() and outbox.read_text().count("----") >= 2):
        assert time.monotonic() < deadline, outbox.read_text() if outbox.exists() else "no mail at all"
        time.sleep(0.05)
    mail = outbox.read_text()
    assert (outbox.parent / "outbox.args").read_text().split() == ["-t", "-oi", "-t", "-oi"]
    assert "To: alice@example.org\nFrom: gpu-lab\n" in mail
    assert (
        f"Subject: labgang Job_id={ok} Name=train Ended, Run time 00:00:0" in mail and "SUCCEEDED, ExitCode 0" in mail
    )
    assert f"Subject: labgang Job_id={bad} Name=crash Failed, Run time 00:00:0" in mail
    # the quiet job ended before the others were delivered: a notification for it would be here by now
    assert quiet not in {b["job_id"] for b in hook.bodies} and f"Job_id={quiet} " not in outbox.read_text()
