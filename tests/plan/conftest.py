"""Every simulation in these tests checks the cycle driver's tracked jobs, and the running jobs'
change it tells the scheduler, against a full scan."""

from collections.abc import Iterator

import pytest
from labgang.launcher.lifecycle.driver import CycleDriver
from labgang.launcher.scheduler import capacity


@pytest.fixture(autouse=True)
def verify_tracking(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each tracked split is compared with a scan of every active job (a change an effect did not
    report fails the test)."""
    monkeypatch.setattr(CycleDriver, "verify_tracking", True)
    monkeypatch.setattr(capacity, "check_changes", True)
    yield
