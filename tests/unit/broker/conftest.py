"""The broker's services in one process, without sockets: a real store in a temporary folder, real managers.

Processors are built by each test from the few services they take, and called with a ``Connection`` that has no
transport (what a processor reads of it: the peer address and the client id a heartbeat recorded).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from sievemq.broker.clients import ConsumerManager, ProducerManager
from sievemq.broker.config_files import ConfigWriter
from sievemq.broker.filter_manager import ConsumerFilterManager
from sievemq.broker.groups import SubscriptionGroupManager
from sievemq.broker.long_polling import PullHoldService
from sievemq.broker.offsets import ConsumerOffsetManager
from sievemq.broker.stats import BrokerStats
from sievemq.broker.topics import TopicConfigManager
from sievemq.filter.bloom import BloomFilter
from sievemq.protocol.message import MessageExt
from sievemq.remoting.connection import Connection
from sievemq.store import MessageStore, StoreConfig

HOST = ("10.1.2.3", 10911)
BROKER = "broker-t"
CLUSTER = "TestCluster"


@dataclass
class Parts:
    """What a broker is made of, minus its servers."""

    root: Path
    store: MessageStore
    writer: ConfigWriter
    topics: TopicConfigManager
    groups: SubscriptionGroupManager
    offsets: ConsumerOffsetManager
    consumers: ConsumerManager
    producers: ProducerManager
    filters: ConsumerFilterManager
    hold: PullHoldService
    stats: BrokerStats
    notified: list[str] = field(default_factory=list)

    def conn(self, client_id: str | None = None, peer: tuple[str, int] = ("10.0.0.7", 40000)) -> Connection:
        """A connection object without a socket, as if ``client_id`` had sent a heartbeat on it."""
        c = Connection()
        c.peer = peer
        if client_id is not None:
            c.attrs["client_id"] = client_id
        return c

    async def put(self, topic: str, body: bytes, queue_id: int = 0, **props: str) -> MessageExt:
        """Store one message directly."""
        result = await self.store.put_message(MessageExt(topic, body, properties=dict(props), queue_id=queue_id))
        assert result.ok, result.status
        return result.msgs[0]


@pytest.fixture
async def parts(tmp_path: Path) -> AsyncIterator[Parts]:
    """A loaded store and fresh managers under ``tmp_path`` (auto-creation of topics and groups on)."""
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    writer = ConfigWriter()
    save = writer.save
    store = MessageStore(StoreConfig(root=tmp_path / "store", commitlog_file_size=1 << 20, delete_when_hours=()), HOST)
    notified: list[str] = []
    bloom = BloomFilter.create(20, 32)
    p = Parts(
        tmp_path,
        store,
        writer,
        TopicConfigManager(config_dir, BROKER, CLUSTER, 4, True, save),
        SubscriptionGroupManager(config_dir, True, 16, save),
        ConsumerOffsetManager(config_dir, save),
        ConsumerManager(lambda group, conns: notified.append(group)),
        ProducerManager(),
        ConsumerFilterManager(config_dir, bloom, save),
        PullHoldService(),
        BrokerStats(),
        notified,
    )
    store.set_bitmap_calculator(p.filters.calc_bitmap)
    store.load()
    store.add_dispatch_listener(p.hold.on_dispatch)
    await store.start()
    try:
        yield p
    finally:
        await writer.close()
        await store.shutdown()
