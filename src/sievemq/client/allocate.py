"""How the clients of a consumer group share a topic's queues: RocketMQ's allocation strategies, as pure functions.

Every client of a group runs the same strategy over the same sorted queues and client ids and takes its own share,
so a group whose clients run different strategies (or different implementations of one) leaves queues unread or
reads them twice. These are the Java client's, computed the same way (``tests/compat/test_allocate.py`` compares
them with rocketmq-client's own classes over a generated corpus), so that sievemq's consumers can share a group with
Java ones whichever strategy the group uses:

=====================================  ===========================================================
``allocate_averagely`` (the default)    ``AllocateMessageQueueAveragely``: contiguous blocks
``allocate_by_circle``                  ``AllocateMessageQueueAveragelyByCircle``: dealt one by one
``consistent_hash(virtual_nodes=10)``   ``AllocateMessageQueueConsistentHash``: an MD5 hash ring
``by_config(queues)``                   ``AllocateMessageQueueByConfig``: a fixed list
=====================================  ===========================================================

A strategy is ``(queues, client ids, this client's id) -> this client's queues``; it sorts both lists itself, as
Java's ``RebalanceImpl`` does before it calls one.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Callable, Iterable, Sequence

from sievemq.client.message import MessageQueue

__all__ = ["AllocateStrategy", "allocate_averagely", "allocate_by_circle", "by_config", "consistent_hash"]

AllocateStrategy = Callable[[Sequence[MessageQueue], Sequence[str], str], list[MessageQueue]]


def _sorted(mqs: Sequence[MessageQueue], cids: Sequence[str], current: str) -> tuple[list[MessageQueue], list[str]]:
    """Both lists sorted (client ids without duplicates); empty when ``current`` is not a client of the group."""
    all_cids = sorted(set(cids))
    if not mqs or current not in all_cids:
        return [], all_cids
    return sorted(mqs), all_cids


def allocate_averagely(mqs: Sequence[MessageQueue], cids: Sequence[str], current: str) -> list[MessageQueue]:
    """The queues ``current`` owns when sorted ``mqs`` are dealt in contiguous blocks over sorted ``cids``.

    The first ``len(mqs) % len(cids)`` clients get one queue more; with more clients than queues the last
    clients get none. A client missing from ``cids`` gets nothing.
    """
    all_mqs, all_cids = _sorted(mqs, cids, current)
    if not all_mqs:
        return []
    n, c = len(all_mqs), len(all_cids)
    index = all_cids.index(current)
    mod = n % c
    if n <= c:
        average = 1
    elif mod > 0 and index < mod:
        average = n // c + 1
    else:
        average = n // c
    start = index * average if mod > 0 and index < mod else index * average + mod
    span = min(average, n - start)
    return [all_mqs[(start + i) % n] for i in range(max(0, span))]


def allocate_by_circle(mqs: Sequence[MessageQueue], cids: Sequence[str], current: str) -> list[MessageQueue]:
    """Sorted ``mqs`` dealt one at a time round the sorted ``cids``: client ``i`` owns queues ``i``, ``i + c``..."""
    all_mqs, all_cids = _sorted(mqs, cids, current)
    if not all_mqs:
        return []
    index, c = all_cids.index(current), len(all_cids)
    return all_mqs[index::c]


def md5_hash(key: str) -> int:
    """RocketMQ's ``ConsistentHashRouter.MD5Hash``: the first 4 bytes of the key's MD5 (UTF-8), big-endian."""
    return int.from_bytes(hashlib.md5(key.encode(), usedforsecurity=False).digest()[:4], "big")


def queue_text(mq: MessageQueue) -> str:
    """Java's ``MessageQueue.toString()``, what the hash ring routes."""
    return f"MessageQueue [topic={mq.topic}, brokerName={mq.broker_name}, queueId={mq.queue_id}]"


def consistent_hash(virtual_nodes: int = 10) -> AllocateStrategy:
    """``AllocateMessageQueueConsistentHash(virtual_nodes)``: each client is ``virtual_nodes`` points
    (``"<client id>-<i>"``, MD5-hashed) on a ring; a queue belongs to the first point at or after its own hash
    (wrapping round). A client joining or leaving moves only the queues next to its points."""
    if virtual_nodes < 1:
        raise ValueError(f"virtual_nodes must be at least 1, got {virtual_nodes}")

    def allocate(mqs: Sequence[MessageQueue], cids: Sequence[str], current: str) -> list[MessageQueue]:
        all_mqs, all_cids = _sorted(mqs, cids, current)
        if not all_mqs:
            return []
        ring: dict[int, str] = {}
        for cid in all_cids:  # in Java's order (sorted): of two equal hashes the later client's point stays
            for i in range(virtual_nodes):
                ring[md5_hash(f"{cid}-{i}")] = cid
        points = sorted(ring)
        owned = []
        for mq in all_mqs:
            at = bisect.bisect_left(points, md5_hash(queue_text(mq)))
            if ring[points[at % len(points)]] == current:
                owned.append(mq)
        return owned

    return allocate


def by_config(queues: Iterable[MessageQueue]) -> AllocateStrategy:
    """``AllocateMessageQueueByConfig``: this client reads ``queues``, whatever the others do."""
    fixed = list(queues)

    def allocate(mqs: Sequence[MessageQueue], cids: Sequence[str], current: str) -> list[MessageQueue]:
        return list(fixed)

    return allocate
