"""Fixtures that make the TUI tests deterministic: UTC, a frozen clock, a fake coordinator."""

from __future__ import annotations

import time

import pytest
from labgang.tui.app import make_app
from labgang.tui.sources import CoordinatorSource
from tui_fakes import NOW, FakeClient


@pytest.fixture(autouse=True)
def utc(monkeypatch):
    """Times render the same on every machine."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def client() -> FakeClient:
    return FakeClient(user="alice")


@pytest.fixture
def source(client) -> CoordinatorSource:
    return CoordinatorSource(client, description="fake coordinator", clock=lambda: NOW)


@pytest.fixture
def app(source):
    """The TUI against the fake coordinator, as user alice; the timer never fires during a test."""
    return make_app(source, refresh_s=3600, user="alice")
