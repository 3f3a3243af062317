"""Client management: HEART_BEAT (34), UNREGISTER_CLIENT (35), GET_CONSUMER_LIST_BY_GROUP (38),
CHECK_CLIENT_CONFIG (46), and the ordered-consumption locks LOCK_BATCH_MQ (41) / UNLOCK_BATCH_MQ (42)."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson

from sievemq.broker.clients import ClientChannel, ConsumerManager, ProducerManager
from sievemq.broker.filter_manager import ConsumerFilterManager
from sievemq.broker.filters import build_filter
from sievemq.broker.groups import SubscriptionGroupManager
from sievemq.broker.locks import QueueLocks, lock_request
from sievemq.broker.topics import TopicConfigManager
from sievemq.errors import RemotingError
from sievemq.protocol.header_rules import check_name
from sievemq.protocol.heartbeat import HeartbeatData, Subscription
from sievemq.protocol.names import retry_topic
from sievemq.protocol.reasons import (
    REASON_FIELD,
    REFUSED_SUBSCRIPTIONS_FIELD,
    Reason,
    RefusedSubscription,
    encode_refused_subscriptions,
)
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from sievemq.remoting.headers import get_str, require_str
from sievemq.remoting.server import ProcessorTable
from sievemq.util.ratelimit import RateLimitedLog, suppressed_note


def _json_body(cmd: RemotingCommand, what: str) -> dict[str, Any]:
    try:
        data = orjson.loads(cmd.body)
    except orjson.JSONDecodeError as e:
        raise RemotingError(ResponseCode.SYSTEM_ERROR, f"{what} body is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise RemotingError(ResponseCode.SYSTEM_ERROR, f"{what} body is not a JSON object")
    return data


log = logging.getLogger(__name__)
_FULL_LOG = RateLimitedLog(60.0)
"""A full group table is said at most once a minute."""

@dataclass
class ClientProcessor:
    """Heartbeats, unregistration, group membership and queue locks."""

    consumers: ConsumerManager
    producers: ProducerManager
    groups: SubscriptionGroupManager
    topics: TopicConfigManager
    filters: ConsumerFilterManager
    locks: QueueLocks
    property_filter: bool = True
    pop_start: Callable[[str, str], Awaitable[None]] | None = None
    """Called for each topic a POP consumer (``CONSUME_POP``) subscribes: fixes where a new group starts."""

    def register(self, table: ProcessorTable) -> None:
        """Put the client-management codes into ``table``."""
        table.register(RequestCode.HEART_BEAT, self.heartbeat)
        table.register(RequestCode.UNREGISTER_CLIENT, self.unregister)
        table.register(RequestCode.GET_CONSUMER_LIST_BY_GROUP, self.consumer_list)
        table.register(RequestCode.CHECK_CLIENT_CONFIG, self.check_client_config)
        table.register(RequestCode.LOCK_BATCH_MQ, self.lock_batch)
        table.register(RequestCode.UNLOCK_BATCH_MQ, self.unlock_batch)

    async def heartbeat(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """34 HEART_BEAT: record producers, consumers and subscriptions; create retry topics."""
        try:
            hb = HeartbeatData.from_json(_json_body(cmd, "heartbeat"))
        except (AttributeError, TypeError, ValueError) as e:
            raise RemotingError(ResponseCode.SYSTEM_ERROR, f"malformed heartbeat: {e}", Reason.INVALID_HEADER) from None
        if problem := hb.problem():
            raise RemotingError(ResponseCode.SYSTEM_ERROR, f"heartbeat refused: {problem}", Reason.INVALID_NAME)
        now = time.monotonic()
        channel = ClientChannel(hb.client_id, conn, cmd.language, cmd.version, now)
        conn.attrs["client_id"] = hb.client_id
        full: set[str] = set()
        for data in hb.consumers:
            if not data.group:
                continue
            try:
                gc = self.groups.find(data.group)
            except RemotingError as e:  # TOO_MANY_GROUPS: not registered; its pulls are refused with the reason
                held = _FULL_LOG.allow("groups")
                if held is not None:
                    log.warning("heartbeat of %s: %s%s", hb.client_id, e, suppressed_note(held))
                full.add(data.group)
                continue
            if gc is not None:
                rt = retry_topic(data.group)
                if self.topics.get(rt) is None:
                    self.topics.create_system_topic(rt, gc.retryQueueNums)
            self.consumers.register(channel, data)
            self._sync_filters(data.group)
        for group in hb.producer_groups:
            if group:
                self.producers.register(group, channel)
        refused = []
        for data in hb.consumers:
            info = self.consumers.get(data.group)
            for sub in data.subscriptions:
                remark = info.remark(hb.client_id, sub.topic) if info else None
                if remark:
                    refused.append(RefusedSubscription(data.group, sub.topic, remark))
        if self.pop_start is not None:
            for data in hb.consumers:
                if data.consume_type == "CONSUME_POP" and data.group not in full:
                    for sub in data.subscriptions:
                        if not any(r.group == data.group and r.topic == sub.topic for r in refused):
                            await self.pop_start(data.group, sub.topic)
        # Success either way (a failed heartbeat would make clients drop the broker): the refusals travel in the
        # remark (for people) and in the reason fields (for sievemq's client, which raises them from start()).
        if not refused:
            return cmd.response(ResponseCode.SUCCESS)
        return cmd.response(
            ResponseCode.SUCCESS,
            "\n".join(r.remark for r in refused),
            {
                REASON_FIELD: Reason.SUBSCRIPTION_INCONSISTENT,
                REFUSED_SUBSCRIPTIONS_FIELD: encode_refused_subscriptions(refused),
            },
        )

    def _sync_filters(self, group: str) -> None:
        """Keep the group's compiled SQL92 filters in step with its subscriptions."""
        info = self.consumers.get(group)
        if info is None:
            return
        for topic in info.topics():
            sub = info.subscription(topic)
            if sub is not None and sub.expression_type == "SQL92" and not sub.class_filter_mode:
                self.filters.register(group, topic, sub.sub_string, sub.sub_version)
            elif self.filters.get(group, topic) is not None:
                self.filters.unregister(group, topic)

    async def unregister(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """35 UNREGISTER_CLIENT."""
        f = cmd.ext_fields
        client_id = require_str(f, "clientID")
        if group := get_str(f, "producerGroup"):
            self.producers.unregister(group, client_id)
        if group := get_str(f, "consumerGroup"):
            self.consumers.unregister(group, client_id)
        return cmd.response(ResponseCode.SUCCESS)

    async def consumer_list(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """38 GET_CONSUMER_LIST_BY_GROUP: the sorted client ids of a group."""
        group = require_str(cmd.ext_fields, "consumerGroup")
        info = self.consumers.get(group)
        ids = info.client_ids(get_str(cmd.ext_fields, "topic"), conn.attrs.get("client_id")) if info else []
        if not ids:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {group}")
        return cmd.response(ResponseCode.SUCCESS, body=orjson.dumps({"consumerIdList": ids}))

    async def check_client_config(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """46 CHECK_CLIENT_CONFIG: can this subscription be served?"""
        body = _json_body(cmd, "CheckClientRequestBody")
        data = body.get("subscriptionData") or {}
        if not isinstance(data, dict):
            raise RemotingError(
                ResponseCode.SYSTEM_ERROR, "subscriptionData must be a JSON object", Reason.INVALID_HEADER
            )
        sub = Subscription.from_json(data)
        check_name("topic", sub.topic)
        if sub.is_tag:
            return cmd.response(ResponseCode.SUCCESS)
        if not self.property_filter:
            raise RemotingError(
                ResponseCode.SYSTEM_ERROR,
                "The broker does not support consumer to filter message by SQL92",
                Reason.SQL92_DISABLED,
            )
        group = str(body.get("group") or "")
        check_name("group", group)
        build_filter(sub, group, self.filters, True)  # raises SUBSCRIPTION_PARSE_FAILED with the reason
        return cmd.response(ResponseCode.SUCCESS)

    async def lock_batch(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """41 LOCK_BATCH_MQ: lock queues for an orderly consumer; answers the queues it now holds."""
        group, client, queues = lock_request(_json_body(cmd, "LockBatchRequestBody"))
        held = self.locks.lock(group, client, queues, time.monotonic())
        ok = [{"topic": t, "brokerName": b, "queueId": q} for t, b, q in held]
        return cmd.response(ResponseCode.SUCCESS, body=orjson.dumps({"lockOKMQSet": ok}))

    async def unlock_batch(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """42 UNLOCK_BATCH_MQ."""
        group, client, queues = lock_request(_json_body(cmd, "UnlockBatchRequestBody"))
        self.locks.unlock(group, client, queues)
        return cmd.response(ResponseCode.SUCCESS)
