"""JSON whose object keys may themselves be objects: how RocketMQ writes maps keyed by a message queue. Pure.

RocketMQ's Java side serializes a ``Map<MessageQueue, V>`` with the queue object itself as the key, which is not
JSON (a JSON key is a string)::

    {"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:{"brokerOffset":5, ...}}}

ConsumeStats (GET_CONSUME_STATS 208) and ResetOffsetBody (INVOKE_BROKER_TO_RESET_OFFSET 222 and
RESET_CONSUMER_CLIENT_OFFSET 220) travel this way, and RocketMQ's tools and clients expect exactly that form
(docs/admin.md §2). ``dumps`` writes it: a ``QueueMap`` inside a document becomes such an object; everything else
is plain JSON. ``loads`` reads it back, and reads plain JSON too: an object key that is a queue object becomes a
``QueueKey``, a bare whole number its text (how RocketMQ writes a map keyed by numbers, e.g. the name server's
cluster info); any other key that is not a string is refused.

``loads`` is written for hostile input: it nests at most ``MAX_DEPTH`` levels, never recurses without bound and
raises ``ValueError`` (never anything else) for text that is not such a document.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any, NamedTuple

import orjson

__all__ = ["MAX_DEPTH", "QueueKey", "QueueMap", "dumps", "loads"]

MAX_DEPTH = 32
"""Deepest nesting ``loads`` accepts (RocketMQ's bodies nest 4 levels)."""


class QueueKey(NamedTuple):
    """A message queue as a map key: (topic, broker name, queue id), sorted as RocketMQ sorts queues."""

    topic: str
    broker_name: str
    queue_id: int

    def to_json(self) -> dict[str, Any]:
        """RocketMQ's MessageQueue object."""
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}


class QueueMap(dict[QueueKey, Any]):
    """A map keyed by message queues; ``dumps`` writes its keys as queue objects."""


def dumps(document: Any) -> bytes:
    """``document`` as RocketMQ writes it: plain JSON, except that every ``QueueMap`` has object keys."""
    return "".join(_write(document)).encode()


def _write(value: Any) -> Iterator[str]:
    if isinstance(value, QueueMap):
        yield "{"
        for i, (key, item) in enumerate(sorted(value.items())):
            yield ("," if i else "") + orjson.dumps(QueueKey(*key).to_json()).decode() + ":"
            yield from _write(item)
        yield "}"
    elif isinstance(value, dict):
        yield "{"
        for i, (key, item) in enumerate(value.items()):
            yield ("," if i else "") + orjson.dumps(str(key)).decode() + ":"
            yield from _write(item)
        yield "}"
    elif isinstance(value, list | tuple):
        yield "["
        for i, item in enumerate(value):
            yield "," if i else ""
            yield from _write(item)
        yield "]"
    else:
        yield orjson.dumps(value).decode()


# ------------------------------------------------------------------------------------------------ reading
_WS = re.compile(r"[ \t\n\r]*")
_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"')
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_LITERALS = {"true": True, "false": False, "null": None}


def loads(data: bytes | str) -> Any:
    """Parse a document ``dumps`` writes (or plain JSON); ValueError when it is neither."""
    try:
        text = data.decode() if isinstance(data, bytes | bytearray) else str(data)
    except UnicodeDecodeError as e:
        raise ValueError(f"not UTF-8: {e}") from None
    try:  # plain JSON: the fast path
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        pass
    parser = _Parser(text)
    value = parser.value(0)
    parser.skip_ws()
    if parser.pos != len(text):
        raise ValueError(f"extra text at {parser.pos}")
    return value


class _Parser:
    """Recursive descent over ``text`` (depth-limited)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def skip_ws(self) -> None:
        m = _WS.match(self.text, self.pos)
        self.pos = m.end() if m else self.pos

    def _peek(self) -> str:
        self.skip_ws()
        if self.pos >= len(self.text):
            raise ValueError("unexpected end of text")
        return self.text[self.pos]

    def _expect(self, ch: str) -> None:
        if self._peek() != ch:
            raise ValueError(f"expected {ch!r} at {self.pos}")
        self.pos += 1

    def value(self, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
        ch = self._peek()
        if ch == "{":
            return self._object(depth + 1)
        if ch == "[":
            return self._array(depth + 1)
        if ch == '"':
            return self._string()
        for word, lit in _LITERALS.items():
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return lit
        m = _NUMBER.match(self.text, self.pos)
        if m is None or m.end() == self.pos:
            raise ValueError(f"unexpected {ch!r} at {self.pos}")
        self.pos = m.end()
        number = m.group()
        return int(number) if number.lstrip("-").isdigit() else float(number)

    def _string(self) -> str:
        m = _STRING.match(self.text, self.pos)
        if m is None:
            raise ValueError(f"bad string at {self.pos}")
        self.pos = m.end()
        return str(json.loads(m.group()))

    def _array(self, depth: int) -> list[Any]:
        self._expect("[")
        out: list[Any] = []
        if self._peek() == "]":
            self.pos += 1
            return out
        while True:
            out.append(self.value(depth))
            if self._peek() == ",":
                self.pos += 1
                continue
            self._expect("]")
            return out

    def _object(self, depth: int) -> dict[Any, Any]:
        self._expect("{")
        out: dict[Any, Any] = {}
        if self._peek() == "}":
            self.pos += 1
            return out
        while True:
            at = self.pos
            key = self._string() if self._peek() == '"' else _key(self.value(depth), at)
            self._expect(":")
            out[key] = self.value(depth)
            if self._peek() == ",":
                self.pos += 1
                continue
            self._expect("}")
            return out


def _key(value: Any, at: int) -> QueueKey | str:
    """A key that is not a string: a message queue object (topic, brokerName, queueId), or a whole number, read as
    its text (RocketMQ writes a ``Map<Long, String>`` such as ClusterInfo's ``brokerAddrs`` as ``{0:"..."}``)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, dict):
        topic, broker, qid = value.get("topic"), value.get("brokerName"), value.get("queueId")
        if isinstance(topic, str) and isinstance(broker, str) and isinstance(qid, int) and not isinstance(qid, bool):
            return QueueKey(topic, broker, qid)
    raise ValueError(f"an object key at {at} is not a message queue")
