"""Messages made ready for the wire: validation, UNIQ_KEY, compression, batch bodies, and the send header.

Pure (no I/O): the producer prepares each message (or batch) once, then frames it for each queue it tries
(docs/protocol/requests.md §2). A body larger than ``compress_over`` is zlib-compressed (sysFlag bit 0x1); a batch
body is never compressed. A message for a retry topic carries its reconsume counts in the header, not as
properties.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from sievemq.client.errors import MessageValidationError
from sievemq.client.message import Message, MessageQueue
from sievemq.client.validation import validate_batch, validate_message
from sievemq.protocol.batch import BatchEntry, encode_batch
from sievemq.protocol.compression import compress_zlib
from sievemq.protocol.message import PropertyKey, properties_to_string
from sievemq.protocol.msgid import UniqIdGenerator
from sievemq.protocol.names import AUTO_CREATE_TOPIC_KEY, is_retry_topic
from sievemq.protocol.send_header import SendMessageHeader
from sievemq.protocol.sysflag import COMPRESSED_FLAG

_uniq_ids: UniqIdGenerator | None = None


def new_uniq_id() -> str:
    """A fresh UNIQ_KEY (one generator per process)."""
    global _uniq_ids
    if _uniq_ids is None:
        _uniq_ids = UniqIdGenerator()
    return _uniq_ids.next()


@dataclass
class Outgoing:
    """A validated message (or batch) ready to be framed."""

    topic: str
    body: bytes
    properties: dict[str, str]
    flag: int = 0
    sys_flag: int = 0
    batch: bool = False
    uniq_ids: list[str] = field(default_factory=list)
    reconsume_times: int = 0
    max_reconsume_times: int | None = None
    source: Message | None = None


def prepare(msg: Message, max_message_size: int, compress_over: int) -> Outgoing:
    """Validate one message; add UNIQ_KEY and compress a body larger than ``compress_over``."""
    validate_message(msg, max_message_size)
    props = msg.wire_properties()
    uniq = props.setdefault(PropertyKey.UNIQ_KEY, new_uniq_id())
    body = bytes(msg.body)
    sys_flag = 0
    if len(body) > compress_over:
        body = compress_zlib(body)
        sys_flag |= COMPRESSED_FLAG
    return Outgoing(msg.topic, body, props, msg.flag, sys_flag, False, [uniq], source=msg)


def prepare_batch(msgs: Sequence[Message], max_message_size: int) -> Outgoing:
    """Validate a batch and encode its body (never compressed)."""
    validate_batch(msgs, max_message_size)
    entries: list[BatchEntry] = []
    ids: list[str] = []
    for m in msgs:
        props = m.wire_properties()
        props.pop(PropertyKey.WAIT, None)
        ids.append(props.setdefault(PropertyKey.UNIQ_KEY, new_uniq_id()))
        entries.append(BatchEntry(m.flag, bytes(m.body), props))
    props = {PropertyKey.WAIT: "true" if msgs[0].wait_store else "false"}
    body = encode_batch(entries)
    if len(body) > max_message_size:
        raise MessageValidationError(f"the batch is {len(body)} bytes, larger than the limit {max_message_size}")
    return Outgoing(msgs[0].topic, body, props, 0, 0, True, ids, source=msgs[0])


def send_header(out: Outgoing, mq: MessageQueue, group: str, default_topic_queue_nums: int) -> SendMessageHeader:
    """The SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE header of ``out`` for queue ``mq``."""
    props = dict(out.properties)
    reconsume = out.reconsume_times
    max_reconsume = out.max_reconsume_times
    if is_retry_topic(out.topic):
        if (rt := props.pop(PropertyKey.RECONSUME_TIME, None)) is not None:
            reconsume = int(rt)
        if (mr := props.pop(PropertyKey.MAX_RECONSUME_TIMES, None)) is not None:
            max_reconsume = int(mr)
    return SendMessageHeader(
        producer_group=group,
        topic=out.topic,
        default_topic=AUTO_CREATE_TOPIC_KEY,
        default_topic_queue_nums=default_topic_queue_nums,
        queue_id=mq.queue_id,
        sys_flag=out.sys_flag,
        born_timestamp=int(time.time() * 1000),
        flag=out.flag,
        properties=properties_to_string(props),
        reconsume_times=reconsume,
        max_reconsume_times=max_reconsume,
        batch=out.batch,
    )
