"""Changing consumer groups (docs/admin.md §4): INVOKE_BROKER_TO_RESET_OFFSET (222) and DELETE_SUBSCRIPTIONGROUP
(207, with ``cleanOffset``).

A reset sets the group's offsets on this broker at once, whether its clients are online or not (RocketMQ 5's
server-side reset), holds back the commits of clients still at their old position until they pull from the new one
(``ConsumerOffsetManager.assign_reset``), tells those pulls to move (PULL_OFFSET_MOVED) and tells every online
4.x client with RESET_CONSUMER_CLIENT_OFFSET (220), as RocketMQ 4 does, so that it drops what it had fetched. A
POP group's queues are reset in its POP state (cursor moved, leases ended).
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from sievemq.broker.clients import ConsumerManager
from sievemq.broker.config_files import ConfigWriter
from sievemq.broker.filter_manager import ConsumerFilterManager
from sievemq.broker.groups import SubscriptionGroupManager
from sievemq.broker.long_polling import PullHoldService
from sievemq.broker.offset_reset import offset_at_time, reset_to
from sievemq.broker.offsets import ConsumerOffsetManager
from sievemq.broker.pop.service import PopService
from sievemq.broker.topics import TopicConfigManager
from sievemq.broker.write_gate import OPEN, WriteGate
from sievemq.errors import RemotingError
from sievemq.protocol.admin_bodies import encode_reset_body, encode_reset_body_for_c
from sievemq.protocol.mq_json import QueueKey
from sievemq.protocol.reasons import Reason
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from sievemq.remoting.headers import get_bool, get_int, int_or, require_int, require_str
from sievemq.remoting.server import ProcessorTable
from sievemq.store import MessageStore

EXISTED_FIELD = "groupExisted"
"""DELETE_SUBSCRIPTIONGROUP's answer field: ``true`` when the broker knew the group (sievemq's; RocketMQ's tools
ignore it, and a delete of an unknown group stays SUCCESS for them)."""
TOLD_FIELD = "clientsTold"
"""INVOKE_BROKER_TO_RESET_OFFSET's answer field: a JSON list of the client ids told with 220 (sievemq's)."""
POP_CONSUME_TYPE = "CONSUME_POP"


@dataclass
class GroupAdminProcessor:
    """Resets and deletes consumer groups; changes are on disk before they are answered."""

    offsets: ConsumerOffsetManager
    groups: SubscriptionGroupManager
    topics: TopicConfigManager
    store: MessageStore
    consumers: ConsumerManager
    filters: ConsumerFilterManager
    pop: PopService
    hold: PullHoldService
    writer: ConfigWriter
    broker_name: str
    gate: WriteGate = OPEN
    """A slave refuses both: offsets are reset and groups deleted on the master, and copied."""

    def register(self, table: ProcessorTable) -> None:
        """Put 222 and 207 into ``table``."""
        table.register(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, self.reset_offset)
        table.register(RequestCode.DELETE_SUBSCRIPTIONGROUP, self.delete_group)

    def _check_writable(self) -> None:
        refusal = self.gate.write_refusal()
        if refusal is not None:
            raise refusal

    def knows(self, group: str) -> bool:
        """True when this broker has the group's config, offsets, POP state or a live client of it."""
        return (
            group in self.groups.table
            or bool(self.offsets.offsets_of_group(group))
            or self.consumers.get(group) is not None
            or any(g == group for g, _, _ in self.pop.book.queues)
        )

    async def _save_offsets(self) -> None:
        document = self.offsets.take_snapshot(force=True)
        assert document is not None
        await self.writer.write(self.offsets.path, document)

    # ------------------------------------------------------------------------------------------ reset
    async def reset_offset(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """222: header ``topic``, ``group``, ``timestamp`` (epoch ms; -1: the end; 0: the oldest message),
        ``isForce`` (false: only move back), optional ``queueId`` and ``offset`` (one queue to an exact offset).
        Answer: ResetOffsetBody, every queue with the offset the group now has."""
        self._check_writable()
        f = cmd.ext_fields
        topic, group = require_str(f, "topic"), require_str(f, "group")
        timestamp, force = require_int(f, "timestamp"), get_bool(f, "isForce")
        queue_id, exact = int_or(f, "queueId", -1), get_int(f, "offset")
        tc = self.topics.get(topic)
        if tc is None:
            raise RemotingError(ResponseCode.TOPIC_NOT_EXIST, f"topic {topic} does not exist on broker "
                                f"{self.broker_name}")  # fmt: skip
        if not self.knows(group):
            raise RemotingError(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"consumer group {group} does not exist on "
                                f"broker {self.broker_name}", Reason.GROUP_NOT_FOUND)  # fmt: skip
        if queue_id >= tc.read_queue_nums:
            raise RemotingError(ResponseCode.SYSTEM_ERROR, f"queueId {queue_id} is not a queue of topic {topic} "
                                f"({tc.read_queue_nums} queues)", Reason.INVALID_HEADER)  # fmt: skip
        qids = [queue_id] if queue_id >= 0 else list(range(tc.read_queue_nums))
        targets = {q: self._target(topic, q, timestamp, exact if queue_id >= 0 else None) for q in qids}
        is_pop = self.pop.book.knows_topic(group, topic)
        table: dict[QueueKey, int] = {}
        moved: dict[QueueKey, int] = {}
        for q, target in targets.items():
            current = self.offsets.query(group, topic, q)
            new = reset_to(current, target, force)
            key = QueueKey(topic, self.broker_name, q)
            table[key] = new
            if is_pop:
                await self.pop.reset(group, topic, q, new)
            elif new != current:
                self.offsets.assign_reset(group, topic, q, new)
                moved[key] = new
            self.hold.wake(topic, q)
        await self._save_offsets()
        told = self._tell_clients(group, topic, timestamp, force, moved) if moved else []
        # (a queue left where it was is not restarted in the clients: they may be a little ahead of its commit)
        return cmd.response(ResponseCode.SUCCESS, ext_fields={TOLD_FIELD: orjson.dumps(told).decode()},
                            body=encode_reset_body(table))  # fmt: skip

    def _target(self, topic: str, q: int, timestamp: int, exact: int | None) -> int:
        lo, hi = self.store.get_min_offset(topic, q), self.store.get_max_offset(topic, q)
        if exact is not None and exact >= 0:
            if not lo <= exact <= hi:
                raise RemotingError(ResponseCode.SYSTEM_ERROR, f"offset {exact} is outside queue {q} of topic {topic} "
                                    f"({lo} to {hi})", Reason.INVALID_HEADER)  # fmt: skip
            return exact
        return offset_at_time(
            timestamp,
            lo,
            hi,
            lambda ts: self.store.get_offset_by_time(topic, q, ts),
            lambda o: self.store.get_store_time(topic, q, o),
        )

    def _tell_clients(
        self, group: str, topic: str, timestamp: int, force: bool, table: dict[QueueKey, int]
    ) -> list[str]:
        """RESET_CONSUMER_CLIENT_OFFSET (one-way) to every live 4.x client of the group (C++ clients get the list
        form of the body); the client ids told."""
        info = self.consumers.get(group)
        if info is None or info.consume_type == POP_CONSUME_TYPE:
            return []
        header = {"topic": topic, "group": group, "timestamp": timestamp, "isForce": force}
        bodies = {False: encode_reset_body(table), True: encode_reset_body_for_c(table)}
        for ch in list(info.channels.values()):
            body = bodies[ch.language.upper() == "CPP"]
            ch.conn.send_oneway(RemotingCommand.request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, header, body,
                                                        oneway=True))  # fmt: skip
        return sorted(info.channels)

    # ------------------------------------------------------------------------------------------ delete
    async def delete_group(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """207: header ``groupName``, ``cleanOffset`` (true: its offsets, POP state and SQL92 filters go too).
        SUCCESS either way (as RocketMQ); ``groupExisted`` says whether the broker knew the group."""
        self._check_writable()
        f = cmd.ext_fields
        group = require_str(f, "groupName")
        existed = self.knows(group)
        self.groups.delete(group)
        if get_bool(f, "cleanOffset"):
            self.offsets.remove_group(group)
            self.pop.forget_group(group)
            for entry in self.filters.groups_of(group):
                self.filters.unregister(group, entry.topic)
            self.filters.persist()
            await self._save_offsets()
        await self.writer.flush()
        return cmd.response(ResponseCode.SUCCESS, ext_fields={EXISTED_FIELD: existed})
