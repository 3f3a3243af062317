"""The broker's first groups of settings: its identity and where it listens, then the store, delays, timers,
retries, transactions and POP (``config.py`` extends them; docs/configuration.md lists every one)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sievemq.http import settings as http
from sievemq.protocol.delay_levels import DEFAULT_DELAY_LEVELS
from sievemq.protocol.sizes import DEFAULT_MAX_MESSAGE_SIZE, MAX_MESSAGE_SIZE_LIMIT
from sievemq.settings import (
    ADVERTISED_IP,
    DELAY_LEVELS,
    DELETE_WHEN,
    HOST_PORT_LIST,
    LISTEN_HOST,
    NAME,
    STORE_DIR,
    setting,
)

__all__ = ["INT32_MAX", "MIN_COMMITLOG_FILE_SIZE", "ControllerMode", "FlushDiskType", "SubscriptionConsistency",
           "_BrokerMessages"]

MIN_COMMITLOG_FILE_SIZE = 64 * 1024
INT32_MAX = (1 << 31) - 1
"""RocketMQ's file sizes are Java ints; sievemq's record and blank sizes are 32-bit too."""

FlushDiskType = Literal["ASYNC_FLUSH", "SYNC_FLUSH"]
ControllerMode = Literal["none", "etcd"]
SubscriptionConsistency = Literal["strict", "rocketmq"]


# The broker's settings come in groups, each a frozen dataclass that the next one extends, so that the reference lists
# them in this order; ``BrokerConfig`` adds replication and the checks that span groups.
@dataclass(frozen=True)
class _BrokerIdentity:
    """Name, addresses, name servers, where the store lives, and the topic and group tables."""

    broker_name: str = setting("this broker's name; queues of a topic are addressed by it", "broker-a", fmt=NAME)
    broker_cluster_name: str = setting("cluster the broker belongs to", "DefaultCluster", fmt=NAME)
    broker_id: int = setting("0 for a master", 0, lo=0)
    broker_ip: str = setting(
        "address clients use to reach this broker (advertised, IPv4)", "127.0.0.1", fmt=ADVERTISED_IP
    )
    listen_host: str = setting("address to listen on", "127.0.0.1", fmt=LISTEN_HOST)
    listen_port: int = setting("TCP port for clients", 10911, lo=0, hi=65535)
    listen_vip_channel: bool = setting(
        "also listen on listenPort - 2 for old Java clients (VIP channel; listenPort must then be >= 2)", False
    )
    http_listen_host: str = setting(*http.host_doc(), fmt=LISTEN_HOST)
    http_listen_port: int = setting(*http.port_doc("broker"), lo=-1, hi=65535)
    http_metrics_max_series: int = setting(
        "/metrics: series one labelled metric family exports at most (per-topic counters keep the topics counted "
        "first, lag and in-flight gauges the largest values; the rest add up in one series labelled (other))",
        2000,
        lo=1,
        hi=1_000_000,
    )
    http_metrics_rocketmq_names: bool = setting(
        "/metrics: also export RocketMQ 5's families (rocketmq_messages_in_total, rocketmq_consumer_lag_messages...) "
        "with its names, labels and units, so dashboards made for RocketMQ work unchanged (docs/metrics-rocketmq.md)",
        True,
    )
    namesrv_addr: str = setting(
        "name servers, ';'-separated host:port list (empty: none)", "127.0.0.1:9876", fmt=HOST_PORT_LIST
    )
    store_path_root_dir: str = setting(
        "folder of the store (commit log, queues, index, config)", "./sievemq-data", fmt=STORE_DIR
    )
    register_broker_interval_seconds: float = setting("how often to register with every name server", 30.0, above=0)
    compressed_register: bool = setting(
        "send the topic table in RocketMQ's compressed form (zlib) once it holds 1000 topics or more: ~60x smaller "
        "than JSON (docs/registration.md)",
        True,
    )
    force_register: bool = setting(
        "send the whole topic table every registerBrokerIntervalSeconds; false: each round asks each name server "
        "for the data version it holds (QUERY_DATA_VERSION, a sign of life too) and sends the table only where it "
        "changed or was lost (docs/registration.md)",
        False,
    )
    enable_split_registration: bool = setting(
        "send the topic table in parts of splitRegistrationSize topics, one REGISTER_BROKER each", False
    )
    split_registration_size: int = setting(
        "topics per part when enableSplitRegistration is on", 800, lo=2, hi=1_000_000
    )
    auto_create_topic_enable: bool = setting("create unknown topics on first send (from TBW102)", True)
    auto_create_subscription_group: bool = setting("create unknown consumer groups on first use", True)
    max_topics: int = setting(
        "topics a broker holds at most, its own system topics and the groups' retry and dead-letter topics not "
        "counted; a send that would create one more, or a topic creation, is refused (reason TOO_MANY_TOPICS). A "
        "topic costs memory (about 2 KB a queue that held messages) and a line of the topic table, not disk or open "
        "files (docs/many-topics.md): this bounds the memory auto-creation lets any client take",
        100_000,
        lo=1,
        hi=1_000_000,
    )
    max_subscription_groups: int = setting(
        "consumer groups a broker holds at most; a new group beyond it is refused (reason TOO_MANY_GROUPS)",
        10_000,
        lo=1,
        hi=1_000_000,
    )
    default_topic_queue_nums: int = setting("queues of TBW102 and of admin-created topics", 8, lo=1, hi=1024)
    trace_topic_enable: bool = setting(
        "create the message trace topic (msgTraceTopicName, 1 queue) at start, as RocketMQ does (docs/traces.md)",
        False,
    )
    msg_trace_topic_name: str = setting(
        "the topic clients write message traces to (RocketMQ's RMQ_SYS_TRACE_TOPIC)", "RMQ_SYS_TRACE_TOPIC", fmt=NAME
    )


@dataclass(frozen=True)
class _BrokerMessages(_BrokerIdentity):
    """The store, delays, timers, retries, transactions and POP."""

    flush_disk_type: FlushDiskType = setting(
        "ASYNC_FLUSH (reply at once) or SYNC_FLUSH (reply after fsync)", "ASYNC_FLUSH"
    )
    flush_interval_commitlog_ms: int = setting("async flush period", 500, lo=1)
    sync_flush_timeout_ms: int = setting("wait at most this for fsync under SYNC_FLUSH", 5000, lo=1)
    mapped_file_size_commitlog: int = setting(
        "bytes per commit-log segment file", 1 << 30, lo=MIN_COMMITLOG_FILE_SIZE, hi=INT32_MAX
    )
    mapped_file_size_consume_queue_entries: int = setting(
        "entries per consume-queue file (20 bytes each)", 300_000, lo=100, hi=INT32_MAX // 20
    )
    max_mapped_files: int = setting(
        "store files the broker keeps memory-mapped at most (each is one of vm.max_map_count's mappings and two "
        "file descriptors); the least recently used consume queues are unmapped past it and mapped again when used. "
        "0: a quarter of RLIMIT_NOFILE (two descriptors a file) or half of vm.max_map_count, whichever is less "
        "(docs/many-topics.md)",
        0,
        lo=0,
        hi=10_000_000,
    )
    file_reserved_time: float = setting("hours a commit-log segment is kept", 72.0, above=0)
    delete_when: str = setting(
        "hours of day when expired segments are deleted, RocketMQ's format (04;16), -1: any hour", "04",
        fmt=DELETE_WHEN,
    )
    disk_max_used_space_ratio: int = setting(
        "percent of disk use (as df shows Use%) past which old segments are deleted", 75, lo=10, hi=95
    )
    disk_space_clean_forcibly_ratio: int = setting(
        "percent of disk use past which the oldest segments are deleted even if not expired (100: never)",
        85,
        lo=10,
        hi=100,
    )
    disk_full_reserve_bytes: int = setting(
        "free bytes the store keeps on its disk: a send that needs new space (a file, or the next chunk of a "
        "segment) is refused (code 14, reason DISK_FULL) unless this many stay free after it",
        128 * 1024 * 1024,
        lo=0,
    )
    max_hash_slot_num: int = setting("key index: hash slots per index file (4 bytes each)", 5_000_000, lo=1,
                                     hi=INT32_MAX // 24)  # fmt: skip
    max_index_num: int = setting("key index: entries per index file (24 bytes each)", 20_000_000, lo=1,
                                 hi=INT32_MAX // 24)  # fmt: skip
    max_message_size: int = setting(
        "largest message body in bytes (at most 15 MiB, so that it fits one 16 MiB remoting frame; a message "
        "larger than a commit-log segment is refused too)",
        DEFAULT_MAX_MESSAGE_SIZE,
        lo=1,
        hi=MAX_MESSAGE_SIZE_LIMIT,
    )
    long_polling_enable: bool = setting("hold pulls until a message arrives (else short polling)", True)
    short_polling_time_mills: int = setting("hold time when long polling is off", 1000, lo=1)
    message_delay_level: str = setting("delay levels 1..N", DEFAULT_DELAY_LEVELS, fmt=DELAY_LEVELS)
    timer_max_delay_sec: int = setting(
        "longest wait a timer message may ask for (TIMER_DELIVER_MS, TIMER_DELAY_SEC, TIMER_DELAY_MS), in seconds "
        "from its arrival; a longer one is refused (code 13, reason TIMER_TOO_FAR). Keep it below fileReservedTime: "
        "a waiting message's commit-log segment must outlive its wait",
        259_200,
        lo=1,
        hi=INT32_MAX,
    )
    timer_max_pending: int = setting(
        "timer messages waiting at most (each costs ~90 bytes of memory until delivered); one beyond it is refused "
        "with SYSTEM_BUSY, reason TOO_MANY_TIMERS",
        1_000_000,
        lo=1,
        hi=INT32_MAX,
    )
    max_reconsume_times: int = setting("default retries before a message goes to %DLQ%group", 16, lo=0)
    new_group_starts_at_end: bool = setting(
        "a consumer group that has committed no offset of a topic here is told it has none (QUERY_NOT_FOUND), so "
        "RocketMQ's clients that consume from the last offset start at each queue's end; false: RocketMQ's rule "
        "(offset 0 while a queue still holds its first message in memory, so such a new group reads what the queue "
        "holds). Clients that consume from the first offset or a timestamp are not affected; sievemq's client "
        "starts at the end either way",
        False,
    )
    transaction_timeout: int = setting(
        "ms after its store time before an open transaction's half message is checked (a message's own "
        "CHECK_IMMUNITY_TIME_IN_SECONDS replaces it)",
        6000,
        lo=0,
    )
    transaction_check_max: int = setting(
        "checks of an open transaction before the broker rolls it back", 15, lo=1, hi=INT32_MAX
    )
    transaction_open_max: int = setting(
        "open transactions the broker keeps at most (each costs ~200 bytes of memory until it ends or expires); "
        "a half message beyond it is refused with SYSTEM_BUSY, reason TOO_MANY_OPEN_TRANSACTIONS",
        1_000_000,
        lo=1,
        hi=INT32_MAX,
    )
    init_pop_offset_by_check_msg_in_mem: bool = setting(
        "POP: a group new to a queue (RocketMQ 5 clients through a proxy start with initMode MAX) starts at offset 0 "
        "while the queue still starts there and its first message is in memory (accessMessageInMemoryMaxRatio), so it "
        "reads a young queue whole; otherwise, and when false, at the queue's last message, as RocketMQ does "
        "(newGroupStartsAtEnd starts such a group at the end instead)",
        True,
    )
    pop_inflight_max: int = setting(
        "POP: messages one queue of one group may have handed out and not acked (each lease costs ~100 bytes of "
        "memory); a queue at the limit hands out only messages whose invisible time ran out",
        20_000,
        lo=1,
        hi=INT32_MAX,
    )
    transaction_check_interval: int = setting(
        "ms between two checks of one open transaction (CHECK_TRANSACTION_STATE to a producer of its group); "
        "RocketMQ 5's default (4.x's was 60000)",
        30_000,
        lo=10,
    )
