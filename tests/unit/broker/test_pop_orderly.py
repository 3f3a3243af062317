"""Orderly POP without a broker (docs/pop.md §5): the lock of a queue while a batch is out, the same messages first
when it ran out, dead letters after the last attempt and the queue moving on, a retried POP (same attempt id)
getting its batch again; and, by simulation against the plain definition of FIFO, that whatever consumers do
(ack, fail, stall, extend, lose answers) every batch is exactly the next messages still to be consumed.

The simulation drives the pure parts the broker uses (``PopBook``, ``orderly.plan``, the records) the way
``broker/pop/service.py`` does, over a queue of ``n`` messages some of which the filter drops."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from sievemq.broker.pop import orderly
from sievemq.broker.pop.book import PopBook, QueueState
from sievemq.broker.pop.records import Kind, PopRecord

KEY = ("g", "t", 0)


def _book(cursor: int = 0) -> tuple[PopBook, QueueState]:
    book = PopBook()
    book.apply(PopRecord(Kind.INIT, "g", "t", cursors={0: cursor}))
    qs = book.queue(*KEY)
    assert qs is not None
    return book, qs


def _lease(book: PopBook, deadline: int, entries: list[tuple[int, int]], attempt_id: str = "") -> list[int]:
    """Lease (offset, attempt) pairs until ``deadline``; their tokens."""
    tokens = [book.new_token(0) for _ in entries]
    qs = book.queue(*KEY)
    assert qs is not None
    cursor = max([qs.cursor] + [o + 1 for o, _ in entries])
    book.apply(PopRecord(Kind.LEASE, *KEY, cursor=cursor, deadline=deadline,
                         entries=tuple((o, n, a) for (o, a), n in zip(entries, tokens, strict=True)),
                         attempt_id=attempt_id))  # fmt: skip
    return tokens


def test_a_queue_with_a_batch_out_is_locked_until_every_message_is_acked_or_due() -> None:
    book, qs = _book()
    assert orderly.plan(qs, 0, 32, 3) == orderly.OrderlyPlan(None), "a queue with nothing out is free"
    t = _lease(book, 100, [(0, 1), (1, 1), (2, 1)], "a1")
    assert orderly.plan(qs, 50, 32, 3).locked_until == 100, "a batch out locks the queue until its deadline"
    book.apply(PopRecord(Kind.ACK, *KEY, offset=0, token=t[0]))
    book.apply(PopRecord(Kind.ACK, *KEY, offset=1, token=t[1]))
    assert orderly.plan(qs, 50, 32, 3).locked_until == 100, "one message of the batch still out keeps the lock"
    book.apply(PopRecord(Kind.CHANGE, *KEY, offset=2, token=t[2], new_token=book.new_token(0), deadline=300))
    assert orderly.plan(qs, 200, 32, 3).locked_until == 300, "a longer invisible time holds the lock longer"
    assert orderly.plan(qs, 300, 32, 3) == orderly.OrderlyPlan(None, (), ((2, 2),), True), (
        "when it ran out the same message comes first, attempt raised, and new messages may follow it"
    )


def test_the_leased_messages_come_back_in_queue_order_before_anything_new() -> None:
    book, qs = _book()
    _lease(book, 100, [(4, 1), (5, 1)])
    t = _lease(book, 80, [(6, 2), (7, 1)])
    book.apply(PopRecord(Kind.CHANGE, *KEY, offset=6, token=t[0], new_token=book.new_token(0), deadline=10))
    assert orderly.plan(qs, 90, 32, 5).locked_until == 100, "one deadline to come is enough to lock"
    p = orderly.plan(qs, 100, 32, 5)
    assert p.again == ((4, 2), (5, 2), (6, 3), (7, 2)) and p.complete, "queue order, not deadline order"
    short = orderly.plan(qs, 100, 3, 5)
    assert short.again == ((4, 2), (5, 2), (6, 3)) and not short.complete, (
        "a batch smaller than what is out takes the first ones; nothing new may overtake the rest"
    )


def test_after_its_last_attempt_a_message_is_buried_and_the_queue_moves_on() -> None:
    book, qs = _book()
    _lease(book, 100, [(0, 3), (1, 2)])
    p = orderly.plan(qs, 100, 32, 3)
    assert p.bury == (0,) and p.again == ((1, 3),) and p.complete


def test_a_retry_of_the_pop_that_leased_the_batch_gets_it_again_with_the_same_attempts() -> None:
    book, qs = _book()
    _lease(book, 100, [(0, 1), (1, 2)], "a1")
    assert orderly.plan(qs, 50, 32, 5, "b2").locked_until == 100, "another POP is locked out"
    assert orderly.plan(qs, 50, 32, 5).locked_until == 100, "so is one without an attempt id"
    again = orderly.plan(qs, 50, 32, 5, "a1")
    assert again.locked_until is None and again.again == ((0, 1), (1, 2)), "the lost answer, again"
    _lease(book, 100, [(0, 1), (1, 2)], "")
    assert orderly.plan(qs, 50, 32, 5, "a1").locked_until == 100, "only the latest batch's POP is retried"


# ------------------------------------------------------------------------------------------ simulation
MAX_ATTEMPTS = 3


@dataclass
class _Sim:
    """One queue of ``n`` messages (``dropped`` filtered out), consumers popping it as a FIFO group does."""

    n: int
    dropped: frozenset[int]
    order: bool = True
    book: PopBook = field(default_factory=PopBook)
    now: int = 0
    done: dict[int, str] = field(default_factory=dict)
    """Offset -> "ack" or "dead", once."""
    acks: list[int] = field(default_factory=list)
    hands: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    """Consumer -> (offset, token) of what it holds, in the order it consumes them."""
    retry: dict[int, str] = field(default_factory=dict)
    """Consumer -> the attempt id of its POP whose answer it lost."""
    pops: int = 0
    batches: list[list[int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.book.apply(PopRecord(Kind.INIT, "g", "t", cursors={0: 0}))

    @property
    def qs(self) -> QueueState:
        qs = self.book.queue(*KEY)
        assert qs is not None
        return qs

    def to_consume(self) -> list[int]:
        return [o for o in range(self.n) if o not in self.dropped and o not in self.done]

    def _bury(self, offset: int) -> None:
        self.book.apply(PopRecord(Kind.DEAD, *KEY, offset=offset, token=self.qs.leases[offset].token))
        assert offset not in self.done, f"offset {offset} finished twice"
        self.done[offset] = "dead"

    def pop(self, consumer: int, max_nums: int, invisible: int, lose: bool) -> None:
        """One POP (as ``PopService._pop_once``); ``lose``: its answer never reaches the consumer."""
        self.pops += 1
        retrying = consumer in self.retry
        attempt_id = self.retry.pop(consumer, f"{consumer}-{self.pops}")
        qs = self.qs
        if self.order:
            plan = orderly.plan(qs, self.now, max_nums, MAX_ATTEMPTS, attempt_id)
            if plan.locked_until is not None:
                return
            bury, again, complete = plan.bury, plan.again, plan.complete
        else:  # what the service does without ``order``: due leases by deadline, then new ones
            due = qs.due(self.now, max_nums)
            bury = tuple(o for o in due if qs.leases[o].attempt >= MAX_ATTEMPTS)
            again = tuple((o, qs.leases[o].attempt + 1) for o in due if o not in bury)
            complete = True
        for o in bury:
            self._bury(o)
        live = [o for o, _ in again if qs.leases[o].deadline > self.now]
        assert not live or retrying, f"{live} handed out again while their lease runs: two consumers hold them"
        entries = [(o, self.book.new_token(0), a) for o, a in again]
        cursor = qs.cursor
        room = max_nums - len(entries) if complete else 0
        while room > 0 and cursor < self.n:  # the store's read through the filter from the cursor
            if cursor not in self.dropped:
                entries.append((cursor, self.book.new_token(0), 1))
                room -= 1
            cursor += 1
        self.book.apply(PopRecord(Kind.LEASE, *KEY, cursor=cursor, deadline=self.now + invisible,
                                  entries=tuple(entries), attempt_id=attempt_id if self.order else ""))  # fmt: skip
        batch = [o for o, _, _ in entries]
        if batch:
            self.batches.append(batch)
            assert batch == self.to_consume()[: len(batch)], (
                f"batch {batch} is not the next of what is left to consume {self.to_consume()}"
            )
        if lose:
            self.retry[consumer] = attempt_id
        else:
            self.hands[consumer] = [(o, n) for o, n, _ in entries]

    def consume(self, consumer: int, outcome: str, invisible: int) -> None:
        """The consumer's next message: ack, extend (change of invisible time), dead-letter it (its listener gave
        up), or fail (it stops this batch; the leases run out)."""
        hand = self.hands.get(consumer)
        if not hand:
            return
        offset, token = hand[0]
        lease = self.book.lease(*KEY, offset, token)
        if outcome == "fail" or lease is None:  # a stale handle is refused; a FIFO consumer drops the batch
            self.hands[consumer] = []
            return
        if outcome == "extend":
            new = self.book.new_token(0)
            self.book.apply(PopRecord(Kind.CHANGE, *KEY, offset=offset, token=token, new_token=new,
                                      deadline=self.now + invisible))  # fmt: skip
            hand[0] = (offset, new)
            return
        hand.pop(0)
        if outcome == "dlq":
            self._bury(offset)
            return
        self.book.apply(PopRecord(Kind.ACK, *KEY, offset=offset, token=token))
        assert offset not in self.done, f"offset {offset} finished twice"
        self.done[offset] = "ack"
        assert not self.acks or self.acks[-1] < offset, f"ack of {offset} after {self.acks[-1]}: out of order"
        self.acks.append(offset)

    def round(self) -> None:
        """The background round: due leases whose last attempt ran out go to the dead-letter topic."""
        for key, offset in self.book.due(self.now, 1024):
            lease = self.qs.leases.get(offset)
            if key == KEY and lease is not None and lease.attempt >= MAX_ATTEMPTS:
                self._bury(offset)

    def drain(self) -> None:
        """Time passes and one well-behaved consumer takes everything left."""
        self.hands.clear()
        self.retry.clear()
        for _ in range(3 * self.n + 3):
            self.now += 10**6
            self.pop(0, 64, 1000, lose=False)
            while self.hands.get(0):
                self.consume(0, "ack", 0)
        assert sorted(self.done) == [o for o in range(self.n) if o not in self.dropped], "every message finished"
        assert not set(self.done) & self.dropped, "filtered-out messages are never handed out"


_ACTIONS = st.one_of(
    st.tuples(st.just("pop"), st.integers(0, 1), st.integers(1, 4), st.sampled_from([1000, 3000]), st.booleans()),
    st.tuples(
        st.just("consume"),
        st.integers(0, 1),
        st.sampled_from(["ack", "ack", "ack", "fail", "extend", "dlq"]),
        st.sampled_from([0, 2000, 5000]),
    ),
    st.tuples(st.just("tick"), st.integers(0, 4000)),
    st.tuples(st.just("round")),
)


def _run(sim: _Sim, actions: list[tuple[object, ...]]) -> None:
    for a in actions:
        if a[0] == "pop":
            sim.pop(int(a[1]), int(a[2]), int(a[3]), bool(a[4]))  # type: ignore[call-overload]
        elif a[0] == "consume":
            sim.consume(int(a[1]), str(a[2]), int(a[3]))  # type: ignore[call-overload]
        elif a[0] == "tick":
            sim.now += int(a[1])  # type: ignore[call-overload]
        else:
            sim.round()


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 12), st.sets(st.integers(0, 11)), st.lists(_ACTIONS, max_size=60))
def test_every_orderly_batch_is_the_next_of_what_is_left_whatever_the_consumers_do(
    n: int, dropped: set[int], actions: list[tuple[object, ...]]
) -> None:
    sim = _Sim(n, frozenset(dropped))
    _run(sim, actions)
    sim.drain()


def test_the_simulation_catches_a_queue_that_is_not_locked() -> None:
    """The same two consumers without ``order``: the second is handed the next message while the first still
    holds the one before it, which the FIFO check refuses (so the check above can fail)."""
    plain = _Sim(3, frozenset(), order=False)
    plain.pop(0, 1, 1000, lose=False)
    try:
        plain.pop(1, 1, 1000, lose=False)
    except AssertionError as e:
        assert "is not the next" in str(e)
    else:
        raise AssertionError("a POP without order handed out message 1 while 0 was out, and the check let it pass")
    fifo = _Sim(3, frozenset())
    fifo.pop(0, 1, 1000, lose=False)
    fifo.pop(1, 1, 1000, lose=False)
    assert fifo.batches == [[0]], "with order the second POP gets nothing while message 0 is out"
