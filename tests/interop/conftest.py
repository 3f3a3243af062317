"""Fixtures for the interop tests (real third-party RocketMQ clients; see clients.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.interop.clients import ensure_clients_installed
from tests.support.procs import Proc, dev_proc, proxy_proc


@pytest.fixture(scope="session")
def interop_clients() -> Path:
    """Installs the clients once (tests/interop/setup_clients.sh); fails the test with the installer's output
    if that does not work - it never skips."""
    return ensure_clients_installed()


@contextmanager
def dev_and_proxy(tmp: Path, dev_env: dict[str, str] | None = None) -> Iterator[tuple[Proc, Proc]]:
    """A ``sievemq dev`` (with ``dev_env`` in its environment) and a ``sievemq proxy`` in front of it, for the 5.x
    client tests; both must stop cleanly."""
    dev = dev_proc(tmp)
    dev.env.update(dev_env or {})
    dev.start()
    # Receives of 1-2 s invisible time keep the redelivery tests short (RocketMQ's proxy, and sievemq's by default,
    # take 10 s at least: tests/compat/test_grpc_consume.py).
    proxy = proxy_proc(tmp, str(dev.extra["namesrv"]), "proxy", "--min-invisible-time-mills-for-recv", "1000")
    try:
        proxy.start()
        yield dev, proxy
    finally:
        assert proxy.stop() == 0, proxy.log()
        assert dev.stop() == 0, dev.log()
