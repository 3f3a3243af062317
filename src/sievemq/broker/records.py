"""A stored record named by its commit-log offset, as requests name them (CONSUMER_SEND_MSG_BACK's ``offset``,
CONSUME_MESSAGE_DIRECTLY's offsetMsgId): accepted only when the consume queue of its topic and queue points at that
very offset, so bytes inside another message's body that look like a record are never taken for one."""

from __future__ import annotations

from sievemq.protocol.message import MessageExt, decode_record
from sievemq.store import MessageStore

__all__ = ["queued_record"]


def queued_record(store: MessageStore, phy: int) -> tuple[bytes, MessageExt] | None:
    """The raw record at ``phy`` and its decoding, or None when no queue's entry points at ``phy``."""
    stored = store.look_message_by_offset(phy)
    if not stored:
        return None
    raw = bytes(stored)
    try:
        msg = decode_record(raw)[0]
    except ValueError:
        return None
    entries = store.read_cq_entries(msg.topic, msg.queue_id, msg.queue_offset, 1)
    if not entries or entries[0][0] != phy:
        return None
    return raw, msg
