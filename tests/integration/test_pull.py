"""Pulls: tag filtering by hash in the consume queue, and long polling."""

from __future__ import annotations

import asyncio
import statistics
import time

from sievemq.client import api
from sievemq.protocol.batch import BatchEntry
from sievemq.protocol.heartbeat import ConsumerData, HeartbeatData, Subscription
from sievemq.remoting.codes import ResponseCode
from tests.integration.conftest import OpenConn
from tests.integration.helpers import create_topic, held_pulls, max_offset, wait_held
from tests.support import wire
from tests.support.procs import Proc

GROUP = "pull-group"


async def test_tag_filter_returns_only_matching_tags(broker: Proc, open_conn: OpenConn) -> None:
    conn = await open_conn(broker)
    await create_topic(conn, "TagTopic", queues=1)
    tags = ["TagA", "TagC", "TagB", None, "TagA", "tagA", "TagD", "TagB"]
    for i, tag in enumerate(tags):
        await wire.send_message(conn, "TagTopic", f"m{i}".encode(), tags=tag, queue_id=0)

    r = await api.pull_message(conn, GROUP, "TagTopic", 0, 0, subscription="TagA || TagB")
    assert r.code == ResponseCode.SUCCESS
    assert [(m.body, m.tags) for m in r.messages] == [
        (b"m0", "TagA"),
        (b"m2", "TagB"),
        (b"m4", "TagA"),
        (b"m7", "TagB"),
    ]
    assert r.next_begin_offset == len(tags)
    assert (r.min_offset, r.max_offset) == (0, len(tags))

    # From the middle, with a one-tag expression; and "*" gets everything, tag-less included.
    r = await api.pull_message(conn, GROUP, "TagTopic", 0, 3, subscription="TagB")
    assert [m.body for m in r.messages] == [b"m7"]
    r = await api.pull_message(conn, GROUP, "TagTopic", 0, 0, subscription="*")
    assert [m.body for m in r.messages] == [f"m{i}".encode() for i in range(len(tags))]


async def test_tag_filter_with_unicode_and_negative_hash_tags(broker: Proc, open_conn: OpenConn) -> None:
    """Tag codes are Java String.hashCode over UTF-16 units (docs/protocol/consume-queue.md §4), negatives included."""
    conn = await open_conn(broker)
    await create_topic(conn, "UniTags", queues=1)
    long_tag = "a_very_long_tag_name_for_overflow_testing"  # hash -784543840
    tags = ["中文", "TagA", "😀", long_tag, "中", " TagA "]
    for i, tag in enumerate(tags):
        await wire.send_message(conn, "UniTags", f"u{i}".encode(), tags=tag, queue_id=0)
    r = await api.pull_message(conn, GROUP, "UniTags", 0, 0, subscription=f"中文 || 😀 || {long_tag}")
    assert [(m.body, m.tags) for m in r.messages] == [(b"u0", "中文"), (b"u2", "😀"), (b"u3", long_tag)]
    # Expression tags are trimmed, stored tags are not.
    r = await api.pull_message(conn, GROUP, "UniTags", 0, 0, subscription="  TagA  ")
    assert [m.body for m in r.messages] == [b"u1"]


async def test_tag_filter_subscription_from_heartbeat(broker: Proc, open_conn: OpenConn) -> None:
    """Without FLAG_SUBSCRIPTION the broker filters by the group's heartbeat subscription."""
    conn = await open_conn(broker)
    await create_topic(conn, "HbTagTopic", queues=1)
    for i, tag in enumerate(["TagA", "TagX", "TagB"]):
        await wire.send_message(conn, "HbTagTopic", f"h{i}".encode(), tags=tag, queue_id=0)
    r = await api.pull_message(conn, "hb-tag-group", "HbTagTopic", 0, 0, subscription=None)
    assert r.code == ResponseCode.SUBSCRIPTION_NOT_EXIST, "no heartbeat yet"
    hb = HeartbeatData(
        "hb-tag-client",
        consumers=[ConsumerData("hb-tag-group", subscriptions=[Subscription("HbTagTopic", "TagA || TagB", "TAG", 1)])],
    )
    await api.heartbeat(conn, hb)
    r = await api.pull_message(conn, "hb-tag-group", "HbTagTopic", 0, 0, subscription=None)
    assert r.code == ResponseCode.SUCCESS
    assert [m.body for m in r.messages] == [b"h0", b"h2"]


async def test_long_run_of_non_matching_messages_answers_pull_retry_immediately(
    broker: Proc, open_conn: OpenConn
) -> None:
    conn = await open_conn(broker)
    await create_topic(conn, "RunTopic", queues=1)
    run = 3000
    for start in range(0, run, 250):
        entries = [BatchEntry(body=f"n{i}".encode(), properties={"TAGS": "Noise"}) for i in range(start, start + 250)]
        await wire.send_batch(conn, "RunTopic", entries, queue_id=0)
    await wire.send_message(conn, "RunTopic", b"wanted", tags="TagA", queue_id=0)
    assert await max_offset(conn, "RunTopic", 0) == run + 1

    offset, rounds, seen = 0, 0, []
    while not seen:
        rounds += 1
        assert rounds < 100, "the consumer must make progress through a filtered-out run"
        r = await api.pull_message(conn, GROUP, "RunTopic", 0, offset, subscription="TagA || TagB")
        if r.code == ResponseCode.PULL_RETRY_IMMEDIATELY:
            assert offset < r.next_begin_offset <= run, (offset, r)
            assert not r.messages
        else:
            assert r.code == ResponseCode.SUCCESS, r
            seen = [m.body for m in r.messages]
        offset = r.next_begin_offset
    assert rounds > 1, "a run longer than one scan must answer 20 first"
    assert seen == [b"wanted"]
    assert offset == run + 1

    # A pull at the end of the queue is 19 with the same offset back.
    r = await api.pull_message(conn, GROUP, "RunTopic", 0, offset, subscription="TagA")
    assert (r.code, r.next_begin_offset) == (ResponseCode.PULL_NOT_FOUND, offset)


async def test_long_polling_wakes_a_held_pull_within_50ms_of_the_send(broker: Proc, open_conn: OpenConn) -> None:
    puller, sender = await open_conn(broker), await open_conn(broker)
    await create_topic(sender, "LpTopic", queues=1)
    gaps = []
    for i in range(5):
        pull = asyncio.create_task(
            _timed(api.pull_message(puller, GROUP, "LpTopic", 0, i, suspend_ms=10_000, timeout=15))
        )
        await wait_held(sender, pull)
        sent = await wire.send_message(sender, "LpTopic", f"lp{i}".encode(), queue_id=0)
        t_send = time.monotonic()
        assert sent.queue_offset == i
        result, t_pull = await asyncio.wait_for(pull, 5.0)
        assert result.code == ResponseCode.SUCCESS, result
        assert [m.body for m in result.messages] == [f"lp{i}".encode()]
        gaps.append(t_pull - t_send)
    median = statistics.median(gaps)
    assert median < 0.050, f"held pulls answered {[round(g * 1000, 1) for g in gaps]} ms after the send"


async def test_held_pull_times_out_at_its_suspend_time_with_19(broker: Proc, open_conn: OpenConn) -> None:
    conn = await open_conn(broker)
    await create_topic(conn, "LpIdle", queues=1)
    await wire.send_message(conn, "LpIdle", b"one", queue_id=0)
    t0 = time.monotonic()
    r = await api.pull_message(conn, GROUP, "LpIdle", 0, 1, suspend_ms=1500, timeout=10)
    elapsed = time.monotonic() - t0
    assert r.code == ResponseCode.PULL_NOT_FOUND
    assert r.next_begin_offset == 1 and r.max_offset == 1
    assert 1.3 <= elapsed <= 2.5, f"held {elapsed:.2f}s for a 1.5 s suspend"


async def test_held_pull_ignores_non_matching_messages(broker: Proc, open_conn: OpenConn) -> None:
    puller, sender = await open_conn(broker), await open_conn(broker)
    await create_topic(sender, "LpTags", queues=1)
    pull = asyncio.create_task(
        api.pull_message(puller, GROUP, "LpTags", 0, 0, subscription="TagA", suspend_ms=10_000, timeout=15)
    )
    await wait_held(sender, pull)
    await wire.send_message(sender, "LpTags", b"noise", tags="TagZ", queue_id=0)
    # A wake-up would have released the pull before the broker answers this later request.
    assert await held_pulls(sender) == 1 and not pull.done(), "a non-matching message answered the held pull"
    await wire.send_message(sender, "LpTags", b"wanted", tags="TagA", queue_id=0)
    r = await asyncio.wait_for(pull, 2.0)
    assert r.code == ResponseCode.SUCCESS
    assert [m.body for m in r.messages] == [b"wanted"]


async def test_held_pull_does_not_block_other_requests_on_the_same_connection(
    broker: Proc, open_conn: OpenConn
) -> None:
    conn = await open_conn(broker)
    await create_topic(conn, "LpShared", queues=1)
    pull = asyncio.create_task(api.pull_message(conn, GROUP, "LpShared", 0, 0, suspend_ms=10_000, timeout=15))
    await wait_held(conn, pull)

    hb = HeartbeatData("shared-conn-client", producer_groups=["shared-producer"])
    t0 = time.monotonic()
    resp = await wire.heartbeat(conn, hb, timeout=2.0)
    assert resp.code == ResponseCode.SUCCESS
    assert time.monotonic() - t0 < 0.5, "the heartbeat waited behind the held pull"
    assert not pull.done(), "the pull is still held"

    t0 = time.monotonic()
    sent = await wire.send_message(conn, "LpShared", b"same-conn", queue_id=0, timeout=2.0)
    assert time.monotonic() - t0 < 0.5
    r = await asyncio.wait_for(pull, 2.0)
    assert r.code == ResponseCode.SUCCESS
    assert [m.offset_msg_id for m in r.messages] == [sent.msg_id]


# ----------------------------------------------------------------------------------------------- helpers


async def _timed(aw):  # type: ignore[no-untyped-def]
    result = await aw
    return result, time.monotonic()


async def test_held_pull_is_released_when_its_connection_closes(broker: Proc, open_conn: OpenConn) -> None:
    admin, puller = await open_conn(broker), await open_conn(broker)
    await create_topic(admin, "LpGone", queues=2)
    pulls = [
        asyncio.create_task(api.pull_message(puller, GROUP, "LpGone", q, 0, suspend_ms=10_000, timeout=15))
        for q in range(2)
    ]
    await wait_held(admin, pulls[0], count=2)
    puller.close()
    await asyncio.gather(*pulls, return_exceptions=True)
    deadline = time.monotonic() + 3.0
    while await held_pulls(admin) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert await held_pulls(admin) == 0, "held pulls of a closed connection must be dropped"
    # The queues still work for everyone else.
    await wire.send_message(admin, "LpGone", b"x", queue_id=0)
    r = await api.pull_message(admin, GROUP, "LpGone", 0, 0)
    assert [m.body for m in r.messages] == [b"x"]


async def test_a_send_wakes_only_the_pulls_of_its_queue(broker: Proc, open_conn: OpenConn) -> None:
    admin, puller = await open_conn(broker), await open_conn(broker)
    await create_topic(admin, "LpQueues", queues=2)
    p0 = asyncio.create_task(api.pull_message(puller, GROUP, "LpQueues", 0, 0, suspend_ms=10_000, timeout=15))
    p1 = asyncio.create_task(api.pull_message(puller, GROUP, "LpQueues", 1, 0, suspend_ms=10_000, timeout=15))
    await wait_held(admin, p0, count=2)
    await wire.send_message(admin, "LpQueues", b"to-1", queue_id=1)
    r1 = await asyncio.wait_for(p1, 2.0)
    assert [m.body for m in r1.messages] == [b"to-1"]
    assert not p0.done() and await held_pulls(admin) == 1
    await wire.send_message(admin, "LpQueues", b"to-0", queue_id=0)
    r0 = await asyncio.wait_for(p0, 2.0)
    assert [m.body for m in r0.messages] == [b"to-0"]
