"""CONSUMER_SEND_MSG_BACK (36): a consumer failed a message; it comes back through the retry topic or goes to the
dead-letter topic (``broker/retry.py`` decides which)."""

from __future__ import annotations

import random
from dataclasses import dataclass

from sievemq.acl.permission import Perm
from sievemq.broker.groups import SubscriptionGroupManager
from sievemq.broker.processors.send import stored_code
from sievemq.broker.records import queued_record
from sievemq.broker.retry import client_retry_limit, decide
from sievemq.broker.schedule import park_for_delay
from sievemq.broker.topics import TopicConfigManager
from sievemq.broker.write_gate import OPEN, WriteGate
from sievemq.errors import RemotingError
from sievemq.protocol.message import MessageExt, PropertyKey
from sievemq.protocol.names import dlq_topic, retry_topic
from sievemq.protocol.route import PERM_READ, PERM_WRITE
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from sievemq.remoting.headers import get_int, int_or, require_int, require_str
from sievemq.remoting.server import ProcessorTable, ResourceCheck, allow_all
from sievemq.store import MessageStore


@dataclass
class SendBackProcessor:
    """Re-stores failed messages for a later retry, or dead-letters them."""

    store: MessageStore
    topics: TopicConfigManager
    groups: SubscriptionGroupManager
    store_host: tuple[str, int]
    max_delay_level: int
    gate: WriteGate = OPEN
    """A slave refuses send-backs (its consumers send them to the master)."""
    check_more: ResourceCheck = allow_all
    """The ACL's check of the record's topic (SUB: the sender must be allowed to read what it sends back)."""

    def register(self, table: ProcessorTable) -> None:
        """Put CONSUMER_SEND_MSG_BACK into ``table``."""
        table.register(RequestCode.CONSUMER_SEND_MSG_BACK, self.send_back)

    async def send_back(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """36: header ``group``, ``offset`` (the commit-log offset of the failed message), ``delayLevel`` (0: the
        attempt's own level, < 0: dead-letter now), ``maxReconsumeTimes`` (``originMsgId`` is read by no one)."""
        refusal = self.gate.write_refusal()
        if refusal is not None:
            raise refusal
        f = cmd.ext_fields
        group = require_str(f, "group")
        offset = require_int(f, "offset")
        requested_delay = int_or(f, "delayLevel", 0)
        gc = self.groups.find(group)
        if gc is None:
            raise RemotingError(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group [{group}] not exist")
        revision = self.topics.revision
        found = queued_record(self.store, offset)
        if found is None:  # no record, or bytes inside a body: RocketMQ's answer to an offset it cannot read
            raise RemotingError(ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {offset}")
        old = found[1]
        self.check_more(conn, cmd, {old.topic: Perm.SUB})  # as a pull of that topic would be checked
        props = dict(old.properties)
        props.setdefault(PropertyKey.RETRY_TOPIC, old.topic)
        # As RocketMQ's broker: the record's own ORIGIN_MESSAGE_ID, else the record's offsetMsgId (the header's
        # originMsgId is not used); the copy does not wait for the flush (docs/protocol/requests.md §11).
        props.setdefault(PropertyKey.ORIGIN_MESSAGE_ID, old.offset_msg_id)
        props[PropertyKey.WAIT] = "false"
        props.pop(PropertyKey.DELAY, None)
        limit = client_retry_limit(get_int(f, "maxReconsumeTimes"), cmd.version)
        decision = decide(old.reconsume_times, gc.retryMaxTimes if limit is None else limit, requested_delay)
        if decision.dead_letter:
            topic = dlq_topic(group)
            self.topics.create_system_topic(topic, 1, PERM_READ | PERM_WRITE)
            queue_id = 0
        else:
            topic = retry_topic(group)
            tc = self.topics.create_system_topic(topic, gc.retryQueueNums)
            queue_id = random.randrange(max(1, tc.write_queue_nums))
            props[PropertyKey.DELAY] = str(decision.delay_level)
        msg = MessageExt(
            topic=topic,
            body=old.body,
            flag=old.flag,
            properties=props,
            queue_id=queue_id,
            sys_flag=old.sys_flag,
            born_timestamp=old.born_timestamp,
            born_host=old.born_host,
            store_host=self.store_host,
            reconsume_times=old.reconsume_times + 1,
        )
        park_for_delay(msg, self.max_delay_level)
        stored_code(await self.store.put_message(msg), "retry message")
        if self.topics.revision != revision:  # its retry or DLQ topic is on disk first
            await self.topics.saved_since(revision, "retry message")
        return cmd.response(ResponseCode.SUCCESS)
