"""The broker's own administration as RocketMQ's tools ask for it (docs/admin.md §10): GET_BROKER_CONFIG (26),
CLEAN_EXPIRED_CONSUMEQUEUE (306), CLEAN_UNUSED_TOPIC (316), DELETE_EXPIRED_COMMITLOG (329) and
VIEW_BROKER_STATS_DATA (315: ``mqadmin statsAll``).

UPDATE_BROKER_CONFIG (25) stays unserved (answered 3): sievemq reads its settings at start (file, environment,
flags) and changes none of them while running.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import orjson

from sievemq.broker.config import BrokerConfig
from sievemq.broker.stats import BrokerStats
from sievemq.broker.topics import TopicConfigManager
from sievemq.errors import RemotingError
from sievemq.protocol.names import is_system_topic
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from sievemq.remoting.headers import require_str
from sievemq.remoting.server import ProcessorTable
from sievemq.settings.properties import config_properties
from sievemq.store import MessageStore

__all__ = ["BrokerAdminProcessor"]

log = logging.getLogger(__name__)


@dataclass
class BrokerAdminProcessor:
    """Settings and clean-ups."""

    config: BrokerConfig
    topics: TopicConfigManager
    store: MessageStore
    stats: BrokerStats

    def register(self, table: ProcessorTable) -> None:
        """Put 26, 306, 316, 329 and 315 into ``table``."""
        table.register(RequestCode.GET_BROKER_CONFIG, self.get_config)
        table.register(RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE, self.clean_unused_queues)
        table.register(RequestCode.CLEAN_UNUSED_TOPIC, self.clean_unused_queues)
        table.register(RequestCode.DELETE_EXPIRED_COMMITLOG, self.delete_expired_commitlog)
        table.register(RequestCode.VIEW_BROKER_STATS_DATA, self.stats_data)

    async def get_config(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """26: the broker's settings as properties text (sievemq's settings, under their camelCase keys: many are
        RocketMQ's), and ``version`` (a DataVersion: the settings never change while the broker runs)."""
        version = orjson.dumps({"counter": 0, "stateVersion": 0, "timestamp": self.stats.boot_ms}).decode()
        body = config_properties(self.config).encode()
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"version": version}, body=body)

    async def clean_unused_queues(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """306 and 316: delete the consume queues of topics the broker no longer has (a topic deleted while its
        queues were in use); the queues of sievemq's own system topics stay."""
        unused = {t for t in self.store.topic_queues() if self.topics.get(t) is None and not is_system_topic(t)}
        if unused:
            log.warning("deleting the consume queues of topics the broker no longer has: %s", ", ".join(sorted(unused)))
            self.store.delete_topics(unused)
        return cmd.response(ResponseCode.SUCCESS)

    async def delete_expired_commitlog(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """329: run retention now, whatever ``deleteWhen`` says (expired commit-log segments and what only they
        referenced go)."""
        deleted = await self.store.clean_expired_files(force=True)
        log.warning("expired commit-log segments deleted on request: %d", deleted)
        return cmd.response(ResponseCode.SUCCESS)

    async def stats_data(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """315, header ``statsName`` (``TOPIC_PUT_NUMS``, ``TOPIC_PUT_SIZE``: ``statsKey`` a topic;
        ``GROUP_GET_NUMS``, ``GROUP_GET_SIZE``: ``topic@group``): BrokerStatsData, ``{"statsMinute"|"statsHour"|
        "statsDay": {"sum", "tps", "avgpt"}}``; SYSTEM_ERROR when nothing was counted under that name and key."""
        f = cmd.ext_fields
        name, key = require_str(f, "statsName"), require_str(f, "statsKey")
        snap = self.stats.stats_data(name, key)
        if snap is None:
            raise RemotingError(ResponseCode.SYSTEM_ERROR, f"The stats <{name}> <{key}> not exist")
        body = {f"stats{period.title()}": value for period, value in snap.items()}
        return cmd.response(ResponseCode.SUCCESS, body=orjson.dumps(body))
