"""The blocking facade (``sievemq.sync``): the same clients driven from plain functions."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from sievemq import ConsumeResult, Message, MessageExt, MessageQueue, SendStatus, sync

Names = Callable[[str], str]


def _wait(cond: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout}s")
        time.sleep(0.05)


def test_sync_producer_push_and_pull_consumers(namesrv: str, names: Names) -> None:
    topic, group = names("Sync"), names("g")
    with sync.Producer(namesrv, names("p"), default_topic_queue_nums=2) as p:
        r = p.send(Message(topic, b"one", tags="TagA"))
        assert r.status is SendStatus.SEND_OK
        batch = p.send_batch([Message(topic, f"b{i}".encode(), tags="TagA") for i in range(3)])
        assert len(batch.msg_ids) == 3
        fut = p.send_async(Message(topic, b"async", tags="TagA"))
        assert fut.result(5).status is SendStatus.SEND_OK
        p.send_oneway(Message(topic, b"oneway", tags="TagA"))

        got: list[MessageExt] = []
        threads: set[str] = set()
        lock = threading.Lock()
        consumer = sync.PushConsumer(namesrv, group, consume_from="first")
        consumer.subscribe(topic, "TagA")

        @consumer.listener
        def handle(msgs: list[MessageExt]) -> ConsumeResult:
            with lock:
                got.extend(msgs)
                threads.add(threading.current_thread().name)
            return ConsumeResult.SUCCESS

        with consumer:
            _wait(lambda: len(got) >= 6, what="six messages")
            assert len(consumer.assignment()) >= 2
        assert sorted(m.body for m in got) == sorted([b"one", b"b0", b"b1", b"b2", b"async", b"oneway"])
        assert threading.current_thread().name not in threads

        with sync.PullConsumer(namesrv, names("reader"), consume_from="first") as pc:
            queues = pc.fetch_queues(topic)
            assert len(queues) == 2 and all(isinstance(q, MessageQueue) for q in queues)
            pc.assign(queues)
            polled: list[MessageExt] = []
            _wait(lambda: bool(polled.extend(pc.poll(0.2)) or len(polled) >= 6), what="polled messages")
            q = polled[0].queue_id
            mq = MessageQueue(topic, "broker-a", q)
            pc.commit()
            assert pc.committed(mq) == pc.position(mq) > 0
            pc.seek(mq, 0)
            again = pc.poll(5.0)
            assert again and again[0].queue_offset == 0
