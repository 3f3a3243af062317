"""The client's message model: Message (to send), MessageQueue, Selector, ConsumeResult, SendResult, SendStatus.

Consumers receive ``sievemq.protocol.message.MessageExt`` (re-exported as ``sievemq.MessageExt``).
"""

from __future__ import annotations

import enum
import keyword
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sievemq.protocol.compression import CompressionError, decompress
from sievemq.protocol.message import MessageExt, PropertyKey
from sievemq.protocol.names import retry_topic
from sievemq.protocol.upload_signing import filter_class_crc, signed_fields
from sievemq.remoting.codes import ResponseCode

log = logging.getLogger(__name__)


@dataclass
class Message:
    """A message to send.

    ``keys`` are business keys (indexed by the broker, space-separated on the wire); ``properties`` are user
    properties (names must not be reserved RocketMQ names). ``delay_level`` 1..18 delays delivery
    (1 s, 5 s, 10 s, 30 s, 1 m, ...). ``deliver_at_ms`` (epoch milliseconds) delivers it at that time instead
    (RocketMQ 5's timer message, property ``TIMER_DELIVER_MS``; sievemq and RocketMQ 5 brokers, at most their
    ``timerMaxDelaySec`` ahead, 3 days by default; a RocketMQ 4 broker ignores it and delivers at once; not in a
    batch). ``wait_store`` asks the broker to answer after storing (``WAIT``).
    """

    topic: str
    body: bytes
    tags: str | None = None
    keys: list[str] | str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    flag: int = 0
    delay_level: int = 0
    wait_store: bool = True
    deliver_at_ms: int | None = None

    def key_list(self) -> list[str]:
        """``keys`` as a list."""
        if self.keys is None:
            return []
        if isinstance(self.keys, str):
            return [k for k in self.keys.split(" ") if k]
        return list(self.keys)

    def wire_properties(self) -> dict[str, str]:
        """Every property as it travels: user properties plus TAGS, KEYS, DELAY, TIMER_DELIVER_MS, WAIT."""
        props = dict(self.properties)
        if self.tags:
            props[PropertyKey.TAGS] = self.tags
        keys = self.key_list()
        if keys:
            props[PropertyKey.KEYS] = " ".join(keys)
        if self.delay_level > 0:
            props[PropertyKey.DELAY] = str(self.delay_level)
        if self.deliver_at_ms is not None:
            props[PropertyKey.TIMER_DELIVER_MS] = str(self.deliver_at_ms)
        props[PropertyKey.WAIT] = "true" if self.wait_store else "false"
        return props


@dataclass(frozen=True, order=True)
class MessageQueue:
    """One queue of a topic on one broker (sorted by topic, broker name, queue id like Java)."""

    topic: str
    broker_name: str
    queue_id: int

    def to_json(self) -> dict[str, Any]:
        """RocketMQ's JSON form."""
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}

    def key(self) -> str:
        """``topic@brokerName@queueId``: a stable string key."""
        return f"{self.topic}@{self.broker_name}@{self.queue_id}"

    @classmethod
    def from_key(cls, key: str) -> MessageQueue:
        """Parse ``key()``'s form."""
        topic, broker, qid = key.rsplit("@", 2)
        return cls(topic, broker, int(qid))

    def __str__(self) -> str:
        return f"{self.topic}/{self.broker_name}/{self.queue_id}"


class SendStatus(enum.Enum):
    """How a send succeeded (anything else raises)."""

    SEND_OK = ResponseCode.SUCCESS.value
    FLUSH_DISK_TIMEOUT = ResponseCode.FLUSH_DISK_TIMEOUT.value
    SLAVE_NOT_AVAILABLE = ResponseCode.SLAVE_NOT_AVAILABLE.value
    FLUSH_SLAVE_TIMEOUT = ResponseCode.FLUSH_SLAVE_TIMEOUT.value


@dataclass(frozen=True)
class SendResult:
    """What a send returned: the client id (UNIQ_KEY) and the broker's offsetMsgId, queue and offset.

    For a batch, ``msg_id`` and ``offset_msg_id`` list every message's id joined by commas.
    """

    status: SendStatus
    msg_id: str
    offset_msg_id: str
    message_queue: MessageQueue
    queue_offset: int
    region_id: str = "DefaultRegion"
    trace_on: bool = True

    @property
    def msg_ids(self) -> list[str]:
        """Every client message id (several for a batch)."""
        return self.msg_id.split(",") if self.msg_id else []


class ConsumeResult(enum.Enum):
    """What a push listener answers: SUCCESS, or RECONSUME_LATER to have the messages redelivered later."""

    SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"

    @classmethod
    def of(cls, answer: object) -> ConsumeResult | None:
        """A listener's answer as a ConsumeResult: itself, True for SUCCESS, False for RECONSUME_LATER; None for
        anything else (``None`` included: what it means is the caller's)."""
        if answer is True or answer == cls.SUCCESS:
            return cls.SUCCESS
        if answer is False or answer == cls.RECONSUME_LATER:
            return cls.RECONSUME_LATER
        return None


class ConsumeFrom(enum.Enum):
    """Where a group without a committed offset starts: LAST the messages sent after the group started, FIRST the
    oldest stored one, TIMESTAMP the one stored at ``consume_timestamp`` (docs/consume-from.md)."""

    LAST = "CONSUME_FROM_LAST_OFFSET"
    FIRST = "CONSUME_FROM_FIRST_OFFSET"
    TIMESTAMP = "CONSUME_FROM_TIMESTAMP"

    @classmethod
    def parse(cls, value: ConsumeFrom | str) -> ConsumeFrom:
        """Accept the enum, ``"last"``/``"first"``/``"timestamp"`` or the Java names."""
        if isinstance(value, ConsumeFrom):
            return value
        v = value.strip().upper()
        for member in cls:
            if v in (member.name, member.value):
                return member
        raise ValueError(f"consume_from must be last, first or timestamp, not {value!r}")


FUNCTION_EXPRESSION_TYPE = "FUNCTION"
"""``Selector.expression_type`` of a filter-function selector (sent as RocketMQ's class-filter mode: TAG with
``classFilterMode=true``)."""
_FUNCTION_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def _check_function_name(name: str, what: str) -> None:
    if not _FUNCTION_NAME_RE.match(name) or keyword.iskeyword(name):
        raise ValueError(
            f"{what} {name!r} must be a Python identifier starting with a letter (filter servers refuse names "
            "starting with '_')"
        )


@dataclass(frozen=True)
class FilterFunction:
    """A filter function that the filter servers of the topic's brokers run for a subscription.

    Named (``source`` empty): ``name`` is ``module:function`` of a module the filter server's operator allows
    (``filterModules``). Uploaded: ``source`` is Python source defining the function ``name``; each upload is signed
    with HMAC-SHA256 (``sievemq.protocol.upload_signing``) by ``access_key`` with the shared ``secret``, for one filter
    server, with the current time and a fresh nonce.
    """

    name: str
    source: str = ""
    access_key: str = ""
    secret: str | bytes = field(default="", repr=False)

    @property
    def kind(self) -> str:
        """``named`` or ``source``."""
        return "source" if self.source else "named"

    @property
    def body(self) -> bytes:
        """The REGISTER_MESSAGE_FILTER_CLASS body: the UTF-8 source (empty for a named function)."""
        return self.source.encode("utf-8")

    @property
    def crc(self) -> int:
        """``classCRC``: CRC32 & 0x7FFFFFFF of the UTF-8 source (of the name for a named function)."""
        return filter_class_crc(self.source if self.source else self.name)

    def register_fields(self, group: str, topic: str, filter_server: str) -> dict[str, Any]:
        """The extFields of REGISTER_MESSAGE_FILTER_CLASS (302) for ``group`` on ``topic`` to ``filter_server``
        (``ip:port``); an upload's are signed anew at each call (so build them for each request)."""
        fields: dict[str, Any] = {
            "consumerGroup": group,
            "topic": topic,
            "className": self.name,
            "classCRC": self.crc,
        }
        if self.source:
            fields.update(
                signed_fields(self.access_key, self.secret, group, topic, self.name, self.body, filter_server)
            )
        return fields

    def describe(self) -> str:
        """How logs and errors name the function."""
        return f"function {self.name!r}" if not self.source else f"uploaded function {self.name!r}"


@dataclass(frozen=True)
class Selector:
    """A subscription expression: tags (``"TagA || TagB"``, ``"*"``), SQL92 over message properties, or a filter
    function run by the filter servers next to the broker (``Selector.function``, ``Selector.function_source``)."""

    expression: str = "*"
    expression_type: str = "TAG"
    filter_function: FilterFunction | None = None

    @classmethod
    def tag(cls, expression: str | Iterable[str] | None = "*") -> Selector:
        """Tags joined by ``||``; ``"*"``/``None`` means every message."""
        if expression is None:
            return cls("*", "TAG")
        if not isinstance(expression, str):
            expression = " || ".join(expression)
        return cls(expression.strip() or "*", "TAG")

    @classmethod
    def sql(cls, expression: str) -> Selector:
        """A SQL92 condition on properties, e.g. ``"region = 'eu' AND amount > 10"``."""
        if not expression or not expression.strip():
            raise ValueError("a SQL92 selector needs an expression")
        return cls(expression.strip(), "SQL92")

    @classmethod
    def function(cls, name: str) -> Selector:
        """A function installed on the filter server hosts, named ``"module:function"`` (the module must be one of
        the filter servers' ``filterModules``), e.g. ``Selector.function("shop.filters:big_eu_orders")``.

        The function gets each message (topic, tags, keys, properties, body, ...) and returns whether to deliver it.
        """
        name = (name or "").strip()
        module, sep, func = name.partition(":")
        if not sep or not _MODULE_RE.match(module):
            raise ValueError(f"a named filter function is 'module:function', not {name!r}")
        _check_function_name(func, "function name")
        return cls(name, FUNCTION_EXPRESSION_TYPE, FilterFunction(name))

    @classmethod
    def function_source(cls, source: str, *, name: str, access_key: str, secret: str | bytes) -> Selector:
        """Python ``source`` defining the function ``name``, uploaded to the filter servers.

        Filter servers accept uploads only when their operator enabled them (``clientUploadFilterEnable``) and the
        request is signed (HMAC-SHA256) by ``access_key``, one of their ``uploadAccounts``, with the shared
        ``secret`` (``uploadSecret``).
        """
        if not isinstance(source, str) or not source.strip():
            raise ValueError("function_source needs the Python source of the function")
        _check_function_name(name, "function name")
        if not access_key:
            raise ValueError("an uploaded filter function needs the access_key of an upload account")
        if not secret:
            raise ValueError("an uploaded filter function needs the secret shared with the filter servers")
        return cls(name, FUNCTION_EXPRESSION_TYPE, FilterFunction(name, source, access_key, secret))

    @classmethod
    def of(cls, value: Selector | str | None) -> Selector:
        """A Selector from a Selector or a tag expression string."""
        if isinstance(value, Selector):
            return value
        return cls.tag(value)

    @property
    def is_tag(self) -> bool:
        """True for a TAG expression."""
        return self.expression_type == "TAG" and self.filter_function is None

    @property
    def is_function(self) -> bool:
        """True for a filter function (pulled through the filter servers)."""
        return self.filter_function is not None


def decompress_body(msg: MessageExt) -> None:
    """Inflate a compressed body in place (zlib, LZ4 or zstd); a body that cannot be inflated is left as stored."""
    try:
        msg.body = decompress(msg.body, msg.sys_flag)
    except CompressionError as e:
        log.warning("cannot decompress message %s (sysFlag 0x%x): %s; body left as stored", msg.msg_id, msg.sys_flag, e)


def restore_retry_topic(msg: MessageExt, group: str) -> None:
    """A message pulled from ``%RETRY%<group>`` gets its original topic back (property RETRY_TOPIC), like Java."""
    original = msg.properties.get(PropertyKey.RETRY_TOPIC)
    if original and msg.topic == retry_topic(group):
        msg.topic = original


def properties_of(values: Mapping[str, Any]) -> dict[str, str]:
    """User properties as strings."""
    return {str(k): str(v) for k, v in values.items()}
