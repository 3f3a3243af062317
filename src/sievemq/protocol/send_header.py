"""The send-message request header in its two spellings: V1 (long names, code 10) and V2 (one letter, 310/320)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sievemq.protocol import accel as _accel
from sievemq.protocol.names import AUTO_CREATE_TOPIC_KEY
from sievemq.remoting.headers import get_bool, get_int, get_str, int_or, require_str

V2_TO_V1 = {
    "a": "producerGroup",
    "b": "topic",
    "c": "defaultTopic",
    "d": "defaultTopicQueueNums",
    "e": "queueId",
    "f": "sysFlag",
    "g": "bornTimestamp",
    "h": "flag",
    "i": "properties",
    "j": "reconsumeTimes",
    "k": "unitMode",
    "l": "maxReconsumeTimes",
    "m": "batch",
    "n": "bname",
}
V1_TO_V2 = {v: k for k, v in V2_TO_V1.items()}


@dataclass(slots=True)
class SendMessageHeader:
    """SendMessageRequestHeader."""

    producer_group: str
    topic: str
    default_topic: str = AUTO_CREATE_TOPIC_KEY
    default_topic_queue_nums: int = 4
    queue_id: int = -1
    sys_flag: int = 0
    born_timestamp: int = 0
    flag: int = 0
    properties: str = ""
    reconsume_times: int = 0
    unit_mode: bool = False
    max_reconsume_times: int | None = None
    batch: bool = False

    @classmethod
    def parse(cls, fields: Mapping[str, str], v2: bool) -> SendMessageHeader:
        """Read a V1 or V2 header leniently (``parse_send_header``)."""
        return parse_send_header(fields, v2)

    def to_fields(self, v2: bool = True) -> dict[str, Any]:
        """The header as extFields in V2 (default) or V1 spelling."""
        v1: dict[str, Any] = {
            "producerGroup": self.producer_group,
            "topic": self.topic,
            "defaultTopic": self.default_topic,
            "defaultTopicQueueNums": self.default_topic_queue_nums,
            "queueId": self.queue_id,
            "sysFlag": self.sys_flag,
            "bornTimestamp": self.born_timestamp,
            "flag": self.flag,
            "properties": self.properties,
            "reconsumeTimes": self.reconsume_times,
            "unitMode": self.unit_mode,
            "maxReconsumeTimes": self.max_reconsume_times,
            "batch": self.batch,
        }
        if not v2:
            return v1
        return {V1_TO_V2[k]: v for k, v in v1.items()}


def parse_send_header(fields: Mapping[str, str], v2: bool) -> SendMessageHeader:
    """A V1 or V2 send header read leniently (numbers as ``get_int`` reads them, ``true``/``1`` for booleans)."""
    f = {V2_TO_V1.get(k, k): v for k, v in fields.items()} if v2 else fields
    qid = get_int(f, "queueId")
    return SendMessageHeader(
        producer_group=get_str(f, "producerGroup", "") or "",
        topic=require_str(f, "topic"),
        default_topic=get_str(f, "defaultTopic", AUTO_CREATE_TOPIC_KEY) or AUTO_CREATE_TOPIC_KEY,
        default_topic_queue_nums=int_or(f, "defaultTopicQueueNums", 4),
        queue_id=-1 if qid is None else qid,
        sys_flag=int_or(f, "sysFlag", 0),
        born_timestamp=int_or(f, "bornTimestamp", 0),
        flag=int_or(f, "flag", 0),
        properties=f.get("properties") or "",
        reconsume_times=int_or(f, "reconsumeTimes", 0),
        unit_mode=get_bool(f, "unitMode"),
        max_reconsume_times=get_int(f, "maxReconsumeTimes"),
        batch=get_bool(f, "batch"),
    )


REFERENCE: dict[str, object] = {"parse_send_header": parse_send_header}
"""The pure-Python ``parse_send_header``, kept whatever runs (its twin takes headers of plain digits and strings)."""
_accel.install(sys.modules[__name__], REFERENCE, "init_send_header", _accel.headers)
