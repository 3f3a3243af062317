"""The replication tests' fixtures: master/slave sets on network-namespace hosts (``tests/support/replica_sets.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.replica_sets import attach_logs, mode, rsets

__all__ = ["rsets"]


def pytest_report_header(config: pytest.Config) -> str:
    """Say where the replication tests run their brokers."""
    return f"replication tests: brokers on {mode()}"


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Attach the processes' logs to a failed test."""
    rep = yield
    attach_logs(item, rep)
    return rep
