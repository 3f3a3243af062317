"""The shared pull loop of one queue (QueuePuller): fake brokers, fetch and sleep, no sockets."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from sievemq.client.api import PullResult
from sievemq.client.errors import FilterFunctionError
from sievemq.client.message import MessageQueue, Selector
from sievemq.client.queue_puller import FLOW_CONTROL_DELAY, PULL_RETRY_DELAY, QueuePuller, fetch_for
from sievemq.client.subscription import SubscriptionEntry
from sievemq.protocol.message import MessageExt, PropertyKey
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand

MQ = MessageQueue("T", "broker-a", 0)
MASTER, SLAVE = "10.0.0.1:10911", "10.0.0.2:10911"
Answer = PullResult | BaseException


def result(code: int, next_offset: int, *msgs: MessageExt, remark: str | None = None) -> PullResult:
    return PullResult(code, next_offset, 0, 100, list(msgs), remark)


def msg(offset: int, tag: str = "TagA") -> MessageExt:
    return MessageExt("T", f"m{offset}".encode(), queue_offset=offset, properties={PropertyKey.TAGS: tag})


class Brokers:
    """Addresses by broker id (0 = master), and the route refreshes asked for."""

    def __init__(self, addrs: dict[int, str] | None = None) -> None:
        self.addrs = {0: MASTER} if addrs is None else addrs
        self.refreshed: list[str] = []

    def broker_addr(self, broker_name: str, master_only: bool = False, prefer: int = 0) -> str | None:
        if prefer and not master_only and prefer in self.addrs:
            return self.addrs[prefer]
        if 0 in self.addrs:
            return self.addrs[0]
        if master_only or not self.addrs:
            return None
        return self.addrs[min(self.addrs)]

    async def update_route(self, topic: str) -> object:
        self.refreshed.append(topic)
        return None


@dataclass
class Target:
    """Records what the puller tells it; stops after ``rounds`` fetches (or sleeps)."""

    next: int = 0
    commit: int | None = None
    entry: SubscriptionEntry | None = field(default_factory=lambda: SubscriptionEntry.create("T", "*"))
    flow: list[bool] = field(default_factory=list)
    stop_running: bool = False
    stop_dropped: bool = False
    events: list[tuple[str, Any]] = field(default_factory=list)
    kept: list[MessageExt] = field(default_factory=list)

    def running(self) -> bool:
        return not self.stop_running

    def dropped(self) -> bool:
        return self.stop_dropped

    def subscription(self) -> SubscriptionEntry | None:
        return self.entry

    def next_offset(self) -> int:
        return self.next

    def flow_controlled(self) -> bool:
        return self.flow.pop(0) if self.flow else False

    def commit_offset(self) -> int | None:
        return self.commit

    def on_messages(self, kept: list[MessageExt], next_offset: int) -> None:
        self.events.append(("messages", [m.queue_offset for m in kept]))
        self.kept.extend(kept)
        self.next = next_offset

    def on_advance(self, next_offset: int) -> None:
        self.events.append(("advance", next_offset))
        self.next = next_offset

    async def on_offset_moved(self, next_offset: int) -> None:
        self.events.append(("moved", next_offset))
        self.next = next_offset


class Script:
    """A fetch that answers from a list and records each call; the target stops once the list is used up."""

    def __init__(self, target: Target, *answers: Answer, after: Callable[[], None] | None = None) -> None:
        self.target = target
        self.answers = list(answers)
        self.calls: list[tuple[str, int, int | None]] = []
        self.after = after

    async def __call__(self, addr: str, entry: SubscriptionEntry, offset: int, commit: int | None) -> PullResult:
        self.calls.append((addr, offset, commit))
        answer = self.answers.pop(0)
        if not self.answers:
            self.target.stop_running = True
        if self.after is not None:
            self.after()
        if isinstance(answer, BaseException):
            raise answer
        return answer


class Sleeps:
    def __init__(self, target: Target, limit: int = 100) -> None:
        self.target = target
        self.delays: list[float] = []
        self.limit = limit

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        if len(self.delays) >= self.limit:
            self.target.stop_running = True


def puller(target: Target, fetch: Script, brokers: Brokers | None = None, **kw: Any) -> tuple[QueuePuller, Sleeps]:
    sleeps = Sleeps(target, kw.pop("sleep_limit", 100))
    return QueuePuller(brokers or Brokers(), MQ, target, fetch, sleep=sleeps, **kw), sleeps


async def test_answers_move_the_offset_and_hand_out_messages() -> None:
    t = Target(next=0)
    fetch = Script(
        t,
        result(ResponseCode.SUCCESS, 3, msg(0), msg(1), msg(2)),
        result(ResponseCode.PULL_NOT_FOUND, 3),
        result(ResponseCode.PULL_RETRY_IMMEDIATELY, 5),
        result(ResponseCode.SUCCESS, 6, msg(5)),
    )
    p, sleeps = puller(t, fetch)
    await p.run()
    assert [offset for _, offset, _ in fetch.calls] == [0, 3, 3, 5]
    assert t.events == [("messages", [0, 1, 2]), ("advance", 3), ("advance", 5), ("messages", [5])]
    assert t.next == 6 and sleeps.delays == [], "no answer of those four backs off"


async def test_success_keeps_only_what_the_subscription_accepts_and_stamps_offsets() -> None:
    t = Target(entry=SubscriptionEntry.create("T", "TagA"))
    fetch = Script(t, PullResult(ResponseCode.SUCCESS, 3, 7, 42, [msg(0), msg(1, "TagB"), msg(2)]))
    await puller(t, fetch)[0].run()
    assert t.events == [("messages", [0, 2])], "the client-side tag re-check drops TagB; the offset still moves"
    assert t.next == 3
    stamps = {(m.properties[PropertyKey.MIN_OFFSET], m.properties[PropertyKey.MAX_OFFSET]) for m in t.kept}
    assert stamps == {("7", "42")}


async def test_offset_moved_warns_and_tells_the_target(caplog: pytest.LogCaptureFixture) -> None:
    t = Target(next=2)
    fetch = Script(t, result(ResponseCode.PULL_OFFSET_MOVED, 10))
    logger = logging.getLogger("test.puller.moved")
    with caplog.at_level(logging.WARNING, logger=logger.name):
        await puller(t, fetch, logger=logger)[0].run()
    assert t.events == [("moved", 10)]
    assert [(r.name, r.levelno, r.getMessage()) for r in caplog.records] == [
        (logger.name, logging.WARNING, f"offset of {MQ} moved from 2 to 10")
    ]


async def test_an_unexpected_code_backs_off_and_pulls_the_same_offset_again(caplog: pytest.LogCaptureFixture) -> None:
    t = Target(next=4)
    fetch = Script(
        t, result(ResponseCode.SUBSCRIPTION_NOT_EXIST, 0, remark="no"), result(ResponseCode.PULL_NOT_FOUND, 4)
    )
    with caplog.at_level(logging.WARNING):
        p, sleeps = puller(t, fetch)
        await p.run()
    assert [offset for _, offset, _ in fetch.calls] == [4, 4]
    assert sleeps.delays == [PULL_RETRY_DELAY]
    assert t.events == [("advance", 4)], "the refusal itself changes nothing"
    assert [r.getMessage() for r in caplog.records] == [f"pull {MQ}@4: [{ResponseCode.SUBSCRIPTION_NOT_EXIST}] no"]


async def test_errors_back_off_and_retry_the_same_offset(caplog: pytest.LogCaptureFixture) -> None:
    t = Target(next=7)
    fetch = Script(
        t,
        OSError("reset"),
        FilterFunctionError("no filter server"),
        result(ResponseCode.PULL_NOT_FOUND, 8),
    )
    with caplog.at_level(logging.WARNING):
        p, sleeps = puller(t, fetch)
        await p.run()
    assert [offset for _, offset, _ in fetch.calls] == [7, 7, 7]
    assert sleeps.delays == [PULL_RETRY_DELAY, PULL_RETRY_DELAY]
    assert [r.getMessage() for r in caplog.records] == [f"pull {MQ}@7 failed: reset; retrying in 3s"], (
        "a filter-function error is logged where it arises, not here"
    )


async def test_an_error_after_a_stop_ends_the_loop_quietly(caplog: pytest.LogCaptureFixture) -> None:
    t = Target()

    def stop() -> None:
        t.stop_dropped = True

    fetch = Script(t, OSError("reset"), result(ResponseCode.SUCCESS, 1, msg(0)), after=stop)
    with caplog.at_level(logging.WARNING):
        p, sleeps = puller(t, fetch)
        await p.run()
    assert len(fetch.calls) == 1 and sleeps.delays == [] and not caplog.records


async def test_an_answer_for_a_dropped_queue_is_ignored() -> None:
    t = Target()

    def drop() -> None:
        t.stop_dropped = True

    fetch = Script(t, result(ResponseCode.SUCCESS, 1, msg(0)), result(ResponseCode.SUCCESS, 2, msg(1)), after=drop)
    p, _ = puller(t, fetch)
    await p.run()
    assert len(fetch.calls) == 1 and t.events == [] and t.next == 0


async def test_an_unknown_broker_refreshes_the_route_and_backs_off(caplog: pytest.LogCaptureFixture) -> None:
    t = Target()
    brokers = Brokers({})
    fetch = Script(t, result(ResponseCode.SUCCESS, 1))
    with caplog.at_level(logging.WARNING):
        p, sleeps = puller(t, fetch, brokers, sleep_limit=2)
        await p.run()
    assert fetch.calls == [] and brokers.refreshed == ["T", "T"]
    assert sleeps.delays == [PULL_RETRY_DELAY, PULL_RETRY_DELAY]
    assert "no address known for broker broker-a" in caplog.records[0].getMessage()


async def test_the_commit_offset_rides_only_on_pulls_from_the_master() -> None:
    t = Target(commit=17)
    fetch = Script(t, result(ResponseCode.PULL_NOT_FOUND, 0), result(ResponseCode.PULL_NOT_FOUND, 0))
    brokers = Brokers()
    p, _ = puller(t, fetch, brokers)
    await p.step()
    brokers.addrs = {1: SLAVE}  # the master is gone: pulls go to a slave, which must not store the offset
    await p.step()
    assert fetch.calls == [(MASTER, 0, 17), (SLAVE, 0, None)]


def suggesting(code: int, next_offset: int, broker_id: int) -> PullResult:
    return PullResult(code, next_offset, 0, 100, [], None, None, broker_id)


async def test_the_next_pull_goes_where_the_answer_suggests_and_back_to_the_master_after_a_failure() -> None:
    t = Target(commit=5)
    fetch = Script(
        t,
        suggesting(ResponseCode.PULL_NOT_FOUND, 0, 1),  # the master: "consume slowly from broker 1"
        suggesting(ResponseCode.PULL_NOT_FOUND, 0, 0),  # the slave: "back to the master"
        suggesting(ResponseCode.PULL_NOT_FOUND, 0, 1),
        ConnectionError("slave gone"),
        suggesting(ResponseCode.PULL_NOT_FOUND, 0, 7),  # an id the routes do not list: the master
        result(ResponseCode.PULL_NOT_FOUND, 0),
    )
    p, _ = puller(t, fetch, Brokers({0: MASTER, 1: SLAVE}))
    for _ in range(6):
        await p.step()
    assert fetch.calls == [(MASTER, 0, 5), (SLAVE, 0, None), (MASTER, 0, 5), (SLAVE, 0, None), (MASTER, 0, 5),
                           (MASTER, 0, 5)]  # fmt: skip


async def test_flow_control_pauses_without_pulling() -> None:
    t = Target(flow=[True, True])
    fetch = Script(t, result(ResponseCode.PULL_NOT_FOUND, 0))
    p, sleeps = puller(t, fetch)
    await p.run()
    assert sleeps.delays == [FLOW_CONTROL_DELAY, FLOW_CONTROL_DELAY] and len(fetch.calls) == 1


async def test_the_loop_ends_when_the_topic_is_no_longer_subscribed() -> None:
    t = Target(entry=None)
    fetch = Script(t, result(ResponseCode.PULL_NOT_FOUND, 0))
    p, sleeps = puller(t, fetch)
    await p.run()
    assert fetch.calls == [] and sleeps.delays == []


class FakeConn:
    """Answers every request with PULL_NOT_FOUND and keeps the requests."""

    def __init__(self) -> None:
        self.requests: list[tuple[RemotingCommand, float]] = []

    async def request(self, cmd: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:
        self.requests.append((cmd, timeout))
        return cmd.response(ResponseCode.PULL_NOT_FOUND, ext_fields={"nextBeginOffset": 9})


@dataclass
class Settings:
    pull_batch_size: int = 32
    pull_suspend: float = 15.0
    pull_timeout: float = 30.0


async def test_fetch_for_pulls_with_the_settings_of_the_moment() -> None:
    conn = FakeConn()

    class Inst:
        async def conn(self, addr: str) -> FakeConn:
            assert addr == MASTER
            return conn

    settings = Settings()
    fetch = fetch_for(Inst(), MQ, "g", settings)  # type: ignore[arg-type]
    entry = SubscriptionEntry.create("T", "TagA || TagB")
    r = await fetch(MASTER, entry, 5, 4)
    assert (r.code, r.next_begin_offset) == (ResponseCode.PULL_NOT_FOUND, 9)
    settings.pull_batch_size, settings.pull_suspend = 8, 1.5
    await fetch(MASTER, entry, 9, None)
    (first, t1), (second, t2) = conn.requests
    assert first.code == second.code == RequestCode.PULL_MESSAGE and t1 == t2 == 30.0
    f1, f2 = first.ext_fields, second.ext_fields
    assert (f1["consumerGroup"], f1["topic"], f1["queueId"], f1["queueOffset"]) == ("g", "T", "0", "5")
    assert (f1["maxMsgNums"], f1["suspendTimeoutMillis"], f1["commitOffset"]) == ("32", "15000", "4")
    assert f1["subscription"] == "TagA || TagB" and int(f1["sysFlag"]) & 0x1, "FLAG_COMMIT_OFFSET"
    assert (f2["maxMsgNums"], f2["suspendTimeoutMillis"], f2["queueOffset"]) == ("8", "1500", "9")
    assert not int(f2["sysFlag"]) & 0x1, "no commit offset, no FLAG_COMMIT_OFFSET"


async def test_a_filter_function_subscription_is_pulled_through_the_filter_servers() -> None:
    calls: list[tuple[MessageQueue, str, int, dict[str, Any]]] = []

    class Servers:  # FunctionFilters' pull
        async def pull(
            self, mq: MessageQueue, broker_addr: str, entry: SubscriptionEntry, offset: int, **kw: Any
        ) -> PullResult:
            calls.append((mq, broker_addr, offset, kw))
            return result(ResponseCode.PULL_NOT_FOUND, offset)

    class Inst:
        async def conn(self, addr: str) -> FakeConn:
            raise AssertionError("a filter-function pull does not go to the broker")

    servers = Servers()
    fetch = fetch_for(Inst(), MQ, "g", Settings(pull_batch_size=4), lambda: servers)  # type: ignore[arg-type,return-value]
    await fetch(MASTER, SubscriptionEntry.create("T", Selector.function("shop.filters:big")), 3, 2)
    assert calls == [(MQ, MASTER, 3, {"max_nums": 4, "suspend_ms": 15000, "commit_offset": 2, "timeout": 30.0})]
