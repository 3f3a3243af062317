"""A broker's CONSUME_MESSAGE_DIRECTLY (309) at a client: run the push consumer's listener on the one message an
operator sent and say what it did (docs/admin.md §8). No offset moves, nothing is sent back or retried: it is a
check of the listener (RocketMQ's ``consumeMessageDirectly``).
"""

from __future__ import annotations

import logging
import time
import traceback
from typing import TYPE_CHECKING

from sievemq.client.message import ConsumeResult, restore_retry_topic
from sievemq.protocol.consume_directly import CMResult, ConsumeDirectlyResult
from sievemq.protocol.message import MessageExt, PropertyKey
from sievemq.protocol.names import is_retry_topic

if TYPE_CHECKING:
    from sievemq.client.consume_service import ConsumeService

__all__ = ["consume_directly", "verdict"]

log = logging.getLogger("sievemq.client.push_consumer")


_WORDS = {ConsumeResult.SUCCESS: CMResult.CR_SUCCESS, ConsumeResult.RECONSUME_LATER: CMResult.CR_LATER}


def verdict(result: object) -> CMResult:
    """A listener's answer as a ``CMResult``: the answers ``ConsumeService.call_listener`` accepts, and
    CR_RETURN_NULL for None or anything else (RocketMQ's word for a listener that gave no status)."""
    answer = ConsumeResult.of(result)
    return _WORDS[answer] if answer is not None else CMResult.CR_RETURN_NULL


async def consume_directly(service: ConsumeService, msg: MessageExt, orderly: bool) -> ConsumeDirectlyResult:
    """Run ``service``'s listener on ``msg`` alone; its verdict, how long it took, what it raised."""
    group = service.group
    if is_retry_topic(msg.topic):
        restore_retry_topic(msg, group)
    msg.properties[PropertyKey.CONSUME_START_TIME] = str(int(time.time() * 1000))
    started = time.monotonic()
    try:
        result = await service.run_listener([msg])
    except Exception as e:
        spent = int((time.monotonic() - started) * 1000)
        log.warning("listener of group %s raised on message %s consumed directly: %r", group, msg.msg_id, e)
        remark = "".join(traceback.format_exception(e))[-2000:]
        return ConsumeDirectlyResult(CMResult.CR_THROW_EXCEPTION, remark, spent, orderly)
    spent = int((time.monotonic() - started) * 1000)
    word = verdict(result)
    remark = "" if word is not CMResult.CR_RETURN_NULL or result is None else f"the listener returned {result!r}"
    log.info("message %s consumed directly by group %s's listener: %s in %d ms", msg.msg_id, group, word.value, spent)
    return ConsumeDirectlyResult(word, remark[:2000], spent, orderly)
