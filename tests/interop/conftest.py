"""Fixtures for the interop tests (real third-party RocketMQ clients; see clients.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.interop.clients import ensure_clients_installed


@pytest.fixture(scope="session")
def interop_clients() -> Path:
    """Installs the clients once (tests/interop/setup_clients.sh); fails the test with the installer's output
    if that does not work - it never skips."""
    return ensure_clients_installed()
