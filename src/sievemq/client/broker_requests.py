"""The requests brokers send to a client (Java ``ClientRemotingProcessor``), answered for the producers and consumers
of one client instance:

- NOTIFY_CONSUMER_IDS_CHANGED: a group's members changed; a rebalance round runs at once.
- CHECK_TRANSACTION_STATE: the transaction producer of the half message's group (``PGROUP``) answers the broker.
- RESET_CONSUMER_CLIENT_OFFSET: the consumer of the group starts over from the given offsets (docs/admin.md §4).
- CONSUME_MESSAGE_DIRECTLY: the consumer of the group runs its listener on the message (docs/admin.md §8); a request
  for another client id goes to the instance's ``directly_relay`` (a proxy's 5.x clients).
- PUSH_REPLY_MESSAGE_TO_CLIENT: the reply to a waiting ``Producer.request``.
- GET_CONSUMER_RUNNING_INFO: the consumer of the group describes itself (``ConsumerRunningInfo``: settings,
  subscriptions, queues; ``mqadmin consumerStatus``); with ``jstackEnable`` the stacks of the process's threads and
  of the event loop's tasks ride along (RocketMQ's ``jstack``).

Any other code is answered REQUEST_CODE_NOT_SUPPORTED (a one-way request, not at all).
"""

from __future__ import annotations

import asyncio
import io
import logging
import sys
import threading
import traceback
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from sievemq.client.members import ConsumerLike, ProducerLike
from sievemq.client.message import MessageQueue
from sievemq.client.request_reply import ReplyWaiters, pushed_reply
from sievemq.errors import SieveError
from sievemq.protocol.admin_bodies import decode_reset_body
from sievemq.protocol.consume_directly import ConsumeDirectlyResult
from sievemq.protocol.message import PropertyKey, decode_record
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from sievemq.util.tasks import spawn

log = logging.getLogger("sievemq.client.instance")  # the instance's records, as before the split

Relay = Callable[[Connection, RemotingCommand], Awaitable[RemotingCommand]]
"""Where a CONSUME_MESSAGE_DIRECTLY for another client id goes."""


class BrokerRequests:
    """Answers the brokers' requests to the client ``client_id`` from its ``producers`` and ``consumers`` (by group);
    ``replies``: the requests waiting for replies; ``rebalance_now()`` wakes the rebalance; ``relay()``: where a
    CONSUME_MESSAGE_DIRECTLY for another client id goes (None: refused); work that outlives a request runs in
    ``background``."""

    def __init__(
        self,
        client_id: str,
        producers: Mapping[str, ProducerLike],
        consumers: Mapping[str, ConsumerLike],
        replies: ReplyWaiters,
        *,
        rebalance_now: Callable[[], None],
        relay: Callable[[], Relay | None],
        background: set[asyncio.Task[Any]],
    ) -> None:
        self.client_id = client_id
        self.producers = producers
        self.consumers = consumers
        self.replies = replies
        self.rebalance_now = rebalance_now
        self.relay = relay
        self.background = background

    async def handle(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        """The answer to a broker's request (None: none is sent)."""
        if cmd.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
            log.info("broker %s:%d: consumer ids of group %s changed", *conn.peer, cmd.ext_fields.get("consumerGroup"))
            self.rebalance_now()
            return None
        if cmd.code == RequestCode.CHECK_TRANSACTION_STATE:
            self.check_transaction(conn, cmd)
            return None
        if cmd.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET:
            self.reset_offsets(conn, cmd)
            return None if cmd.is_oneway else cmd.response(ResponseCode.SUCCESS)
        if cmd.code == RequestCode.CONSUME_MESSAGE_DIRECTLY:
            return await self.consume_directly(conn, cmd)
        if cmd.code == RequestCode.GET_CONSUMER_RUNNING_INFO:
            return self.running_info(cmd)
        if cmd.code == RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT:
            try:
                reply = pushed_reply(cmd.ext_fields, cmd.body)
            except Exception as e:
                log.warning("broker %s:%d pushed a broken reply: %s", *conn.peer, e)
                return cmd.response(ResponseCode.SYSTEM_ERROR, f"broken reply: {e}")
            if not self.replies.deliver(reply):
                log.info("reply %s arrived after its request ended", reply.properties.get("CORRELATION_ID"))
            return cmd.response(ResponseCode.SUCCESS)
        if cmd.is_oneway:
            return None
        return cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f"request code {cmd.code} not supported by client")

    async def consume_directly(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """A broker passes an operator's CONSUME_MESSAGE_DIRECTLY (docs/admin.md §8): our consumer of the group runs
        its listener on the message; a request for another client id goes to ``relay()``."""
        group, client_id = cmd.ext_fields.get("consumerGroup", ""), cmd.ext_fields.get("clientId", "")
        relay = self.relay()
        if client_id != self.client_id and relay is not None:
            return await relay(conn, cmd)
        run = getattr(self.consumers.get(group), "consume_directly", None)
        if run is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"The Consumer Group <{group}> not exist in this consumer")
        try:
            msg, _ = decode_record(cmd.body)
        except ValueError as e:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"the message does not decode: {e}")
        try:
            result: ConsumeDirectlyResult = await run(msg)
        except SieveError as e:
            return cmd.response(ResponseCode.SYSTEM_ERROR, str(e))
        return cmd.response(ResponseCode.SUCCESS, body=result.encode())

    def running_info(self, cmd: RemotingCommand) -> RemotingCommand:
        """GET_CONSUMER_RUNNING_INFO (header ``consumerGroup``, ``jstackEnable``): the ConsumerRunningInfo of our
        consumer of the group; SYSTEM_ERROR, with RocketMQ's remark, when this client has none."""
        group = cmd.ext_fields.get("consumerGroup", "")
        consumer = self.consumers.get(group)
        if consumer is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"The Consumer Group <{group}> not exist in this consumer")
        info = consumer.running_info()
        if str(cmd.ext_fields.get("jstackEnable", "")).lower() == "true":
            info = info.with_jstack(stacks())
        return cmd.response(ResponseCode.SUCCESS, body=info.encode())

    def reset_offsets(self, conn: Connection, cmd: RemotingCommand) -> None:
        """Hand a broker's offset reset (docs/admin.md §4) to the consumer of its group."""
        topic, group = cmd.ext_fields.get("topic", ""), cmd.ext_fields.get("group", "")
        try:
            table = {MessageQueue(*k): v for k, v in decode_reset_body(cmd.body).items()}
        except ValueError as e:
            log.warning("broker %s:%d sent an unreadable offset reset: %s", *conn.peer, e)
            return
        consumer = self.consumers.get(group)
        if consumer is None:
            log.info("broker %s:%d resets offsets of group %r, which has no consumer here", *conn.peer, group)
            return
        log.info("broker %s:%d resets the offsets of group %s on topic %s", *conn.peer, group, topic)
        spawn(consumer.reset_offsets(topic, table), self.background, "reset-offsets")

    def check_transaction(self, conn: Connection, cmd: RemotingCommand) -> None:
        """Hand a broker's check of a half message to the transaction producer of its group (``PGROUP``)."""
        try:
            msg, _ = decode_record(cmd.body)
        except ValueError as e:
            log.warning("broker %s:%d sent a transaction check with a broken message: %s", *conn.peer, e)
            return
        group = msg.properties.get(PropertyKey.PGROUP, "")
        check = getattr(self.producers.get(group), "check_transaction", None)
        if check is None:
            log.warning("broker %s:%d checks a transaction of producer group %r, which is no transaction producer "
                        "here", *conn.peer, group)  # fmt: skip
            return
        check(conn, cmd.ext_fields, msg)


def stacks() -> str:
    """The stack of every thread of the process and of every task of the running event loop (RocketMQ's ``jstack``
    of a Java client lists its threads)."""
    names = {t.ident: t.name for t in threading.enumerate()}
    out = io.StringIO()
    for ident, frame in sorted(sys._current_frames().items()):
        out.write(f'"{names.get(ident, ident)}"\n{"".join(traceback.format_stack(frame))}\n')
    try:
        tasks = asyncio.all_tasks()
    except RuntimeError:  # no event loop runs
        tasks = set()
    for task in sorted(tasks, key=lambda t: t.get_name()):
        task.print_stack(file=out)
        out.write("\n")
    return out.getvalue()
