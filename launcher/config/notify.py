"""Job notifications, as Slurm's ``--mail-type``/``--mail-user``: which of a job's history events
a job asked to hear about, and what the notification says. Delivered by the coordinator
(``launcher/coordinator/notifier.py``) as a JSON POST to the ``[notify] webhook`` of
``cluster.toml`` and a mail through the host's ``sendmail``.

Mail types (Slurm's names; any case): ``BEGIN`` (every rank started), ``END`` (the job ended in
any state), ``FAIL`` (it failed), ``REQUEUE`` (it went back to its queue), ``ALL`` (all of these),
``NONE``. A failed job that asked for both END and FAIL gets one notification, ``FAIL``.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

MAIL_TYPES = ("BEGIN", "END", "FAIL", "REQUEUE")
"""The mail types a job can ask for (``ALL`` is all of them; ``NONE`` none)."""
ALLOWED_MAIL_TYPES = (*MAIL_TYPES, "ALL", "NONE")


class BadMailType(ValueError):
    """A ``--mail-type`` that is none of :data:`ALLOWED_MAIL_TYPES`; the message lists them."""


def parse_mail_types(items: Iterable[str]) -> tuple[str, ...]:
    """``["begin", "END"]`` → ``("BEGIN", "END")`` in :data:`MAIL_TYPES` order; ``ALL`` → all of them;
    ``NONE`` (alone or with others) → none.

    Raises:
        BadMailType: an unknown type (names it and the allowed ones).
    """
    wanted: set[str] = set()
    none = False
    for raw in items:
        for item in str(raw).split(","):
            name = item.strip().upper()
            if not name:
                continue
            if name not in ALLOWED_MAIL_TYPES:
                allowed = ", ".join(ALLOWED_MAIL_TYPES)
                raise BadMailType(f"mail_type: {item.strip()!r} is not a mail type; allowed: {allowed}")
            if name == "ALL":
                wanted.update(MAIL_TYPES)
            elif name == "NONE":
                none = True
            else:
                wanted.add(name)
    return () if none else tuple(t for t in MAIL_TYPES if t in wanted)


def notification_kind(event: str, mail_types: Iterable[str]) -> str | None:
    """The mail type a history ``event`` of a job that asked for ``mail_types`` is reported as,
    or None when it asked for none that fits: ``running`` → BEGIN, ``requeued`` → REQUEUE,
    ``failed`` → FAIL (else END), ``succeeded``/``cancelled`` → END."""
    types = set(mail_types)
    if not types:
        return None
    if event == "running":
        return "BEGIN" if "BEGIN" in types else None
    if event == "requeued":
        return "REQUEUE" if "REQUEUE" in types else None
    if event == "failed":
        return "FAIL" if "FAIL" in types else "END" if "END" in types else None
    if event in ("succeeded", "cancelled"):
        return "END" if "END" in types else None
    return None


def _hms(seconds: float | None) -> str:
    total = max(0, int(seconds or 0))
    hours, rest = divmod(total, 3600)
    return f"{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"


def subject(payload: dict[str, Any]) -> str:
    """A mail subject in Slurm's words: ``labgang Job_id=12 Name=train Ended, Run time 00:01:02,
    SUCCEEDED, ExitCode 0`` (``Began, Queued time …``, ``Failed, …``, ``Requeued, …``)."""
    head = f"labgang Job_id={payload['job_id']} Name={payload['name']}"
    kind = payload["event"]
    if kind == "BEGIN":
        return f"{head} Began, Queued time {_hms(payload.get('queued_s'))}"
    if kind == "REQUEUE":
        return f"{head} Requeued, Run time {_hms(payload.get('run_s'))}"
    verb = "Failed" if kind == "FAIL" else "Ended"
    code = payload.get("exit_status")
    return (
        f"{head} {verb}, Run time {_hms(payload.get('run_s'))}, {str(payload['state']).upper()}, "
        f"ExitCode {'-' if code is None else code}"
    )


def mail_message(payload: dict[str, Any], sender: str) -> bytes:
    """The mail ``sendmail -t`` reads: headers (To, From, Subject) and the event's message."""
    lines = [
        f"To: {payload['mail_user']}",
        f"From: {sender}",
        f"Subject: {subject(payload)}",
        "",
        f"{payload['message']}",
        "",
    ]
    return "\n".join(lines).encode()


class NotifyConfig(BaseModel):
    """The ``[notify]`` table of ``cluster.toml``.

    Attributes:
        webhook: an ``http://`` or ``https://`` URL that gets a JSON POST for each event a job asked
            for (None: no webhook).
        sendmail: the ``sendmail`` program (``-t -oi``; None: ``sendmail`` on PATH, ``/usr/sbin`` or
            ``/usr/lib``, if there is one), ``""`` for no mail.
        mail_from: the mails' From.
        timeout_s: one webhook POST's (or sendmail's) limit, seconds.
        retries: how many times a failed delivery (no answer, a 5xx or 429 status, sendmail failing) is
            tried again, waiting ``backoff_s``, doubling up to ``backoff_max_s``, before it is logged
            and dropped.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    webhook: str | None = None
    sendmail: str | None = None
    mail_from: str = "labgang"
    timeout_s: float = Field(default=10.0, gt=0, le=300)
    retries: int = Field(strict=True, default=5, ge=0, le=100)
    backoff_s: float = Field(default=1.0, ge=0, le=3600)
    backoff_max_s: float = Field(default=300.0, ge=0, le=86400)

    @field_validator("webhook")
    @classmethod
    def _webhook(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(("http://", "https://")):
            raise ValueError(f"{v!r} is not an http:// or https:// URL")
        return v
