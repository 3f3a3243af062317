"""Sample data for the dashboard's tests and screenshots (scripts/dashboard_screenshots.py): topics, messages and
consumer groups on a running ``sievemq dev``, with the counts the dashboard must show known in advance.

- ``orders`` (4 queues): ``ORDERS`` messages; tags alternate TagA / TagB, keys ``order-<i>``, properties ``region``
  (eu, us, apac in turn) and ``amount`` (i * 10); then ``LATE_ORDERS`` more once ``shipping`` has stopped;
- ``payments`` (2 queues): ``PAYMENTS`` messages with ``currency``;
- ``audit-log`` (1 queue): ``AUDITS`` binary bodies (shown as hex);
- group ``billing``: a push consumer of ``orders`` with ``TagA``, left running (lag 0 once it caught up);
- group ``shipping``: a push consumer of ``orders`` with SQL92 ``region = 'eu'`` that consumed the first
  ``ORDERS`` and stopped: its lag is ``LATE_ORDERS``.

Apart from ``load`` (which the API tests' exact values rely on), ``inconsistent_group`` makes group ``stock`` of
topic ``inventory``, whose two members subscribe differently: the broker keeps the first one's subscription and
refuses the second's (src/sievemq/broker/consistency.py), and the dashboard shows the group as inconsistent.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from sievemq import Message, MessageExt, Producer, PushConsumer
from sievemq.admin.api import AdminClient

ORDERS = 30
LATE_ORDERS = 7
PAYMENTS = 12
AUDITS = 5
REGIONS = ("eu", "us", "apac")


def order(i: int) -> Message:
    """The ``i``-th message of ``orders``."""
    return Message("orders", f'{{"order": {i}, "items": {i % 4 + 1}}}'.encode(), tags="TagA" if i % 2 else "TagB",
                   keys=[f"order-{i}"], properties={"region": REGIONS[i % 3], "amount": str(i * 10)})  # fmt: skip


def eu_orders(n: int) -> int:
    """How many of the first ``n`` orders have region eu."""
    return sum(1 for i in range(n) if REGIONS[i % 3] == "eu")


@dataclass
class Sample:
    """What was sent, and the consumer left running (close it with ``close()``)."""

    order_ids: dict[str, str] = field(default_factory=dict)
    """key -> msgId (UNIQ_KEY) of each order."""
    billing: PushConsumer | None = None

    async def close(self) -> None:
        """Stop the running consumer."""
        if self.billing is not None:
            await self.billing.close()


async def _create(admin: AdminClient, topic: str, queues: int) -> None:
    await admin.create_topic(topic, queues)


async def _consumer(namesrv: str, group: str, expression: str, sql: bool, want: int, stop: bool) -> PushConsumer:
    from sievemq import Selector

    consumer = PushConsumer(namesrv, group, consume_from="first")
    consumer.subscribe("orders", Selector.sql(expression) if sql else Selector.tag(expression))
    seen: set[str] = set()

    @consumer.listener
    async def on(messages: list[MessageExt]) -> None:
        for m in messages:
            seen.add(m.msg_id)

    await consumer.start()
    deadline = time.monotonic() + 60
    while len(seen) < want:
        if time.monotonic() > deadline:
            raise AssertionError(f"{group} consumed {len(seen)} of {want} messages in 60 s")
        await asyncio.sleep(0.1)
    if stop:
        await consumer.close()  # commits its offsets
    return consumer


async def load(namesrv: str) -> Sample:
    """Create the topics, send the messages, run the groups (see the module docstring)."""
    sample = Sample()
    async with AdminClient(namesrv) as admin:
        for topic, queues in (("orders", 4), ("payments", 2), ("audit-log", 1)):
            await _create(admin, topic, queues)
    producer = Producer(namesrv, "sample-producer")
    await producer.start()
    try:
        for i in range(ORDERS):
            r = await producer.send(order(i))
            sample.order_ids[f"order-{i}"] = r.msg_id
        for i in range(PAYMENTS):
            payment = Message("payments", f"payment {i}".encode(), tags="Card" if i % 3 else "Wire", keys=[f"pay-{i}"],
                              properties={"currency": "EUR" if i % 2 else "USD"})  # fmt: skip
            await producer.send(payment)
        for i in range(AUDITS):
            await producer.send(Message("audit-log", bytes([0, 159, 146, 150, i]), tags="Audit"))
        await _consumer(namesrv, "shipping", "region = 'eu'", True, eu_orders(ORDERS), stop=True)
        sample.billing = await _consumer(namesrv, "billing", "TagA", False, ORDERS // 2, stop=False)
        for i in range(ORDERS, ORDERS + LATE_ORDERS):
            r = await producer.send(order(i))
            sample.order_ids[f"order-{i}"] = r.msg_id
    finally:
        await producer.close()
    return sample


STOCK_TOPIC = "inventory"
STOCK_GROUP = "stock"
STOCK_FIRST = ("stock-a", "TagA")
"""(instance name, expression) of the member that subscribes first: its subscription is the group's."""
STOCK_SECOND = ("stock-b", "TagB")
"""(instance name, expression) of the member that subscribes differently afterwards: the broker refuses it."""


@dataclass
class Inconsistent:
    """The two running members of ``STOCK_GROUP`` (close them with ``close()``)."""

    first: PushConsumer
    second: PushConsumer

    async def close(self) -> None:
        """Stop both members."""
        await self.second.close()
        await self.first.close()


async def inconsistent_group(namesrv: str) -> Inconsistent:
    """Start ``STOCK_GROUP``'s two members on ``STOCK_TOPIC`` (2 queues, made here): ``STOCK_FIRST`` then
    ``STOCK_SECOND``, which the broker refuses; it stands by (``standby=True``: its start does not fail) and stays
    a member of the group, inconsistent."""
    from sievemq import Selector

    async with AdminClient(namesrv) as admin:
        await _create(admin, STOCK_TOPIC, 2)
    members: list[PushConsumer] = []
    try:
        for (instance, expression), standby in ((STOCK_FIRST, False), (STOCK_SECOND, True)):
            consumer = PushConsumer(namesrv, STOCK_GROUP, instance_name=instance, standby=standby,
                                    consume_from="first")  # fmt: skip
            consumer.subscribe(STOCK_TOPIC, Selector.tag(expression))

            @consumer.listener
            async def on(messages: list[MessageExt]) -> None:
                pass

            await consumer.start()
            members.append(consumer)
    except BaseException:
        for m in reversed(members):
            await m.close()
        raise
    return Inconsistent(members[0], members[1])
