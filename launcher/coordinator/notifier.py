"""Delivering job notifications (``--mail-type``; ``launcher/config/notify.py`` says which and what) off
the scheduling loop: a JSON POST to the ``[notify] webhook`` and a mail through ``sendmail``.

:meth:`Notifier.observe` is called for every history line the lifecycle writes; it only looks at
the job's mail types and queues a delivery, so it never blocks the scheduler. Each job's
notifications go out in order on a task of their own (BEGIN before END), tasks of different jobs
side by side; a failed delivery is tried again ``retries`` times with a doubling backoff, then
logged and dropped. Nothing waits for them: a coordinator that stops drops what is still queued
(logged).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
from collections import deque
from typing import Any

from labgang.launcher.config.notify import NotifyConfig, mail_message, notification_kind
from labgang.launcher.lifecycle.records import HistoryEntry, JobRecord

log = logging.getLogger("labgang.coordinator.notify")


def find_sendmail(configured: str | None) -> str | None:
    """The sendmail program to use: ``configured`` (``""``: none), else ``sendmail`` on PATH,
    ``/usr/sbin`` or ``/usr/lib``; None when there is none."""
    if configured is not None:
        return configured or None
    path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/lib"])
    return shutil.which("sendmail", path=path)


def payload(job: JobRecord, entry: HistoryEntry, kind: str) -> dict[str, Any]:
    """The webhook's JSON body for one notification of ``job`` (also what a mail is written from).

    Keys: ``event`` (BEGIN, END, FAIL, REQUEUE), ``job_id``, ``name``, ``user``, ``mail_user``,
    ``queue``, ``state``, ``exit_status``, ``reason`` (code or None), ``message`` (the history
    line), ``time`` (unix seconds), ``queued_s`` (submit to start), ``run_s`` (start to now),
    ``restart_count``, ``array_id``.
    """
    spec, st = job.spec, job.status
    start = st.start_time
    return {
        "event": kind,
        "job_id": job.id,
        "name": spec.name,
        "user": spec.user,
        "mail_user": spec.mail_user or spec.user,
        "queue": spec.queue,
        "state": st.state.value,
        "exit_status": st.exit_status,
        "reason": st.reason_code,
        "message": entry.message,
        "time": entry.time,
        "queued_s": None if start is None else start - st.submit_time,
        "run_s": None if start is None else entry.time - start,
        "restart_count": st.restart_count,
        "array_id": None if spec.array is None else spec.array.array_id,
    }


class Notifier:
    """Queues and delivers the notifications jobs asked for (see the module docstring).

    Args:
        config: the ``[notify]`` table.
    """

    def __init__(self, config: NotifyConfig) -> None:
        self.config = config
        self.sendmail = find_sendmail(config.sendmail)
        self._queues: dict[str, deque[dict[str, Any]]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._session: Any = None  # an aiohttp ClientSession, made on the first webhook POST
        self.delivered = 0
        """Deliveries that succeeded (a webhook POST or a mail each), for tests and logs."""

    @property
    def active(self) -> bool:
        """True when something would be delivered (a webhook or a sendmail)."""
        return self.config.webhook is not None or self.sendmail is not None

    def observe(self, job: JobRecord, entry: HistoryEntry) -> None:
        """A history line of ``job`` was written: queue its notification if the job asked for one.
        Cheap and synchronous (the lifecycle's driver calls it for every line); needs a running loop."""
        if not job.spec.mail_type or not self.active:
            return
        kind = notification_kind(entry.event, job.spec.mail_type)
        if kind is None:
            return
        body = payload(job, entry, kind)
        pending = self._queues.get(job.id)
        if pending is not None:
            pending.append(body)
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # a driver without an event loop (a test of the model): nothing can be sent
            log.warning("job %s: %s notification not sent: no event loop runs", job.id, kind)
            return
        self._queues[job.id] = deque([body])
        task = loop.create_task(self._drain(job.id), name=f"labgang-notify-{job.id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _drain(self, job_id: str) -> None:
        pending = self._queues[job_id]
        try:
            while pending:
                body = pending[0]
                if self.config.webhook is not None:
                    await self._retrying("webhook", body, self._post)
                if self.sendmail is not None:
                    await self._retrying("mail", body, self._mail)
                pending.popleft()
        finally:
            del self._queues[job_id]

    async def _retrying(self, what: str, body: dict[str, Any], send: Any) -> None:
        cfg = self.config
        delay = cfg.backoff_s
        for attempt in range(cfg.retries + 1):
            try:
                await send(body)
                self.delivered += 1
                return
            except Exception as exc:
                if attempt == cfg.retries:
                    log.warning(
                        "job %s: %s notification %s dropped after %d attempts: %s",
                        body["job_id"],
                        what,
                        body["event"],
                        attempt + 1,
                        exc,
                    )
                    return
                log.info("job %s: %s notification failed (%s); again in %g s", body["job_id"], what, exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, cfg.backoff_max_s) if delay else 0.0

    async def _post(self, body: dict[str, Any]) -> None:
        import aiohttp

        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.config.timeout_s))
        assert self.config.webhook is not None
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        async with self._session.post(self.config.webhook, data=data, headers=headers) as resp:
            if resp.status >= 300:
                raise RuntimeError(f"the webhook answered HTTP {resp.status}")

    async def _mail(self, body: dict[str, Any]) -> None:
        assert self.sendmail is not None
        proc = await asyncio.create_subprocess_exec(
            self.sendmail,
            "-t",
            "-oi",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            _, err = await asyncio.wait_for(
                proc.communicate(mail_message(body, self.config.mail_from)), self.config.timeout_s
            )
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise RuntimeError(f"{self.sendmail} did not finish within {self.config.timeout_s:g} s") from None
        if proc.returncode != 0:
            raise RuntimeError(f"{self.sendmail} exited with status {proc.returncode}: {err.decode(errors='replace')}")

    async def close(self) -> None:
        """Stop delivering (what is still queued is logged and dropped) and close the HTTP session."""
        left = sum(len(q) for q in self._queues.values())
        if left:
            log.warning("dropping %d undelivered job notification(s) at shutdown", left)
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._session is not None:
            await self._session.close()
            self._session = None
