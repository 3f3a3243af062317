"""Fixtures of the remoting unit tests."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator

import pytest


@pytest.fixture
async def raw() -> AsyncIterator[list[socket.socket]]:
    """Raw sockets a test opens (appended to the list), closed after it."""
    socks: list[socket.socket] = []
    yield socks
    for s in socks:
        s.close()
