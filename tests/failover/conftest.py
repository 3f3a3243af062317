"""The failover tests' fixtures: a real etcd cluster (``tests/support/etcd_cluster.py``), on network-namespace hosts
where the machine allows."""

from __future__ import annotations

from collections.abc import Generator

import pytest

from tests.support.etcd_cluster import attach_logs, etcd, etcd_hosts

__all__ = ["etcd", "etcd_hosts"]


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Attach the etcd members' logs to a failed test."""
    rep = yield
    attach_logs(item, rep)
    return rep
