"""Routing data exchanged with name servers: TopicConfig, QueueData, BrokerData, TopicRouteData (JSON bodies).

Field names and JSON shapes are RocketMQ's (docs/protocol/requests.md §15). Perm bits: 4 READ, 2 WRITE, 1 INHERIT.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sievemq.protocol.names import IllegalName, topic_problem
from sievemq.protocol.topic_attributes import check_stored

PERM_PRIORITY = 8
PERM_READ = 4
PERM_WRITE = 2
PERM_INHERIT = 1
PERM_MAX = PERM_PRIORITY | PERM_READ | PERM_WRITE | PERM_INHERIT
_INT32_MAX = (1 << 31) - 1


def json_int(d: dict[str, Any], key: str, default: int, lo: int = -(1 << 31), hi: int = _INT32_MAX) -> int:
    """An integer member of a JSON object (a number or a decimal string) within ``lo..hi``; ValueError otherwise."""
    v = d.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int | str | float):
        raise ValueError(f"{key} must be an integer, got {type(v).__name__}")
    try:
        n = int(v) if not isinstance(v, str) or len(v) <= 20 else None
    except ValueError:
        n = None
    if n is None or (isinstance(v, float) and not v.is_integer()) or not lo <= n <= hi:
        raise ValueError(f"{key} must be an integer in {lo}..{hi}, got {str(v)[:40]}")
    return n


@dataclass(slots=True)
class TopicConfig:
    """A topic as a broker holds it."""

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    attributes: dict[str, str] = field(default_factory=dict)
    """RocketMQ 5's topic attributes (``message.type``...: ``protocol/topic_attributes.py``)."""

    def to_json(self) -> dict[str, Any]:
        """RocketMQ's JSON form (``attributes`` only when some are set)."""
        d: dict[str, Any] = {
            "order": self.order,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicFilterType": self.topic_filter_type,
            "topicName": self.topic_name,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }
        if self.attributes:
            d["attributes"] = dict(self.attributes)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TopicConfig:
        """Parse RocketMQ's JSON form (lenient about missing fields, strict about names and ranges: ValueError)."""
        name = d["topicName"]
        problem = topic_problem(name) if isinstance(name, str) else "the topic name is not a string"
        if problem is not None:
            raise IllegalName(problem)
        return cls(
            topic_name=name,
            read_queue_nums=json_int(d, "readQueueNums", 16, 0),
            write_queue_nums=json_int(d, "writeQueueNums", 16, 0),
            perm=json_int(d, "perm", 6, 0, PERM_MAX),
            topic_filter_type=str(d.get("topicFilterType", "SINGLE_TAG")),
            topic_sys_flag=json_int(d, "topicSysFlag", json_int(d, "topicSynFlag", 0)),
            order=bool(d.get("order", False)),
            attributes=check_stored(d.get("attributes")),
        )


@dataclass(slots=True)
class QueueData:
    """One broker's queues of a topic, as the name server publishes them."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0

    def to_json(self) -> dict[str, Any]:
        """RocketMQ's JSON form."""
        return {
            "brokerName": self.broker_name,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> QueueData:
        """Parse RocketMQ's JSON form."""
        return cls(
            broker_name=str(d["brokerName"]),
            read_queue_nums=int(d.get("readQueueNums", 0)),
            write_queue_nums=int(d.get("writeQueueNums", 0)),
            perm=int(d.get("perm", 6)),
            topic_sys_flag=int(d.get("topicSysFlag", d.get("topicSynFlag", 0))),
        )


@dataclass(slots=True)
class BrokerData:
    """A broker name, its cluster and its addresses by broker id (0 = master)."""

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """RocketMQ's JSON form, numeric keys quoted (standard JSON)."""
        return {
            "brokerAddrs": {str(k): v for k, v in sorted(self.broker_addrs.items())},
            "brokerName": self.broker_name,
            "cluster": self.cluster,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> BrokerData:
        """Parse RocketMQ's JSON form."""
        return cls(
            cluster=str(d.get("cluster", "")),
            broker_name=str(d["brokerName"]),
            broker_addrs={int(k): str(v) for k, v in (d.get("brokerAddrs") or {}).items()},
        )

    def master_addr(self) -> str | None:
        """Address of broker id 0, if any."""
        return self.broker_addrs.get(0)


@dataclass(slots=True)
class TopicRouteData:
    """What GET_ROUTEINFO_BY_TOPIC answers."""

    queue_datas: list[QueueData] = field(default_factory=list)
    broker_datas: list[BrokerData] = field(default_factory=list)
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)
    order_topic_conf: str | None = None

    def to_json(self) -> dict[str, Any]:
        """RocketMQ's JSON form."""
        d: dict[str, Any] = {
            "brokerDatas": [b.to_json() for b in self.broker_datas],
            "filterServerTable": self.filter_server_table,
            "queueDatas": [q.to_json() for q in self.queue_datas],
        }
        if self.order_topic_conf:
            d["orderTopicConf"] = self.order_topic_conf
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TopicRouteData:
        """Parse RocketMQ's JSON form."""
        return cls(
            queue_datas=[QueueData.from_json(q) for q in d.get("queueDatas") or []],
            broker_datas=[BrokerData.from_json(b) for b in d.get("brokerDatas") or []],
            filter_server_table={k: list(v) for k, v in (d.get("filterServerTable") or {}).items()},
            order_topic_conf=d.get("orderTopicConf"),
        )
