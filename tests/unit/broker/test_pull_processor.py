"""PULL_MESSAGE called directly: filters, refusals with reasons, subscription versions, piggybacked commits, long
polling woken by a dispatch (no sockets)."""

from __future__ import annotations

import asyncio
import time

import pytest

from sievemq.broker.clients import ClientChannel
from sievemq.broker.processors.pull import PullProcessor, PullSettings
from sievemq.errors import RemotingError
from sievemq.protocol.heartbeat import ConsumerData, Subscription
from sievemq.protocol.message import MessageExt, decode_records
from sievemq.protocol.pull_header import FLAG_COMMIT_OFFSET, FLAG_SUBSCRIPTION, FLAG_SUSPEND, PullMessageHeader
from sievemq.protocol.reasons import Reason
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.server import settled
from tests.integration.helpers import eventually
from tests.support.quiet import quiet_period
from tests.unit.broker.conftest import Parts


def puller(p: Parts, settings: PullSettings | None = None) -> PullProcessor:
    return PullProcessor(
        p.store, p.topics, p.groups, p.consumers, p.filters, p.offsets, p.hold, p.stats, settings or PullSettings()
    )


def pull_cmd(
    topic: str, offset: int = 0, *, group: str = "g", flag: int = 0, queue_id: int = 0, **kw: object
) -> RemotingCommand:
    h = PullMessageHeader(group, topic, queue_id, offset, sys_flag=flag, **kw)  # type: ignore[arg-type]
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, h.to_fields())


def join(p: Parts, client_id: str, expression: str, version: int, topic: str = "T") -> None:
    conn = p.conn(client_id)
    p.consumers.register(
        ClientChannel(client_id, conn, "JAVA", 409, time.monotonic()),
        ConsumerData("g", subscriptions=[Subscription(topic, expression, "TAG", version)]),
    )


async def test_tag_filter_and_statistics(parts: Parts) -> None:
    parts.topics.create_system_topic("T", 1)
    for tag in "ABAB":
        await parts.put("T", tag.encode(), TAGS=tag)
    cmd = pull_cmd("T", flag=FLAG_SUBSCRIPTION, subscription="B", expression_type="TAG")
    resp = await settled(puller(parts).answer(parts.conn(), cmd))
    assert resp.code == ResponseCode.SUCCESS
    assert [m.body for m in decode_records(resp.body)] == [b"B", b"B"]
    assert resp.ext_fields["nextBeginOffset"] == "4" and parts.stats.get_by_topic["T"] == 2
    resp = await settled(puller(parts).answer(parts.conn(), pull_cmd("T", 4, flag=FLAG_SUBSCRIPTION, subscription="*")))
    assert resp.code == ResponseCode.PULL_NOT_FOUND and resp.remark == "OFFSET_OVERFLOW_ONE"


async def test_an_inconsistent_client_is_refused_with_the_reason(parts: Parts) -> None:
    parts.topics.create_system_topic("T", 1)
    join(parts, "c1", "TagA", 1)
    join(parts, "c2", "TagB", 2)
    with pytest.raises(RemotingError) as e:
        await settled(puller(parts).answer(parts.conn("c2"), pull_cmd("T")))
    assert e.value.code == ResponseCode.SUBSCRIPTION_NOT_EXIST and e.value.reason == Reason.SUBSCRIPTION_INCONSISTENT
    resp = await settled(puller(parts).answer(parts.conn("c1"), pull_cmd("T")))
    assert resp.code == ResponseCode.PULL_NOT_FOUND


async def test_a_later_consistent_client_pulls_with_its_own_newer_version(parts: Parts) -> None:
    """A Java push consumer pulls without its expression but with its subVersion (registration time). The second
    client of a group registers the same expression later, so its version is newer than the group's first
    registration; it must not be told its subscription is not the latest."""
    parts.topics.create_system_topic("T", 1)
    join(parts, "c1", "TagA", 1000)
    join(parts, "c2", "TagA", 2000)
    resp = await settled(puller(parts).answer(parts.conn("c2"), pull_cmd("T", sub_version=2000)))
    assert resp.code == ResponseCode.PULL_NOT_FOUND
    # A pull newer than what the client itself registered is refused: its heartbeat has not arrived yet.
    with pytest.raises(RemotingError) as e:
        await settled(puller(parts).answer(parts.conn("c2"), pull_cmd("T", sub_version=3000)))
    assert e.value.code == ResponseCode.SUBSCRIPTION_NOT_LATEST


async def test_refusals_before_reading(parts: Parts) -> None:
    p = puller(parts)
    with pytest.raises(RemotingError) as e:
        await settled(p.answer(parts.conn(), pull_cmd("Nope")))
    assert e.value.code == ResponseCode.TOPIC_NOT_EXIST
    parts.topics.create_system_topic("T", 1)
    with pytest.raises(RemotingError) as e:
        await settled(p.answer(parts.conn(), pull_cmd("T")))
    assert e.value.code == ResponseCode.SUBSCRIPTION_NOT_EXIST, "no heartbeat, no subscription in the header"
    with pytest.raises(RemotingError) as e:
        await settled(p.answer(parts.conn(), pull_cmd("T", queue_id=1, flag=FLAG_SUBSCRIPTION, subscription="*")))
    assert (e.value.code, e.value.reason) == (ResponseCode.SYSTEM_ERROR, Reason.INVALID_HEADER), "T has 1 queue"
    with pytest.raises(RemotingError) as e:
        await settled(
            p.answer(parts.conn(), pull_cmd("T", flag=FLAG_SUBSCRIPTION, subscription="a > 1", expression_type="SQL9"))
        )
    assert e.value.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    off = PullProcessor(
        parts.store, parts.topics, parts.groups, parts.consumers, parts.filters, parts.offsets, parts.hold,
        parts.stats, PullSettings(property_filter=False),
    )  # fmt: skip
    with pytest.raises(RemotingError) as e:
        await settled(
            off.answer(
                parts.conn(), pull_cmd("T", flag=FLAG_SUBSCRIPTION, subscription="a > 1", expression_type="SQL92")
            )
        )
    assert e.value.reason == Reason.SQL92_DISABLED


async def test_piggybacked_commit(parts: Parts) -> None:
    parts.topics.create_system_topic("T", 1)
    cmd = pull_cmd("T", flag=FLAG_SUBSCRIPTION | FLAG_COMMIT_OFFSET, subscription="*", commit_offset=7)
    await settled(puller(parts).answer(parts.conn(), cmd))
    assert parts.offsets.query("g", "T", 0) == 7


async def test_a_held_pull_wakes_on_a_matching_dispatch_only(parts: Parts) -> None:
    parts.topics.create_system_topic("T", 1)
    cmd = pull_cmd("T", flag=FLAG_SUBSCRIPTION | FLAG_SUSPEND, subscription="B", suspend_timeout_millis=10_000)
    task = asyncio.create_task(settled(puller(parts).answer(parts.conn(), cmd)))
    await eventually(lambda: parts.hold.held() == 1, timeout=5.0, what="the pull held")
    await parts.put("T", b"a", TAGS="A")  # not for this subscription: it keeps waiting
    await quiet_period(0.05, "the pull answered by a dispatch it does not match", unchanged=task.done)
    assert not task.done()
    t0 = time.monotonic()
    await parts.put("T", b"b", TAGS="B")
    resp = await asyncio.wait_for(task, 2.0)
    assert time.monotonic() - t0 < 1.0 and parts.hold.held() == 0
    assert resp.code == ResponseCode.SUCCESS and [m.body for m in decode_records(resp.body)] == [b"b"]


async def test_a_message_stored_before_the_hold_begins_answers_the_pull(parts: Parts) -> None:
    """A pull that found nothing is held from the next turn of the loop on (``answer`` returns what to await): a
    message stored in between must answer it, not leave it held for its whole suspend time."""
    parts.topics.create_system_topic("T", 1)
    cmd = pull_cmd("T", flag=FLAG_SUBSCRIPTION | FLAG_SUSPEND, subscription="*", suspend_timeout_millis=60_000)
    pending = puller(parts).answer(parts.conn(), cmd)
    assert not isinstance(pending, RemotingCommand), "nothing stored yet: the pull is to be held"
    result = parts.store.put_now([MessageExt("T", b"between", queue_id=0)])  # same turn: the hold has not begun
    assert result.ok, result.status
    task = asyncio.ensure_future(settled(pending))
    for _ in range(10):  # a few turns of the loop, no I/O: the answer is ready, or the pull waits for a dispatch
        await asyncio.sleep(0)
    assert task.done(), "the pull was held though its message was stored"
    resp = task.result()
    assert resp.code == ResponseCode.SUCCESS and [m.body for m in decode_records(resp.body)] == [b"between"]
    assert parts.hold.held() == 0


async def test_short_polling_holds_only_the_short_time(parts: Parts) -> None:
    parts.topics.create_system_topic("T", 1)
    p = PullProcessor(
        parts.store, parts.topics, parts.groups, parts.consumers, parts.filters, parts.offsets, parts.hold,
        parts.stats, PullSettings(long_polling=False, short_polling_ms=50),
    )  # fmt: skip
    cmd = pull_cmd("T", flag=FLAG_SUBSCRIPTION | FLAG_SUSPEND, subscription="*", suspend_timeout_millis=10_000)
    t0 = time.monotonic()
    resp = await settled(p.answer(parts.conn(), cmd))
    assert resp.code == ResponseCode.PULL_NOT_FOUND and time.monotonic() - t0 < 1.0
