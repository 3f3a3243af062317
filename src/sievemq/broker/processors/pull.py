"""PULL_MESSAGE (11): read a queue from an offset through the subscription's filter, with long polling.

Store status -> response code follows remoting.md 5.2. A pull that finds nothing new and may be suspended is
parked (``PullHoldService``) until a matching message is dispatched to its queue or its suspend time runs out,
then runs once more without suspension.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from sievemq.broker.filters import build_filter
from sievemq.errors import RemotingError
from sievemq.protocol.heartbeat import Subscription
from sievemq.protocol.pull_header import FLAG_CLASS_FILTER, FLAG_COMMIT_OFFSET, FLAG_SUBSCRIPTION, FLAG_SUSPEND
from sievemq.protocol.reasons import Reason
from sievemq.protocol.route import PERM_READ
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from sievemq.remoting.headers import get_int, get_str, int_or, require_int, require_str
from sievemq.remoting.server import ProcessorTable
from sievemq.store.message_store import GetResult, GetStatus

if TYPE_CHECKING:
    from sievemq.broker.controller import BrokerController

_STATUS_CODE = {
    GetStatus.FOUND: ResponseCode.SUCCESS,
    GetStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetStatus.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetStatus.OFFSET_FOUND_NULL: ResponseCode.PULL_NOT_FOUND,
    GetStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
    GetStatus.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    GetStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
}


class PullProcessor:
    """Serves pulls."""

    def __init__(self, broker: BrokerController) -> None:
        self.b = broker

    def register(self, table: ProcessorTable) -> None:
        """Put PULL_MESSAGE into ``table``."""
        table.register(RequestCode.PULL_MESSAGE, self.pull)

    def _subscription(
        self, conn: Connection, group: str, topic: str, queue_id: int, sys_flag: int, f: dict[str, str]
    ) -> Subscription | None:
        info = self.b.consumers.get(group)
        client_id = conn.attrs.get("client_id")
        if info is not None and client_id is not None:
            remark = info.remark(client_id, topic)
            if remark is not None:
                raise RemotingError(ResponseCode.SUBSCRIPTION_NOT_EXIST, remark, Reason.SUBSCRIPTION_INCONSISTENT)
            info.pulls[(topic, queue_id)] = (client_id, time.monotonic())
        if sys_flag & FLAG_SUBSCRIPTION:
            return Subscription(
                topic=topic,
                sub_string=get_str(f, "subscription", "*") or "*",
                expression_type=get_str(f, "expressionType", "TAG") or "TAG",
                sub_version=int_or(f, "subVersion", 0),
            )
        if info is None:
            entry = self.b.filters.get(group, topic)
            if entry is not None:  # a persisted SQL92 filter keeps serving until the group's next heartbeat
                return Subscription(topic, entry.expression, "SQL92", entry.client_version)
            raise RemotingError(
                ResponseCode.SUBSCRIPTION_NOT_EXIST,
                f"the consumer's group info not exist: group {group} has sent no heartbeat to this broker",
            )
        sub = info.subscription(topic)
        if sub is None:
            raise RemotingError(
                ResponseCode.SUBSCRIPTION_NOT_EXIST,
                f"the consumer's subscription not exist: group {group} has no subscription of topic {topic}",
            )
        version = int_or(f, "subVersion", 0)
        if sub.sub_version < version:
            raise RemotingError(
                ResponseCode.SUBSCRIPTION_NOT_LATEST,
                f"the consumer's subscription not latest: group {group} topic {topic}",
            )
        return sub

    async def pull(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """11 PULL_MESSAGE."""
        f = cmd.ext_fields
        group = require_str(f, "consumerGroup")
        topic = require_str(f, "topic")
        queue_id = require_int(f, "queueId")
        offset = require_int(f, "queueOffset")
        max_nums = max(1, int_or(f, "maxMsgNums", 32))
        sys_flag = int_or(f, "sysFlag", 0)
        suspend_ms = int_or(f, "suspendTimeoutMillis", 15000)

        gc = self.b.groups.find(group)
        if gc is None:
            raise RemotingError(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group [{group}] does not exist"
            )
        if not gc.consumeEnable:
            raise RemotingError(ResponseCode.NO_PERMISSION, f"subscription group [{group}] consumption is disabled")
        tc = self.b.topics.get(topic)
        if tc is None:
            raise RemotingError(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!")
        if not tc.perm & PERM_READ:
            raise RemotingError(ResponseCode.NO_PERMISSION, f"the topic[{topic}] pulling message is forbidden")
        if queue_id < 0 or queue_id >= tc.read_queue_nums:
            raise RemotingError(
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:[{tc.read_queue_nums}]",
            )
        flt = None
        if not sys_flag & FLAG_CLASS_FILTER:
            sub = self._subscription(conn, group, topic, queue_id, sys_flag, f)
            if sub is not None and not sub.is_tag and not sys_flag & FLAG_SUBSCRIPTION:
                error = self.b.filters.error(group, topic)
                if error is not None:
                    raise RemotingError(
                        ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                        f"SQL92 expression of group {group}, topic {topic} does not compile {error}",
                    )
            flt = build_filter(sub, group, self.b.filters, self.b.config.enable_property_filter)

        if sys_flag & FLAG_COMMIT_OFFSET:
            commit = get_int(f, "commitOffset", -1)
            if commit is not None and commit >= 0:
                self.b.offsets.commit(group, topic, queue_id, commit)

        result = self.b.store.get_message(topic, queue_id, offset, max_nums, flt)
        code = self._code(result, offset)
        if code == ResponseCode.PULL_NOT_FOUND and sys_flag & FLAG_SUSPEND and suspend_ms > 0:
            hold_ms = suspend_ms if self.b.config.long_polling_enable else self.b.config.short_polling_time_mills
            hold_s = max(0.0, min(hold_ms, 25_000) / 1000.0)
            match = flt.match_code if flt is not None else None
            fut = self.b.hold.hold(topic, queue_id, offset, match)
            try:
                await asyncio.wait_for(asyncio.shield(fut), hold_s)
            except TimeoutError:
                pass
            finally:
                self.b.hold.release(topic, queue_id, fut)
            result = self.b.store.get_message(topic, queue_id, offset, max_nums, flt)
            code = self._code(result, offset)
        if code == ResponseCode.SUCCESS:
            self.b.stats.get(topic, result.message_count)
        return cmd.response(
            code,
            None if code == ResponseCode.SUCCESS else result.status.name,
            {
                "suggestWhichBrokerId": 0,
                "nextBeginOffset": result.next_begin_offset,
                "minOffset": result.min_offset,
                "maxOffset": result.max_offset,
            },
            b"".join(result.records) if code == ResponseCode.SUCCESS else b"",
        )

    @staticmethod
    def _code(result: GetResult, offset: int) -> ResponseCode:
        if result.status in (GetStatus.NO_MATCHED_LOGIC_QUEUE, GetStatus.NO_MESSAGE_IN_QUEUE):
            return ResponseCode.PULL_OFFSET_MOVED if offset != 0 else ResponseCode.PULL_NOT_FOUND
        return _STATUS_CODE.get(result.status, ResponseCode.SYSTEM_ERROR)
