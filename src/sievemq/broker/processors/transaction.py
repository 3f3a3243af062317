"""END_TRANSACTION (37): a producer commits or rolls back a half message, by itself or answering a check
(docs/transactions.md §4). ``broker/transactions/service.py`` does the work."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sievemq.acl.permission import Perm
from sievemq.broker.processors.send import stored_code
from sievemq.broker.transactions.service import EndRefused, EndRequest, TransactionService
from sievemq.broker.write_gate import OPEN, WriteGate
from sievemq.errors import RemotingError
from sievemq.protocol.sysflag import TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE, TRANSACTION_ROLLBACK_TYPE
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from sievemq.remoting.headers import get_str, require_int, require_str
from sievemq.remoting.server import ProcessorTable, ResourceCheck, allow_all

__all__ = ["TransactionProcessor"]

log = logging.getLogger(__name__)


def end_request(fields: dict[str, str]) -> EndRequest | None:
    """The END_TRANSACTION header as a request; None for ``commitOrRollback`` 0 (the producer does not know yet:
    nothing to do). RemotingError for a missing field or an unknown value."""
    kind = require_int(fields, "commitOrRollback")
    if kind == TRANSACTION_NOT_TYPE:
        return None
    if kind not in (TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE):
        raise RemotingError(
            ResponseCode.SYSTEM_ERROR,
            f"commitOrRollback must be {TRANSACTION_COMMIT_TYPE} (commit), {TRANSACTION_ROLLBACK_TYPE} (rollback) "
            f"or {TRANSACTION_NOT_TYPE} (unknown), got {kind}",
        )
    return EndRequest(
        producer_group=require_str(fields, "producerGroup"),
        half_offset=require_int(fields, "tranStateTableOffset"),
        half_phy=require_int(fields, "commitLogOffset"),
        commit=kind == TRANSACTION_COMMIT_TYPE,
        from_check=(get_str(fields, "fromTransactionCheck") or "").lower() == "true",
        msg_id=get_str(fields, "msgId") or "",
    )


@dataclass
class TransactionProcessor:
    """Answers END_TRANSACTION."""

    transactions: TransactionService
    gate: WriteGate = OPEN
    """A slave refuses (the producer's END_TRANSACTION goes to the master that holds the half message)."""
    check_more: ResourceCheck = allow_all
    """The ACL's check of the half message's topic (PUB: only a producer of that topic commits or rolls back)."""

    def register(self, table: ProcessorTable) -> None:
        """Put END_TRANSACTION into ``table``."""
        table.register(RequestCode.END_TRANSACTION, self.end_transaction)

    async def end_transaction(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """37: commit (the message is stored in its topic, once) or roll back (it never is)."""
        refusal = self.gate.write_refusal()
        if refusal is not None:
            raise refusal
        req = end_request(cmd.ext_fields)
        if req is None:
            return cmd.response(ResponseCode.SUCCESS, "transaction state unknown: the broker will check back")
        if cmd.remark:
            log.info("producer %s:%d ended transaction of %s with a note: %.200s", *conn.peer, req.msg_id, cmd.remark)
        try:
            result, remark = await self.transactions.end(req, lambda t: self.check_more(conn, cmd, {t: Perm.PUB}))
        except EndRefused as e:
            raise RemotingError(ResponseCode.SYSTEM_ERROR, e.why) from None
        if result is None:
            return cmd.response(ResponseCode.SUCCESS, remark)
        code = stored_code(result, "transaction record")
        if code == ResponseCode.SUCCESS:
            last = result.msgs[-1]
            code = ResponseCode(await self.gate.replicated(last.commit_log_offset + last.store_size))
        return cmd.response(code, remark)
