"""Transaction ids of the proxy (docs/proxy.md §6): read back exactly, nothing else is one."""

from __future__ import annotations

import pytest

from sievemq.proxy.transactions import TransactionId


def test_a_transaction_id_reads_back_and_nothing_else_is_one() -> None:
    tid = TransactionId("10.0.0.7:10911", 42, 1 << 40)
    assert TransactionId.parse(tid.encode()) == tid
    for bad in ["", "1", "2 10.0.0.7:10911 1 2", "1 10.0.0.7 1 2", "1 :10911 1 2", "1 h:p 1 2", "1 h:1 -1 2",
                "1 h:1 1 2 3", "1 h:1 1 " + "9" * 30, "1 h:1 1 \u0662", "x" * 300]:  # fmt: skip
        with pytest.raises(ValueError):
            TransactionId.parse(bad)
