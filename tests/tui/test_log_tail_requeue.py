"""The job detail's log tail of a requeued job: the new attempt's log is read from its first byte (the
coordinator says which attempt it read), not from the offset the old attempt's log had reached."""

from __future__ import annotations

from labgang.launcher.api.client import LogChunk
from labgang.tui.sources import CoordinatorSource


class RequeuingClient:
    """Serves attempt 0's log, then (after ``requeue``) attempt 1's, shorter than the offset reached."""

    def __init__(self) -> None:
        self.logs_by_attempt = {0: b"first attempt\n", 1: b"again\n"}
        self.current = 0

    async def logs(self, job_id: str, rank: int = 0, offset: int = 0) -> LogChunk:
        data = self.logs_by_attempt[self.current][offset:]
        return LogChunk(data, offset + len(data), finished=False, attempt=self.current)


async def test_the_log_tail_starts_a_requeued_attempt_from_its_first_byte():
    client = RequeuingClient()
    source = CoordinatorSource(client, clock=lambda: 0.0)
    text, offset, _ = await source.log_tail("4", 0, 0)
    assert (text, offset) == ("first attempt\n", 14)
    client.current = 1
    text, offset, _ = await source.log_tail("4", 0, offset)
    assert (text, offset) == ("[labgang] start attempt 1\nagain\n", 6)
    assert await source.log_tail("4", 0, offset) == ("", 6, False)
