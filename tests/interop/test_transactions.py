"""Transactions with the real C++ core (``TransactionMQProducer`` of rocketmq-client-python 0.5.0rc2) against
``sievemq dev`` on RocketMQ's default check settings: commit, rollback, and UNKNOWN settled by the broker's
check-back; the C++ core and ali-ons consumers (tag filter) see exactly the committed messages, once."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.interop.clients import run_driver, unique_name
from tests.interop.test_against_sievemq import consume_args, create_topic, ns, received_keys
from tests.support.procs import Proc, dev_proc

pytestmark = pytest.mark.interop

COUNT = 2


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory, interop_clients: Path) -> Iterator[Proc]:
    p = dev_proc(tmp_path_factory.mktemp("interop-tx")).start()
    try:
        yield p
    finally:
        assert p.stop() == 0, p.log()


def test_cpp_core_transactions_commit_rollback_and_check_back(dev: Proc) -> None:
    topic = unique_name("TxT")
    create_topic(dev, topic)
    # Default transactionTimeout is 6 s: the UNKNOWN ones are checked 6-7 s after they were stored.
    res = run_driver("rmqcp-tx", ["--namesrv", ns(dev), "--topic", topic, "--group", unique_name("TxP"),
                                  "--count", str(COUNT), "--linger", "12"], timeout=120)  # fmt: skip
    assert res.returncode == 0, res.describe()
    sent = res.of("sent")
    assert len(sent) == 3 * COUNT and all(s["status"] == 0 for s in sent), res.describe()
    checked = Counter(e["body"] for e in res.of("checked"))
    assert set(checked) == {f"unknown-{i}" for i in range(COUNT)}, res.describe()
    assert all(n == 1 for n in checked.values()), f"a settled transaction was checked again: {checked}"

    want = {f"commit-{i}" for i in range(COUNT)} | {f"unknown-{i}" for i in range(COUNT)}
    for kind in ("rmqcp", "ons"):
        args = consume_args(dev, topic, unique_name("TxC"), "TagA || TagB", len(want), kind=kind)
        got = run_driver(kind, args, timeout=150)
        assert got.returncode == 0, got.describe()
        counts = received_keys(got.of("received"))
        assert set(counts) == want, f"{kind}: {got.describe()}"
        assert all(n == 1 for n in counts.values()), f"{kind} duplicates: {counts}"
    # Only TagB: the check-committed ones (a committed transactional message is filtered like any other).
    got = run_driver("rmqcp", consume_args(dev, topic, unique_name("TxB"), "TagB", COUNT), timeout=150)
    assert set(received_keys(got.of("received"))) == {f"unknown-{i}" for i in range(COUNT)}, got.describe()
