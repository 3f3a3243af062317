"""The failover tests' fixtures: a real etcd cluster (``tests/support/etcd_cluster.py``) and broker sets under
automatic failover (``tests/support/failover_sets.py``), on network-namespace hosts where the machine allows."""

from __future__ import annotations

from collections.abc import Generator

import pytest

from tests.support import etcd_cluster, failover_sets
from tests.support.etcd_cluster import etcd, etcd_hosts
from tests.support.failover_sets import fset

__all__ = ["etcd", "etcd_hosts", "fset"]


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Attach the etcd members' and the brokers' logs to a failed test."""
    rep = yield
    etcd_cluster.attach_logs(item, rep)
    failover_sets.attach_logs(item, rep)
    return rep
