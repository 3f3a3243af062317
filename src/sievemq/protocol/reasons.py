"""Machine-readable reasons: why a request was refused, in a stable word a program can branch on.

A response that refuses something a client may act on carries, besides its RocketMQ response code and a remark
written for people, the extFields entry ``reason`` (``REASON_FIELD``) with one of the ``Reason`` values below.
Remarks may be reworded at any time; reasons never change meaning. Clients that do not know the field ignore
it (RocketMQ's clients read only the fields they expect). See ``docs/protocol/codes.md``.

A heartbeat answer stays SUCCESS when the broker refuses some of the subscriptions it carries (a failed heartbeat
would make clients drop the broker); it then carries ``reason = SUBSCRIPTION_INCONSISTENT`` and
``REFUSED_SUBSCRIPTIONS_FIELD``: a JSON list of ``{"group", "topic", "remark"}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

import orjson

__all__ = [
    "REASON_FIELD",
    "REFUSED_SUBSCRIPTIONS_FIELD",
    "Reason",
    "RefusedSubscription",
    "decode_refused_subscriptions",
    "encode_refused_subscriptions",
    "reason_of",
]

REASON_FIELD = "reason"
REFUSED_SUBSCRIPTIONS_FIELD = "refusedSubscriptions"


class Reason(StrEnum):
    """Stable reasons for refusals (the value is what travels)."""

    SUBSCRIPTION_INCONSISTENT = "SUBSCRIPTION_INCONSISTENT"
    """The client subscribes a topic differently from its consumer group; it gets no queues of it."""
    SQL92_DISABLED = "SQL92_DISABLED"
    """The broker does not filter by SQL92 (``enablePropertyFilter = false``)."""
    FILTER_NOT_REGISTERED = "FILTER_NOT_REGISTERED"
    """The filter server holds no filter function for the (group, topic): register it (302) and pull again."""
    FILTER_DISABLED = "FILTER_DISABLED"
    """The filter function failed too often and is off until registered again."""
    FILTER_FAILED = "FILTER_FAILED"
    """The filter function failed on this batch; nothing was skipped (pull the same offset again)."""
    FILTER_LOAD_FAILED = "FILTER_LOAD_FAILED"
    """The filter function could not be loaded (import or compile error)."""
    FILTER_NOT_ALLOWED = "FILTER_NOT_ALLOWED"
    """The filter server's policy refuses the function (module not allowed, uploads off, bad signature)."""
    FILTER_INVALID = "FILTER_INVALID"
    """The registration request itself is malformed (name, classCRC, source size or encoding)."""
    FILTER_WORKERS_FULL = "FILTER_WORKERS_FULL"
    """Code 2 SYSTEM_BUSY from a filter server: an uploaded function needs workers of its own and the filter server
    already runs ``maxUploadWorkers`` of other uploaded functions (a 302, or a pull after its idle workers stopped);
    nothing was registered or skipped. Retry later."""
    BROKER_UNREACHABLE = "BROKER_UNREACHABLE"
    """A filter server could not pull from its broker."""
    DISK_FULL = "DISK_FULL"
    """The broker's store disk has no room for the message (code 14): nothing was stored; retry later or elsewhere."""
    INVALID_NAME = "INVALID_NAME"
    """A topic or group name in the request is not legal (RocketMQ's characters ``%|a-zA-Z0-9_-``, at most 127
    bytes for a topic, 255 for a group); nothing was done."""
    BROKER_IS_SLAVE = "BROKER_IS_SLAVE"
    """The broker is a slave: it serves reads and offsets, never writes; send to the master of its set."""
    HA_MASTER_BEHIND = "HA_MASTER_BEHIND"
    """A master holds less of the commit log than one of its slaves (it lost data, or is new): it refuses writes
    until an operator recovers it (``sievemq broker --recover-from-slave``)."""
    HA_MASTER_FENCED = "HA_MASTER_FENCED"
    """Automatic failover: this master's etcd lease is not surely alive (etcd unreachable or slow), or it is handing
    the set over: it acknowledges nothing, another may be elected. With code 14 (SERVICE_NOT_AVAILABLE) the message was
    not stored; with code 1 (SYSTEM_ERROR) it was stored before the fence and may or may not survive. Retry: the
    client's route moves to the set's master."""
    HA_EPOCH_MISMATCH = "HA_EPOCH_MISMATCH"
    """Automatic failover: a replication link was asked for in another epoch than this master's (or of a broker that
    is not the master): the replica reads the set's state again and follows the master of the current epoch."""
    IN_SYNC_REPLICAS_NOT_ENOUGH = "IN_SYNC_REPLICAS_NOT_ENOUGH"
    """Automatic failover: fewer brokers are in the SyncStateSet than ``minInSyncReplicas``: writes are refused until
    a replica catches up."""
    HA_DIVERGED = "HA_DIVERGED"
    """A master and a slave hold different bytes at the same commit-log offsets: the slave does not follow."""
    HA_PORT_UNAVAILABLE = "HA_PORT_UNAVAILABLE"
    """HA_CHECK (code 1): the logs agree, but the broker cannot listen on its HA port (``haListenHost``,
    ``haListenPort``: taken, or an address it does not have), so it hands out no ticket. Free the port or change
    the settings; the slave asks again."""
    INVALID_HEADER = "INVALID_HEADER"
    """A request field is missing, not a number, or a number outside its range; nothing was done."""
    NO_PERMISSION = "NO_PERMISSION"
    """ACL (code 16): the request's account lacks a permission it needs (PUB or SUB on a topic or group, a DENY
    entry, or an admin-only request); nothing was done. Grant it in the ACL file or use another account."""
    ACL_NO_CREDENTIALS = "ACL_NO_CREDENTIALS"
    """ACL (code 16): the request carries no AccessKey (an unsigned client) and its address is not trusted."""
    ACL_UNKNOWN_ACCOUNT = "ACL_UNKNOWN_ACCOUNT"
    """ACL (code 16): no account of the server's ACL file has the request's AccessKey."""
    ACL_SIGNATURE = "ACL_SIGNATURE"
    """ACL (code 16): the Signature is missing or not the one the account's secret key gives (wrong secret)."""
    ACL_SIGNATURE_EXPIRED = "ACL_SIGNATURE_EXPIRED"
    """ACL (code 16): a strictly signed request's ``SignedAt`` is outside the server's window
    (``aclSignatureWindowSeconds``): the clocks disagree, or the request was held back and sent later."""
    ACL_REPLAYED = "ACL_REPLAYED"
    """ACL (code 16): the strictly signed request's nonce was seen before (a replay), or is too old to tell."""
    ACL_USER_DISABLED = "ACL_USER_DISABLED"
    """ACL 2.0 (code 16): the request's user exists but is disabled (``userStatus`` disable); enable it with
    ``mqadmin updateUser`` or use another user."""
    ACL_INVALID = "ACL_INVALID"
    """ACL 2.0 (code 29): a user or ACL admin request is not valid (a missing or malformed name, password, resource,
    action, decision or source IP, a user that exists or does not); nothing was changed."""
    ACL_STRICT_REQUIRED = "ACL_STRICT_REQUIRED"
    """ACL (code 16): the request needs a strict signature (``aclStrictSignatures``), or is an admin request
    carrying a field its code does not know, which a plain signature cannot protect."""
    TOO_MANY_OPEN_TRANSACTIONS = "TOO_MANY_OPEN_TRANSACTIONS"
    """The broker holds ``transactionOpenMax`` open transactions (code 2 SYSTEM_BUSY): the half message was not
    stored. End open transactions (commit or roll back), or retry later."""
    TIMER_INVALID = "TIMER_INVALID"
    """A timer property (``TIMER_DELIVER_MS``, ``TIMER_DELAY_SEC``, ``TIMER_DELAY_MS``) is not a whole number >= 0,
    or is on a message that cannot wait (a batch, a transactional message), or the broker takes no timer messages
    (code 13 MESSAGE_ILLEGAL); nothing was stored."""
    TIMER_TOO_FAR = "TIMER_TOO_FAR"
    """A timer message's delivery time is more than ``timerMaxDelaySec`` ahead (code 13 MESSAGE_ILLEGAL); nothing
    was stored."""
    TOO_MANY_TIMERS = "TOO_MANY_TIMERS"
    """The broker holds ``timerMaxPending`` timer messages waiting (code 2 SYSTEM_BUSY): the message was not
    stored. Retry later, or send it nearer its time."""
    TOO_MANY_TOPICS = "TOO_MANY_TOPICS"
    """The broker holds ``maxTopics`` topics already (code 1 SYSTEM_ERROR): a send that would have created one more,
    or a topic creation, was refused; nothing was stored. Use an existing topic, delete unused ones, or raise
    ``maxTopics``."""
    TOO_MANY_GROUPS = "TOO_MANY_GROUPS"
    """The broker holds ``maxSubscriptionGroups`` consumer groups already (code 26 SUBSCRIPTION_GROUP_NOT_EXIST): a
    request of a new group, which would have created it, was refused. Delete unused groups or raise the limit."""
    BROKER_GONE = "BROKER_GONE"
    """A name server knows no route for the topic because every broker that served it left (stopped, crashed, or
    went silent) (code 17 TOPIC_NOT_EXIST); the remark names them and when they left. Start the broker again."""
    RECEIPT_HANDLE_INVALID = "RECEIPT_HANDLE_INVALID"
    """A POP receipt handle is not one this broker made (malformed, or of another broker); nothing was done."""
    GROUP_NOT_FOUND = "GROUP_NOT_FOUND"
    """The broker knows no such consumer group (code 26 SUBSCRIPTION_GROUP_NOT_EXIST): no subscription config, no
    committed offset, no live client; nothing was done. Check the name (``sievemq group list``)."""
    RECEIPT_HANDLE_EXPIRED = "RECEIPT_HANDLE_EXPIRED"
    """No lease matches the receipt handle (code 208 NO_MESSAGE): the message was acked already, or its invisible
    time ran out and it was delivered again under a new handle (ack that one)."""
    CONSUMER_NOT_ONLINE = "CONSUMER_NOT_ONLINE"
    """CONSUME_MESSAGE_DIRECTLY (code 1 SYSTEM_ERROR): no consumer of that client id is connected to the broker in
    that group (``sievemq group progress`` lists the members); nothing was consumed."""
    CLIENT_NO_ANSWER = "CLIENT_NO_ANSWER"
    """CONSUME_MESSAGE_DIRECTLY (code 1 SYSTEM_ERROR): the consumer did not answer within the time asked (a slow
    listener, or a client that ignores the request); the listener may still have run."""
    ETCD_UNAVAILABLE = "ETCD_UNAVAILABLE"
    """A name server answering RocketMQ's controller requests (``etcdEndpoints``) could not read or write etcd in time
    (code 1 SYSTEM_ERROR); nothing was changed. Retry, or ask another name server."""
    SET_NOT_FOUND = "SET_NOT_FOUND"
    """electMaster (code 2010 CONTROLLER_BROKER_NEED_TO_BE_REGISTERED): etcd holds no state of that cluster's broker
    set (no broker of it ever ran under automatic failover with this ``etcdRoot``)."""
    ALREADY_MASTER = "ALREADY_MASTER"
    """electMaster (code 2011 CONTROLLER_MASTER_STILL_EXIST): the broker asked for is the set's live master already;
    the answer's header names it and its epoch."""
    HANDOVER_TARGET_NOT_ALIVE = "HANDOVER_TARGET_NOT_ALIVE"
    """electMaster (code 2012 CONTROLLER_ELECT_MASTER_FAILED): the broker asked for has no live key in etcd (stopped,
    or cut off from etcd); nothing was changed."""
    HANDOVER_TARGET_NOT_IN_SYNC = "HANDOVER_TARGET_NOT_IN_SYNC"
    """electMaster (code 2012): the broker asked for is not in the SyncStateSet (it lacks acknowledged messages);
    nothing was changed. Ask again once it caught up (``mqadmin getSyncStateSet``)."""
    HANDOVER_NO_LIVE_MASTER = "HANDOVER_NO_LIVE_MASTER"
    """electMaster (code 2012): the set has no live master to hand over; its brokers elect one by themselves within
    seconds. Nothing was changed; ask again once they did."""
    HANDOVER_PENDING = "HANDOVER_PENDING"
    """electMaster (code 2012): the master is handing over to another broker, as asked before; nothing was changed."""
    HANDOVER_REFUSED = "HANDOVER_REFUSED"
    """electMaster (code 2012): the request was withdrawn without a handover: the master refused it (the broker asked
    for fell behind or out of the SyncStateSet meanwhile), or the name server that wrote it gave up waiting (an
    electMaster that joined a pending request); the set keeps its master."""
    HANDOVER_OVERTAKEN = "HANDOVER_OVERTAKEN"
    """electMaster (code 2012): while the request waited, an election made another broker master (the remark names
    it); the request was withdrawn."""
    HANDOVER_TIMEOUT = "HANDOVER_TIMEOUT"
    """electMaster (code 2012): the master did not hand over in time (about 15 s); the request was withdrawn and the
    set keeps its master."""


def reason_of(fields: Mapping[str, str]) -> Reason | None:
    """The reason in a response's extFields, None when absent or not one sievemq knows."""
    value = fields.get(REASON_FIELD)
    if not value:
        return None
    try:
        return Reason(value)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class RefusedSubscription:
    """One subscription a broker refused in a heartbeat answer."""

    group: str
    topic: str
    remark: str
    """What the client is told, for people."""


def encode_refused_subscriptions(refused: list[RefusedSubscription]) -> str:
    """The ``refusedSubscriptions`` field value."""
    return orjson.dumps([{"group": r.group, "topic": r.topic, "remark": r.remark} for r in refused]).decode()


def decode_refused_subscriptions(fields: Mapping[str, str]) -> list[RefusedSubscription]:
    """The refused subscriptions a heartbeat answer lists (empty when none or unreadable)."""
    raw = fields.get(REFUSED_SUBSCRIPTIONS_FIELD)
    if not raw:
        return []
    try:
        items = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return []
    out: list[RefusedSubscription] = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict):
            group, topic, remark = (str(item.get(k, "")) for k in ("group", "topic", "remark"))
            out.append(RefusedSubscription(group, topic, remark))
    return out
