"""The broker's default settings, compared with Apache RocketMQ 5.5.0's: GET_BROKER_CONFIG (26) from both, every
setting both have (sievemq uses RocketMQ's names where it has the setting) must have the same default, but those
the test harness sets (ports, paths, segment sizes, disk ratios) and the deliberate differences listed here."""

from __future__ import annotations

import asyncio

from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from tests.compat.sides import Side, broker_connection

SET_BY_THE_TESTS = {
    "listenPort", "haListenPort", "namesrvAddr", "storePathRootDir", "storePathCommitLog", "brokerIP1",
    "mappedFileSizeCommitLog", "diskMaxUsedSpaceRatio", "registerBrokerIntervalSeconds", "enablePropertyFilter",
}  # fmt: skip
"""Settings the compatibility fixtures give each side (tests/support/rocketmq.py, tests/support/procs.py)."""
DELIBERATE = {
    "enableCalcFilterBitMap": ("false", "true", "Bloom bitmaps of SQL92 groups are on: filtering is sievemq's heart"),
    "compressedRegister": ("false", "true", "the topic table is compressed once it holds 1,000 topics"),
    "forceRegister": ("true", "false", "periodic rounds ask QUERY_DATA_VERSION first (docs/registration.md)"),
}
"""key -> (RocketMQ's default, sievemq's, why)."""


def settings(side: Side) -> dict[str, str]:
    async def get() -> dict[str, str]:
        conn = await broker_connection(side)
        try:
            resp = await conn.request(RemotingCommand.request(RequestCode.GET_BROKER_CONFIG), 30.0)
        finally:
            conn.close()
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        return dict(line.split("=", 1) for line in resp.body.decode().splitlines() if "=" in line)

    return asyncio.run(get())


def test_the_settings_both_have_default_alike(sides: tuple[Side, Side]) -> None:
    theirs, ours = (settings(side) for side in sides)
    shared = (set(theirs) & set(ours)) - SET_BY_THE_TESTS
    assert len(shared) >= 25, sorted(shared)  # the comparison covers the settings the two have in common
    differ = {k: (theirs[k], ours[k]) for k in sorted(shared) if theirs[k] != ours[k] and k not in DELIBERATE}
    assert not differ, differ
    for key, (rocketmq_default, sievemq_default, _why) in DELIBERATE.items():
        assert (theirs[key], ours[key]) == (rocketmq_default, sievemq_default), key
