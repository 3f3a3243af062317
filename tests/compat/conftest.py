"""Fixtures of the compatibility tests: one Apache RocketMQ and one sievemq per pytest worker, shared by the
modules (each uses topics and groups of its own). RocketMQ runs with SQL92 on (``enablePropertyFilter``, off by
default there, on by default in sievemq) so that both evaluate the same selectors."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.compat.sides import Side, rocketmq_side, sievemq_side

CLUSTER = "DefaultCluster"
BROKER = "sv-a"
"""The cluster and broker names of both sides (sievemq_side's broker is ``sv-a`` of the default cluster)."""


@pytest.fixture(scope="session")
def sides(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Side, Side]]:
    """(Apache RocketMQ, sievemq), each a name server and a master broker, both named as sievemq's test broker
    (cluster ``DefaultCluster``, broker ``sv-a``), so that what names them reads the same on both
    (test_mqadmin.py compares mqadmin's output as text)."""
    tmp = tmp_path_factory.mktemp("compat")
    names = {"brokerClusterName": CLUSTER, "brokerName": BROKER}
    # Commit-log segments larger than a message of maxMessageSize (the test brokers' 4 MiB would not hold one).
    segments = ("--mapped-file-size-commitlog", str(16 * 1024 * 1024))
    with rocketmq_side(tmp, enablePropertyFilter=True, **names) as ref, sievemq_side(tmp, *segments) as ours:
        yield ref, ours
