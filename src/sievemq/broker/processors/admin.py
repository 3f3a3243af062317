"""Administration: topics (UPDATE_AND_CREATE_TOPIC 17, UPDATE_AND_CREATE_TOPIC_LIST 18, GET_ALL_TOPIC_CONFIG 21,
GET_TOPIC_NAME_LIST 23, GET_TOPIC_STATS_INFO 202, DELETE_TOPIC_IN_BROKER 215), groups (200, 201, 352; 207 is
``group_admin.py``'s) and GET_BROKER_RUNTIME_INFO (28)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field

import orjson

from sievemq.broker.clients import ConsumerManager
from sievemq.broker.config_files import ConfigWriter
from sievemq.broker.groups import GroupConfig, SubscriptionGroupManager, encode_groups
from sievemq.broker.long_polling import PullHoldService
from sievemq.broker.offsets import ConsumerOffsetManager
from sievemq.broker.rates import human_bytes
from sievemq.broker.stats import BrokerStats
from sievemq.broker.topics import TopicConfigManager, validate_topic_name
from sievemq.broker.write_gate import OPEN, WriteGate
from sievemq.errors import RemotingError
from sievemq.protocol.admin_bodies import TopicOffset, encode_topic_stats
from sievemq.protocol.mq_json import QueueKey
from sievemq.protocol.names import (
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    IllegalName,
    is_reserved_topic,
    is_system_topic,
    reply_topic,
)
from sievemq.protocol.reasons import Reason
from sievemq.protocol.route import TopicConfig
from sievemq.protocol.topic_attributes import TopicAttributeError, alter, parse_change
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from sievemq.remoting.headers import get_bool, get_str, int_or, require_str
from sievemq.remoting.server import ProcessorTable
from sievemq.store import MessageStore
from sievemq.version import __version__

_GROUP_TOPIC_PREFIXES = (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)
PREPARED_QUEUES_MAX = 16
"""How many of a created topic's queues get their first file ahead (``MessageStore.prepare_queues``): enough for the
usual 4-16 queues, and a request for 1,024 does not make 1,024 files that no message may ever need."""


TOPIC_PAGE_MAX = 2000
"""The most topics one page of GET_ALL_TOPIC_CONFIG holds (RocketMQ's ``splitMetadataSize``)."""


def _encode_wrapper(data_version: dict[str, int], table: dict[str, TopicConfig]) -> bytes:
    """TopicConfigSerializeWrapper JSON of ``table``."""
    return orjson.dumps({"dataVersion": data_version, "topicConfigTable": {n: tc.to_json() for n, tc in table.items()}})


def _same_version(text: str, ours: dict[str, int]) -> bool:
    """True when ``text`` (a DataVersion's JSON, as a paging client sends it back) is ``ours``."""
    try:
        theirs = orjson.loads(text) if text else None
    except orjson.JSONDecodeError:
        return False
    return isinstance(theirs, dict) and all(theirs.get(k) == ours.get(k) for k in ("counter", "timestamp"))


@dataclass(frozen=True, slots=True)
class AdminSettings:
    """The broker settings administration answers with or checks against."""

    broker_name: str
    cluster_name: str
    advertised_addr: str
    default_topic_queue_nums: int


@dataclass
class AdminProcessor:
    """Topic and group administration.

    Changes are on disk (``writer``) before they are answered; ``register_now`` registers with the name servers at
    once after a topic change.
    """

    topics: TopicConfigManager
    groups: SubscriptionGroupManager
    offsets: ConsumerOffsetManager
    store: MessageStore
    consumers: ConsumerManager
    hold: PullHoldService
    stats: BrokerStats
    writer: ConfigWriter
    register_now: Callable[[], Awaitable[object]]
    settings: AdminSettings
    gate: WriteGate = OPEN
    """A slave refuses topic and group changes: they are made on its master, and copied."""
    extra_info: Callable[[], dict[str, str]] = field(default=dict)
    """More GET_BROKER_RUNTIME_INFO entries (the replication state)."""

    def _check_writable(self) -> None:
        refusal = self.gate.write_refusal()
        if refusal is not None:
            raise refusal

    def register(self, table: ProcessorTable) -> None:
        """Put the admin codes into ``table``."""
        table.register(RequestCode.UPDATE_AND_CREATE_TOPIC, self.create_topic)
        table.register(RequestCode.UPDATE_AND_CREATE_TOPIC_LIST, self.create_topic_list)
        table.register(RequestCode.GET_TOPIC_CONFIG, self.get_topic_config)
        table.register(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER, self.system_topics)
        table.register(RequestCode.GET_ALL_TOPIC_CONFIG, self.all_topic_config)
        table.register(RequestCode.GET_TOPIC_NAME_LIST, self.topic_names)
        table.register(RequestCode.GET_TOPIC_STATS_INFO, self.topic_stats)
        table.register(RequestCode.DELETE_TOPIC_IN_BROKER, self.delete_topic)
        table.register(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, self.create_group)
        table.register(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST, self.create_group_list)
        table.register(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, self.all_groups)
        table.register(RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, self.get_group)
        table.register(RequestCode.GET_BROKER_RUNTIME_INFO, self.runtime_info)

    async def create_topic(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """17 UPDATE_AND_CREATE_TOPIC."""
        self._check_writable()
        f = cmd.ext_fields
        topic = require_str(f, "topic")
        validate_topic_name(topic, ResponseCode.INVALID_PARAMETER)
        if is_reserved_topic(topic) or topic == self.settings.cluster_name:  # RocketMQ 5 answers these 29 too
            raise RemotingError(ResponseCode.INVALID_PARAMETER, f"the topic[{topic}] is conflict with system topic",
                                Reason.INVALID_NAME)  # fmt: skip
        default_n = self.settings.default_topic_queue_nums
        read_n = int_or(f, "readQueueNums", default_n)
        write_n = int_or(f, "writeQueueNums", default_n)
        if not (0 < read_n <= 1024 and 0 < write_n <= 1024):
            raise RemotingError(
                ResponseCode.SYSTEM_ERROR, "queue numbers must be between 1 and 1024", Reason.INVALID_HEADER
            )
        filter_type = get_str(f, "topicFilterType", "SINGLE_TAG") or "SINGLE_TAG"
        if filter_type not in ("SINGLE_TAG", "MULTI_TAG"):
            raise RemotingError(
                ResponseCode.SYSTEM_ERROR, f"topicFilterType must be SINGLE_TAG or MULTI_TAG, not {filter_type}"
            )
        existing = self.topics.get(topic)
        try:
            attributes = alter(existing is None, existing.attributes if existing else {},
                               parse_change(get_str(f, "attributes") or ""))  # fmt: skip
        except TopicAttributeError as e:  # RocketMQ 5 answers 1 with the problem
            raise RemotingError(ResponseCode.SYSTEM_ERROR, str(e), Reason.INVALID_HEADER) from None
        tc = TopicConfig(
            topic_name=topic,
            read_queue_nums=read_n,
            write_queue_nums=write_n,
            perm=int_or(f, "perm", 6),
            topic_filter_type=filter_type,
            topic_sys_flag=int_or(f, "topicSysFlag", 0),
            order=get_bool(f, "order"),
            attributes=attributes,
        )
        await self._save_topics([tc])
        return cmd.response(ResponseCode.SUCCESS)

    async def _save_topics(self, configs: list[TopicConfig]) -> None:
        """Create or update ``configs`` as one change, answered once it is on disk (the journal's append,
        docs/topic-table.md) and registered. Queues are prepared ahead (``prepare_queues``) for at most
        ``PREPARED_QUEUES_MAX`` queues per request: a list of 1,000 topics does not make 4,000 files at once."""
        self.topics.check_room_for([tc.topic_name for tc in configs])
        new = [tc for tc in configs if self.topics.get(tc.topic_name) is None]
        self.topics.update_many(configs)
        budget = PREPARED_QUEUES_MAX
        for tc in new:
            n = min(tc.write_queue_nums, budget)
            if n <= 0:
                break
            budget -= n
            await self.store.prepare_queues(tc.topic_name, range(n))
        await self.topics.saved()
        if self.topics.journal is None:  # a table without a journal: its file is written whole
            await self.writer.flush()
        await self.register_now()

    async def create_topic_list(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """18 UPDATE_AND_CREATE_TOPIC_LIST (body: ``{"topicConfigList": [TopicConfig...]}``): every topic checked
        first (INVALID_PARAMETER for an illegal or system name, as RocketMQ 5), then all created and registered."""
        self._check_writable()
        try:
            doc = orjson.loads(cmd.body)
            rows = doc.get("topicConfigList") if isinstance(doc, dict) else None
            if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
                raise ValueError("topicConfigList must be a list of TopicConfig objects")
            configs = [TopicConfig.from_json(r) for r in rows]
        except IllegalName as e:
            raise RemotingError(ResponseCode.INVALID_PARAMETER, str(e), Reason.INVALID_NAME) from None
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as e:
            raise RemotingError(ResponseCode.SYSTEM_ERROR, f"malformed CreateTopicListRequestBody: {e}",
                                Reason.INVALID_HEADER) from None  # fmt: skip
        for tc in configs:
            if is_system_topic(tc.topic_name) and not tc.topic_name.startswith(_GROUP_TOPIC_PREFIXES):
                raise RemotingError(ResponseCode.INVALID_PARAMETER, f"The topic[{tc.topic_name}] is conflict with "
                                    "system topic.", Reason.INVALID_NAME)  # fmt: skip
            if not (0 < tc.read_queue_nums <= 1024 and 0 < tc.write_queue_nums <= 1024):
                raise RemotingError(ResponseCode.SYSTEM_ERROR, f"{tc.topic_name}: queue numbers must be between 1 "
                                    "and 1024", Reason.INVALID_HEADER)  # fmt: skip
            if tc.topic_filter_type not in ("SINGLE_TAG", "MULTI_TAG"):
                raise RemotingError(ResponseCode.SYSTEM_ERROR, f"{tc.topic_name}: topicFilterType must be SINGLE_TAG "
                                    f"or MULTI_TAG, not {tc.topic_filter_type}", Reason.INVALID_HEADER)  # fmt: skip
            existing = self.topics.get(tc.topic_name)
            try:  # the request's attributes are changes (``+key``: value, ``-key``), as in 17
                tc.attributes = alter(existing is None, existing.attributes if existing else {}, tc.attributes)
            except TopicAttributeError as e:
                raise RemotingError(ResponseCode.SYSTEM_ERROR, f"{tc.topic_name}: {e}", Reason.INVALID_HEADER) from None
        await self._save_topics(configs)
        return cmd.response(ResponseCode.SUCCESS)

    async def get_topic_config(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """351 GET_TOPIC_CONFIG (header ``topic``; ``lo``: sievemq has no static topics, so no queue mapping):
        TopicConfigAndQueueMapping JSON, or TOPIC_NOT_EXIST."""
        topic = require_str(cmd.ext_fields, "topic")
        tc = self.topics.get(topic)
        if tc is None:
            raise RemotingError(ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {topic}")
        return cmd.response(ResponseCode.SUCCESS, body=orjson.dumps({"attributes": {}, **tc.to_json()}))

    async def all_topic_config(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """21 GET_ALL_TOPIC_CONFIG: TopicConfigSerializeWrapper JSON; header ``totalTopicNum``. RocketMQ 5's pages
        (docs/topic-table.md §5): with ``topicSeq`` / ``maxTopicNum`` / ``dataVersion`` in the request, topics
        ``topicSeq ..`` in name order, at most ``min(maxTopicNum, TOPIC_PAGE_MAX)``, from 0 when ``dataVersion`` is
        not ours. The whole table (no paging header) is encoded off the event loop."""
        f = cmd.ext_fields
        dv = dict(self.topics.data_version)
        total = {"totalTopicNum": str(len(self.topics.table))}
        if not any(k in f for k in ("topicSeq", "maxTopicNum", "dataVersion")):
            table = dict(self.topics.table)  # TopicConfigs are replaced, never changed: a consistent snapshot
            body = await asyncio.get_running_loop().run_in_executor(None, _encode_wrapper, dv, table)
            return cmd.response(ResponseCode.SUCCESS, ext_fields=total, body=body)
        begin = max(0, int_or(f, "topicSeq", 0))
        if not _same_version(get_str(f, "dataVersion") or "", dv):
            begin = 0
        count = min(max(1, int_or(f, "maxTopicNum", TOPIC_PAGE_MAX)), TOPIC_PAGE_MAX)
        return cmd.response(ResponseCode.SUCCESS, ext_fields=total,
                            body=_encode_wrapper(dv, self.topics.page(begin, count)))  # fmt: skip

    async def topic_names(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """23 GET_TOPIC_NAME_LIST."""
        body = {"topicList": sorted(self.topics.table), "brokerAddr": self.settings.advertised_addr}
        return cmd.response(ResponseCode.SUCCESS, body=orjson.dumps(body))

    async def system_topics(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """305 GET_SYSTEM_TOPIC_LIST_FROM_BROKER: TopicList of the topics the broker keeps for itself (templates,
        schedule, its cluster's and its own name, the reply topic; retry and dead-letter topics are a group's)."""
        own = {self.settings.cluster_name, self.settings.broker_name, reply_topic(self.settings.cluster_name)}
        names = sorted(t for t in self.topics.table
                       if t in own or (is_system_topic(t) and not t.startswith(_GROUP_TOPIC_PREFIXES)))  # fmt: skip
        return cmd.response(ResponseCode.SUCCESS, body=orjson.dumps({"topicList": names}))

    async def topic_stats(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """202 GET_TOPIC_STATS_INFO: each write queue's min and max offsets and its newest message's store time
        (TopicStatsTable); TOPIC_NOT_EXIST when the broker has no such topic."""
        topic = require_str(cmd.ext_fields, "topic")
        tc = self.topics.table.get(topic)
        if tc is None:
            raise RemotingError(ResponseCode.TOPIC_NOT_EXIST, f"topic {topic} does not exist on this broker")
        table = {}
        for q in range(tc.write_queue_nums):
            hi = self.store.get_max_offset(topic, q)
            last = self.store.get_store_time(topic, q, hi - 1) if hi > 0 else None
            table[QueueKey(topic, self.settings.broker_name, q)] = TopicOffset(
                self.store.get_min_offset(topic, q), hi, last or 0
            )
        return cmd.response(ResponseCode.SUCCESS, body=encode_topic_stats(table))

    async def delete_topic(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """215 DELETE_TOPIC_IN_BROKER: drop the topic, its queues and its offsets."""
        self._check_writable()
        topic = require_str(cmd.ext_fields, "topic")
        self.topics.delete(topic)
        self.offsets.remove_topic(topic)
        self.store.delete_topics({topic})
        await self.topics.saved()
        if self.topics.journal is None:
            await self.writer.flush()
        else:  # not a compaction of the topic table that may run: only what this request changed
            await self.writer.settled(self.offsets.path)
        await self.register_now()
        return cmd.response(ResponseCode.SUCCESS)

    async def create_group(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """200 UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (body: SubscriptionGroupConfig JSON)."""
        self._check_writable()
        try:
            cfg = orjson.loads(cmd.body)
            self.groups.update(cfg)
        except IllegalName as e:
            raise RemotingError(ResponseCode.INVALID_PARAMETER, str(e), Reason.INVALID_NAME) from None
        except (orjson.JSONDecodeError, TypeError, AttributeError, ValueError) as e:
            raise RemotingError(
                ResponseCode.SYSTEM_ERROR, f"malformed SubscriptionGroupConfig: {e}", Reason.INVALID_HEADER
            ) from None
        await self.writer.settled(self.groups.path)
        return cmd.response(ResponseCode.SUCCESS)

    async def create_group_list(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """225 UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST (body: ``{"groupConfigList": [SubscriptionGroupConfig...]}``):
        every group checked first (INVALID_PARAMETER for an illegal name, as RocketMQ 5), then all created."""
        self._check_writable()
        try:
            doc = orjson.loads(cmd.body)
            rows = doc.get("groupConfigList") if isinstance(doc, dict) else None
            if not isinstance(rows, list):
                raise ValueError("groupConfigList must be a list of SubscriptionGroupConfig objects")
            checked = [GroupConfig.from_json(r) for r in rows]
            for gc in checked:
                self.groups.check_room(gc.groupName)
            for r in rows:
                self.groups.update(r)
        except IllegalName as e:
            raise RemotingError(ResponseCode.INVALID_PARAMETER, str(e), Reason.INVALID_NAME) from None
        except (orjson.JSONDecodeError, TypeError, AttributeError, ValueError) as e:
            raise RemotingError(ResponseCode.SYSTEM_ERROR, f"malformed SubscriptionGroupList: {e}",
                                Reason.INVALID_HEADER) from None  # fmt: skip
        await self.writer.settled(self.groups.path)
        return cmd.response(ResponseCode.SUCCESS)

    async def all_groups(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """201 GET_ALL_SUBSCRIPTIONGROUP_CONFIG."""
        return cmd.response(ResponseCode.SUCCESS, body=encode_groups(dict(self.groups.table)))

    async def get_group(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """352 GET_SUBSCRIPTIONGROUP_CONFIG (header ``group``): its SubscriptionGroupConfig JSON (created with the
        defaults when auto-creation is on, as RocketMQ does); SUBSCRIPTION_GROUP_NOT_EXIST otherwise."""
        group = require_str(cmd.ext_fields, "group")
        gc = self.groups.find(group)
        if gc is None:
            raise RemotingError(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group [{group}] does not "
                                "exist on this broker: create it (sievemq group update)")  # fmt: skip
        return cmd.response(ResponseCode.SUCCESS, body=orjson.dumps(asdict(gc)))

    async def runtime_info(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """28 GET_BROKER_RUNTIME_INFO: a KVTable of counters, under RocketMQ's names where sievemq has the same
        measure (``mqadmin brokerStatus`` and ``clusterList`` read them; docs/admin.md §10) and sievemq's own."""
        extra = self.extra_info()
        table = {
            **self.stats.runtime_table(),
            **store_runtime_info(self.store, extra),
            **IDLE_POOLS,
            "brokerActive": str(extra.get("brokerRole") != "SLAVE").lower(),
            "brokerVersionDesc": f"sievemq {__version__}",
            "brokerVersion": "409",
            "pullHeldCount": str(self.hold.held()),
            "consumerGroups": str(len(self.consumers.groups)),
            "topics": str(len(self.topics.table)),
            **extra,
        }
        return cmd.response(ResponseCode.SUCCESS, body=orjson.dumps({"table": table}))


IDLE_POOLS = {
    f"{pool}ThreadPoolQueue{what}": "0"
    for pool in ("send", "pull", "litePull", "query", "ack")
    for what in ("Size", "HeadWaitTimeMills")
} | {"EndTransactionQueueSize": "0", "pageCacheLockTimeMills": "0", "startAcceptSendRequestTimeStamp": "0"}
"""RocketMQ's request thread-pool queues and page-cache lock: sievemq serves requests on one event loop, with no
such queue or lock (how late the loop runs: ``eventLoopLag*``)."""


def store_runtime_info(store: MessageStore, extra: dict[str, str]) -> dict[str, str]:
    """The store's GET_BROKER_RUNTIME_INFO entries under RocketMQ's names (``extra``: the disk's entries)."""
    lo, hi = store.min_phy_offset, store.max_phy_offset
    earliest = store.commitlog.store_timestamp_at(lo) if hi > lo else None
    info = {
        "commitLogMaxOffset": str(hi),
        "commitLogMinOffset": str(lo if hi > 0 else -1),  # RocketMQ: -1 while the commit log has no file
        "earliestMessageTimeStamp": str(-1 if earliest is None else earliest),
        "dispatchBehindBytes": str(max(0, hi - store.writer.dispatched_to)),
        "remainHowManyDataToFlush": human_bytes(max(0, hi - store.commitlog.mfq.flushed_offset)),
    }
    ratio = extra.get("commitLogDiskRatio")
    if ratio is not None:
        info[f"commitLogDiskRatio_{store.root / 'commitlog'}"] = ratio
        info["consumeQueueDiskRatio"] = ratio  # one folder, one filesystem
    total, free = extra.get("storeDiskTotalBytes"), extra.get("storeDiskFreeBytes")
    if total is not None and free is not None:
        info["commitLogDirCapacity"] = f"Total : {human_bytes(int(total))}, Free : {human_bytes(int(free))}."
    return info
