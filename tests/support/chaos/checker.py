"""Judges a chaos workload's history (``history.py``): what acknowledged sends were lost, delivered twice, written by
two masters at once or delivered out of order, what was delivered without being sent, and how long each fault on a
master left its set unwritable. Pure: it reads events, nothing else."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise

from tests.support.chaos.history import (
    Delivered,
    Event,
    Fault,
    History,
    SendAttempt,
    SendFailed,
    SendOk,
    Stored,
)

DEFINITE_FAILURE_CODES: frozenset[int] = frozenset(
    {
        2,  # SYSTEM_BUSY: refused before the write (flow control, too many timers or open transactions)
        13,  # MESSAGE_ILLEGAL: refused on its headers or size
        14,  # SERVICE_NOT_AVAILABLE: a slave, a master behind its slave, a store that cannot write
        16,  # NO_PERMISSION: the broker or topic is not writable
        17,  # TOPIC_NOT_EXIST
    }
)
"""Response codes after which the message is certainly not stored. Any other failure (no answer, SYSTEM_ERROR,
FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE...) leaves the send indeterminate: the master may hold it."""

FINAL_READ = "(final read)"
"""The name ``Verdict.lost`` files keys under that the final read (``FinalRead``) did not find."""

Position = tuple[str, int, int]
"""(broker_name, queue_id, queue_offset)."""


@dataclass(frozen=True)
class Lost:
    """An acknowledged key missing for ``group`` (never delivered to it and not in the final read), with the fault
    its acknowledgement relates to. ``tolerated``: without synchronous replication, a fault explains it."""

    key: str
    group: str
    ack: SendOk
    fault: Fault | None
    tolerated: bool
    explanation: str


@dataclass(frozen=True)
class SplitBrain:
    """Two masters at once. ``kind``: "epoch" (two addresses acknowledged in one (broker_name, epoch)), "slot" (two
    surviving keys acknowledged at one queue position), "diverged" (the final read found two keys at one position)."""

    kind: str
    broker_name: str
    detail: str
    acks: tuple[SendOk, ...] = ()


@dataclass(frozen=True)
class OrderViolation:
    """In ``group``, ``first`` was delivered before ``second`` though ``producer`` had it acknowledged after it on
    the same queue."""

    group: str
    producer: str
    broker_name: str
    queue_id: int
    first: str
    first_offset: int
    second: str
    second_offset: int

    def describe(self) -> str:
        """One line for reports."""
        return (
            f"{self.group}: {self.producer} on {self.broker_name}/{self.queue_id}: {self.first} (offset "
            f"{self.first_offset}) delivered before {self.second} (offset {self.second_offset})"
        )


@dataclass(frozen=True)
class Recovery:
    """How long a fault on a master left its set without acknowledgements: ``seconds`` from the fault's start to
    ``ack``, the set's first acknowledgement after it (None: there was none). Acknowledgements from the faulted
    master itself, in its epoch of before the fault, while the fault lasts, are in-flight answers, not a recovery:
    ``ignored`` counts them."""

    fault: Fault
    broker_name: str | None
    seconds: float | None
    ack: SendOk | None
    ignored: int
    note: str

    def describe(self) -> str:
        """One line for reports."""
        took = "no recovery" if self.seconds is None else f"{self.seconds:.3f} s"
        by = "" if self.ack is None else f" (by {self.ack.broker_addr}, epoch {_epoch(self.ack.epoch)})"
        note = f"; {self.note}" if self.note else ""
        return f"{self.fault.describe()} [{self.broker_name or '?'}]: {took}{by}{note}"


@dataclass
class Verdict:
    """What ``check`` found. ``failures`` says why the verdict is not ``ok``; the rest is counted and explained."""

    sync: bool
    keys: int = 0
    acked: int = 0
    failed: int = 0
    indeterminate: int = 0
    indeterminate_present: int = 0
    groups: tuple[str, ...] = ()
    delivered: dict[str, int] = field(default_factory=dict)  # group: distinct keys delivered
    lost: dict[str, list[Lost]] = field(default_factory=dict)  # group (or FINAL_READ): its missing keys
    duplicates: dict[str, dict[str, int]] = field(default_factory=dict)  # group: key: deliveries (more than one)
    stored_twice: dict[str, tuple[Position, ...]] = field(default_factory=dict)  # key: where the final read found it
    phantoms: list[str] = field(default_factory=list)  # every send definitely failed, yet delivered or stored
    split_brain: list[SplitBrain] = field(default_factory=list)
    rewrites: list[SplitBrain] = field(default_factory=list)  # slots a later epoch rewrote (tolerated without sync)
    order: list[OrderViolation] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)  # delivered or stored, never sent
    rto: list[Recovery] = field(default_factory=list)
    rto_p50: float | None = None
    rto_p90: float | None = None
    rto_max: float | None = None
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No failure."""
        return not self.failures

    @property
    def lost_keys(self) -> list[str]:
        """Every key missing for some group, sorted."""
        return sorted({lost.key for losses in self.lost.values() for lost in losses})

    @property
    def duplicate_deliveries(self) -> int:
        """Deliveries beyond each key's first, over every group."""
        return sum(n - 1 for per_key in self.duplicates.values() for n in per_key.values())

    def summary(self, limit: int = 20) -> str:
        """A report for a failing assertion's message: counts, then up to ``limit`` items of each kind."""
        lines = [
            f"verdict: {'OK' if self.ok else 'FAILED'} ({'sync' if self.sync else 'async'} replication)",
            f"sends: {self.keys} keys: {self.acked} acked, {self.failed} failed, {self.indeterminate} indeterminate "
            f"({self.indeterminate_present} of them present)",
        ]
        for group in self.groups:
            lines.append(f"group {group}: {self.delivered.get(group, 0)} keys delivered")
        if self.lost:
            for group, losses in sorted(self.lost.items()):
                tolerated = sum(lost.tolerated for lost in losses)
                lines.append(f"lost for {group}: {len(losses)} keys ({tolerated} explained by a fault)")
                lines += _listed([f"{lost.key}: {lost.explanation}" for lost in losses], limit)
        else:
            lines.append("lost: none")
        dup_keys = sum(len(per_key) for per_key in self.duplicates.values())
        lines.append(
            f"duplicates: {dup_keys} keys delivered more than once to a group ({self.duplicate_deliveries} extra "
            f"deliveries); {len(self.stored_twice)} keys stored more than once"
        )
        lines += _listed(
            [f"{key} stored at {', '.join(map(_pos, at))}" for key, at in self.stored_twice.items()], limit
        )
        for title, items in (
            ("split brain", [sb.detail for sb in self.split_brain]),
            ("slots rewritten by a later epoch", [sb.detail for sb in self.rewrites]),
            ("order violations", [v.describe() for v in self.order]),
            ("unexpected (never sent)", self.unexpected),
            ("phantoms (definitely failed, yet present)", self.phantoms),
        ):
            lines.append(f"{title}: {len(items) or 'none'}")
            lines += _listed(items, limit)
        if self.rto:
            lines.append(
                f"rto: {len(self.rto)} faults on a master: p50 {_secs(self.rto_p50)}, p90 {_secs(self.rto_p90)}, "
                f"max {_secs(self.rto_max)}"
            )
            lines += _listed([r.describe() for r in self.rto], limit)
        if self.failures:
            lines.append("failures:")
            lines += _listed(self.failures, limit)
        if self.notes:
            lines.append("notes:")
            lines += _listed(self.notes, limit)
        return "\n".join(lines)


def check(
    history: History | Iterable[Event],
    *,
    sync: bool,
    expected_groups: Iterable[str],
    orderly: bool | Collection[str] = False,
    definite_failure_codes: Collection[int] = DEFINITE_FAILURE_CODES,
    rto_kinds: Collection[str] | None = None,
    max_rto: float | None = None,
    loss_window: float | None = None,
) -> Verdict:
    """Judge a history.

    ``sync``: acknowledged sends were replicated synchronously, so losing one fails; otherwise a loss fails only
    when no fault explains it (none under way at its acknowledgement or after it, or, given ``loss_window``, none
    starting within that many seconds after it). ``expected_groups``: the consumer groups that must each get every
    acknowledged key (a key the final read found is not lost either); a ``FinalRead`` adds the final read as one
    more reader of the sets it covers. ``orderly``: True, or the topics (``SendAttempt.topic``) whose per-queue
    order each group must keep. ``rto_kinds``: the fault kinds timed for recovery (None: any fault whose target is
    a master's broker name or address); ``max_rto``: a longer recovery, or none, fails."""
    events = sorted(history, key=_sort_key)
    groups = tuple(sorted(set(expected_groups)))
    verdict = Verdict(sync=sync, groups=groups)
    definite = frozenset(definite_failure_codes)

    attempts: dict[str, list[SendAttempt]] = defaultdict(list)
    oks: dict[str, list[SendOk]] = defaultdict(list)
    fails: dict[str, list[SendFailed]] = defaultdict(list)
    deliveries: dict[str, dict[str, list[Delivered]]] = defaultdict(lambda: defaultdict(list))  # group: key: ...
    stored: dict[str, set[Position]] = defaultdict(set)
    stored_at: dict[Position, set[str]] = defaultdict(set)
    faults: list[Fault] = []
    acks: list[SendOk] = []
    read: set[str] | None = None  # broker names the final read covers; None: no final read
    read_all = False
    for event in events:
        if isinstance(event, SendAttempt):
            attempts[event.key].append(event)
        elif isinstance(event, SendOk):
            oks[event.key].append(event)
            acks.append(event)
        elif isinstance(event, SendFailed):
            fails[event.key].append(event)
        elif isinstance(event, Delivered):
            deliveries[event.group][event.key].append(event)
        elif isinstance(event, Stored):
            position = (event.broker_name, event.queue_id, event.queue_offset)
            stored[event.key].add(position)
            stored_at[position].add(event.key)
        elif isinstance(event, Fault):
            faults.append(event)
        else:  # FinalRead
            read = (read or set()) | set(event.broker_names)
            read_all = read_all or not event.broker_names

    delivered_any = {key for per_key in deliveries.values() for key in per_key}
    present = delivered_any | set(stored)
    sent = set(attempts) | set(oks) | set(fails)
    verdict.keys = len(sent)
    for key in sorted(sent - set(attempts)):
        verdict.notes.append(f"{key}: an outcome was recorded without an attempt")
    for key in sorted(sent):
        if oks[key]:
            verdict.acked += 1
        elif len(fails[key]) >= len(attempts[key]) and all(f.code in definite for f in fails[key]):
            verdict.failed += 1
            if key in present:
                verdict.phantoms.append(key)
        else:
            verdict.indeterminate += 1
            verdict.indeterminate_present += key in present
    if verdict.phantoms:
        verdict.failures.append(
            f"{len(verdict.phantoms)} keys whose every send definitely failed were delivered or stored"
        )

    verdict.unexpected = sorted(present - sent)
    if verdict.unexpected:
        verdict.failures.append(f"{len(verdict.unexpected)} keys delivered or stored were never sent")

    # Loss: each expected group, and the final read for the sets it covers.
    readers: list[tuple[str, set[str]]] = [(g, set(deliveries[g])) for g in groups]
    if read is not None:
        readers.append((FINAL_READ, set()))
    elif not groups:
        verdict.notes.append("no expected group and no final read: nothing judges loss")
    acked_keys = sorted(k for k in sent if oks[k])
    for group, got in readers:
        losses = []
        for key in acked_keys:
            if key in got or key in stored:
                continue
            if group == FINAL_READ and not (read_all or all(ok.broker_name in (read or ()) for ok in oks[key])):
                continue
            losses.append(_lost(key, group, oks[key][-1], faults, acks, sync=sync, loss_window=loss_window))
        if losses:
            verdict.lost[group] = losses
    for group, losses in sorted(verdict.lost.items()):
        failing = [lost for lost in losses if not lost.tolerated]
        if failing:
            why = "" if sync else " that no fault explains"
            verdict.failures.append(f"{len(failing)} acknowledged keys lost{why} for {group}")

    for group, per_key in sorted(deliveries.items()):
        verdict.delivered[group] = len(per_key)
        dups = {key: len(got) for key, got in sorted(per_key.items()) if len(got) > 1}
        if dups:
            verdict.duplicates[group] = dups
    verdict.stored_twice = {key: tuple(sorted(at)) for key, at in sorted(stored.items()) if len(at) > 1}

    _split_brain(verdict, acks, present, stored_at)
    if orderly:
        _order(verdict, attempts, oks, deliveries, orderly)
    _recoveries(verdict, faults, acks, rto_kinds, max_rto)
    return verdict


def _sort_key(value: Event) -> tuple[float, str, str]:
    """A total order on events independent of the order they were recorded in: time first."""
    return (value.t, type(value).__name__, repr(value))


def _epoch(epoch: int | None) -> str:
    return "?" if epoch is None else str(epoch)


def _pos(position: Position) -> str:
    return f"{position[0]}/{position[1]}@{position[2]}"


def _secs(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f} s"


def _listed(items: Sequence[str], limit: int) -> list[str]:
    shown = [f"  {item}" for item in items[:limit]]
    if len(items) > limit:
        shown.append(f"  ... and {len(items) - limit} more")
    return shown


def _targets(fault: Fault, ack: SendOk) -> bool:
    return fault.target in (ack.broker_name, ack.broker_addr)


def _lost(
    key: str, group: str, ack: SendOk, faults: list[Fault], acks: list[SendOk], *, sync: bool, loss_window: float | None
) -> Lost:
    """A lost key, related to the fault under way at its acknowledgement or the first one after it (one aimed at
    the acknowledging broker if any)."""
    candidates = [f for f in faults if f.covers(ack.t) or f.t_start > ack.t]
    aimed = [f for f in candidates if _targets(f, ack)]
    pool = aimed or candidates
    during = [f for f in pool if f.covers(ack.t)]
    fault = max(during, key=lambda f: f.t_start) if during else min(pool, key=lambda f: f.t_start, default=None)
    what = (
        f"acked by {ack.broker_addr} ({ack.broker_name}, epoch {_epoch(ack.epoch)}, queue {ack.queue_id} offset "
        f"{ack.queue_offset}) at t={ack.t:.3f}"
    )
    if fault is None:
        return Lost(key, group, ack, None, False, f"{what}; no fault at or after it explains the loss")
    gap = fault.t_start - ack.t
    related = f"during {fault.describe()}" if gap <= 0 else f"{gap:.3f} s before {fault.describe()}"
    if not aimed:
        related += " (a fault on another target)"
    since = max(ack.t, fault.t_start)
    successor = next(
        (
            a
            for a in acks
            if a.t > since
            and a.broker_name == ack.broker_name
            and (a.broker_addr, a.epoch) != (ack.broker_addr, ack.epoch)
        ),
        None,
    )
    after = (
        ""
        if successor is None
        else f"; {ack.broker_name} next acked by {successor.broker_addr} in epoch {_epoch(successor.epoch)} at "
        f"t={successor.t:.3f}"
    )
    within = loss_window is None or gap <= loss_window
    if not within:
        after += f"; more than the loss window of {loss_window} s before it"
    return Lost(key, group, ack, fault, not sync and within, f"{what}, {related}{after}")


def _split_brain(
    verdict: Verdict,
    acks: list[SendOk],
    present: set[str],
    stored_at: dict[Position, set[str]],
) -> None:
    by_epoch: dict[tuple[str, int], list[SendOk]] = defaultdict(list)
    by_slot: dict[Position, list[SendOk]] = defaultdict(list)
    for ack in acks:
        if ack.epoch is not None:
            by_epoch[(ack.broker_name, ack.epoch)].append(ack)
        by_slot[(ack.broker_name, ack.queue_id, ack.queue_offset)].append(ack)
    for (name, epoch), same in sorted(by_epoch.items()):
        addrs = sorted({a.broker_addr for a in same})
        if len(addrs) > 1:
            firsts = tuple(next(a for a in same if a.broker_addr == addr) for addr in addrs)
            detail = f"{name} epoch {epoch} acknowledged by {len(addrs)} addresses: " + ", ".join(
                f"{a.broker_addr} (first at t={a.t:.3f})" for a in firsts
            )
            verdict.split_brain.append(SplitBrain("epoch", name, detail, firsts))
    for position, same in sorted(by_slot.items()):
        surviving = sorted({a.key for a in same} & present)
        if len(surviving) < 2:
            continue
        kept = tuple(a for a in same if a.key in surviving)
        epochs = [{a.epoch for a in kept if a.key == key} for key in surviving]
        known = all(None not in e for e in epochs)
        disjoint = known and sum(len(e) for e in epochs) == len(set().union(*epochs))
        detail = f"{_pos(position)} acknowledged for {len(surviving)} keys that all survive: " + ", ".join(
            f"{a.key} by {a.broker_addr} epoch {_epoch(a.epoch)} at t={a.t:.3f}" for a in kept
        )
        conflict = SplitBrain("slot", position[0], detail, kept)
        if not verdict.sync and disjoint:
            verdict.rewrites.append(conflict)
        else:
            verdict.split_brain.append(conflict)
    for position, keys in sorted(stored_at.items()):
        if len(keys) > 1:
            detail = f"the final read found {len(keys)} keys at {_pos(position)}: {', '.join(sorted(keys))}"
            verdict.split_brain.append(SplitBrain("diverged", position[0], detail))
    for sb in verdict.split_brain:
        verdict.failures.append(f"split brain: {sb.detail}")


def _order(
    verdict: Verdict,
    attempts: dict[str, list[SendAttempt]],
    oks: dict[str, list[SendOk]],
    deliveries: dict[str, dict[str, list[Delivered]]],
    orderly: bool | Collection[str],
) -> None:
    """Per producer and queue, the keys in the order of their first acknowledgement's offset; each group's first
    deliveries of them must come in that order."""
    sequences: dict[tuple[str, str, int], list[SendOk]] = defaultdict(list)
    for key, acked in oks.items():
        tried = attempts.get(key)
        if not acked or not tried:
            continue
        if not isinstance(orderly, bool) and tried[0].topic not in orderly:
            continue
        first = acked[0]
        sequences[(tried[0].producer, first.broker_name, first.queue_id)].append(first)
    for (producer, name, queue_id), sequence in sorted(sequences.items()):
        sequence.sort(key=lambda a: (a.queue_offset, a.t, a.key))
        rank = {a.key: (i, a.queue_offset) for i, a in enumerate(sequence)}
        for group, per_key in sorted(deliveries.items()):
            got = sorted((per_key[k][0].t, k) for k in rank if k in per_key)
            for (_, a), (_, b) in pairwise(got):
                if rank[a][0] > rank[b][0]:
                    verdict.order.append(OrderViolation(group, producer, name, queue_id, a, rank[a][1], b, rank[b][1]))
    if verdict.order:
        verdict.failures.append(f"{len(verdict.order)} deliveries out of their queue's order")


def _recoveries(
    verdict: Verdict, faults: list[Fault], acks: list[SendOk], kinds: Collection[str] | None, max_rto: float | None
) -> None:
    """Time each fault on a master: its target is a broker name, or the address that last acknowledged for its set
    before the fault."""
    names = {a.broker_name for a in acks}
    for fault in faults:
        if kinds is not None and fault.kind not in kinds:
            continue
        last: dict[str, SendOk] = {}  # broker name: its last acknowledgement before the fault
        for a in acks:
            if a.t <= fault.t_start:
                last[a.broker_name] = a
        name: str | None
        if fault.target in names:
            name = fault.target
        else:
            mastered = sorted(n for n, a in last.items() if a.broker_addr == fault.target)
            name = mastered[0] if mastered else None
        if name is None:
            why = (
                "its target was not the acknowledging master of its set then"
                if any(a.broker_addr == fault.target for a in acks)
                else "its target names no broker name or address that acknowledged a send"
            )
            if kinds is None:
                verdict.notes.append(f"{fault.describe()} not timed: {why}")
            else:
                verdict.rto.append(Recovery(fault, None, None, None, 0, why))
            continue
        master = last.get(name)
        ignored = 0
        recovered: SendOk | None = None
        for a in acks:
            if a.t <= fault.t_start or a.broker_name != name:
                continue
            in_flight = master is not None and (a.broker_addr, a.epoch) == (master.broker_addr, master.epoch)
            if in_flight and (fault.t_end is None or a.t < fault.t_end):
                ignored += 1
                continue
            recovered = a
            break
        if recovered is None:
            note = f"no acknowledgement from {name} after it"
        elif master is None:
            note = f"{name} had acknowledged nothing before it"
        elif (recovered.broker_addr, recovered.epoch) == (master.broker_addr, master.epoch):
            note = "the same master, after the fault ended"
        else:
            note = f"failover from {master.broker_addr} epoch {_epoch(master.epoch)}"
        if ignored:
            note += f"; {ignored} acknowledgements of the faulted master during the fault ignored"
        seconds = None if recovered is None else recovered.t - fault.t_start
        verdict.rto.append(Recovery(fault, name, seconds, recovered, ignored, note))
    timed = sorted(r.seconds for r in verdict.rto if r.seconds is not None)
    verdict.rto_p50 = percentile(timed, 50)
    verdict.rto_p90 = percentile(timed, 90)
    verdict.rto_max = timed[-1] if timed else None
    if max_rto is not None:
        for r in verdict.rto:
            if r.seconds is None or r.seconds > max_rto:
                verdict.failures.append(f"recovery beyond {max_rto} s: {r.describe()}")


def percentile(ordered: Sequence[float], p: float) -> float | None:
    """The nearest-rank ``p``th percentile of sorted values (None for none)."""
    if not ordered:
        return None
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]
