"""Automatic failover's decisions, without etcd: bootstrap, elections, the SyncStateSet, truncation, fencing."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sievemq.ha.election import Progress, bootstrap, elect, sync_set_change, truncation_point
from sievemq.ha.fencing import LeaseClock
from sievemq.ha.set_state import ReplicaInfo, SetState, SetView


def info(bid: int, end: int = 0, epoch: int = 1) -> ReplicaInfo:
    return ReplicaInfo(bid, f"10.0.0.{bid}:10911", f"10.0.0.{bid}:10912", epoch, end)


def state(master: int = 1, members: tuple[int, ...] = (1, 2, 3), epoch: int = 1) -> SetState:
    history = tuple((e, 100 * (e - 1)) for e in range(1, epoch + 1))
    return SetState(master, f"10.0.0.{master}:10911", f"10.0.0.{master}:10912", epoch, frozenset(members), 3, history)


def view(s: SetState | None, *alive: ReplicaInfo) -> SetView:
    return SetView(s, 7, {a.broker_id: a for a in alive})


def test_the_first_broker_is_master_of_epoch_1_from_its_end() -> None:
    s = bootstrap(info(2, end=500))
    assert (s.master_id, s.master_epoch, s.sync_state_set, s.epochs) == (2, 1, frozenset({2}), ((1, 500),))


def test_state_round_trips_and_refuses_what_is_not_a_state() -> None:
    s = state(epoch=3)
    assert SetState.from_json(s.to_json()) == s
    assert ReplicaInfo.from_json(info(3, 9).to_json()) == info(3, 9)
    with pytest.raises(ValueError, match="syncStateSet"):
        SetState.from_json(b'{"masterBrokerId": 1, "syncStateSet": "1"}')
    with pytest.raises(ValueError, match="not in its SyncStateSet"):
        SetState(1, "", "", 1, frozenset({2}), 1, ((1, 0),))
    with pytest.raises(ValueError, match="out of order"):
        SetState(1, "", "", 2, frozenset({1}), 1, ((1, 50), (2, 10)))
    with pytest.raises(ValueError, match="not JSON"):
        ReplicaInfo.from_json(b"{")


def test_no_election_while_the_master_lives() -> None:
    v = view(state(), info(1), info(2), info(3))
    assert elect(v, info(2), masterless_for=99, grace_s=2, unclean=False) is None


def test_the_best_in_sync_replica_takes_over_at_once_the_others_after_the_grace() -> None:
    v = view(state(), info(2, end=300), info(3, end=200))
    new = elect(v, info(2, end=300), masterless_for=0, grace_s=2, unclean=False)
    assert new is not None
    assert (new.master_id, new.master_epoch, new.sync_state_set) == (2, 2, frozenset({2}))
    assert new.epochs == ((1, 0), (2, 300)) and new.sync_state_set_epoch == 4
    assert elect(v, info(3, end=200), masterless_for=1, grace_s=2, unclean=False) is None
    late = elect(v, info(3, end=200), masterless_for=2, grace_s=2, unclean=False)
    assert late is not None and late.master_id == 3


def test_only_an_in_sync_replica_unless_unclean() -> None:
    v = view(state(members=(1, 2)), info(2), info(3, end=900))
    assert elect(v, info(3, end=900), masterless_for=99, grace_s=2, unclean=False) is None
    alone = view(state(members=(1, 2)), info(3, end=900))
    assert elect(alone, info(3, end=900), masterless_for=0, grace_s=2, unclean=False) is None
    unclean = elect(alone, info(3, end=900), masterless_for=0, grace_s=2, unclean=True)
    assert unclean is not None and unclean.master_id == 3


def test_no_state_no_election() -> None:
    assert elect(view(None, info(2)), info(2), masterless_for=9, grace_s=0, unclean=True) is None


NOW = 1000.0


def p(acked: int, caught: float, connected: bool = True, changed: float = 0.0) -> Progress:
    return Progress(acked, caught, connected, changed)


def test_a_replica_behind_too_long_or_gone_leaves_and_one_caught_up_joins() -> None:
    s = state(members=(1, 2, 3))
    alive = {b: info(b) for b in (1, 2, 3, 4)}
    keep = {2: p(10, NOW - 1), 3: p(10, NOW - 1), 4: p(5, NOW - 100)}
    assert sync_set_change(s, alive, keep, NOW, max_not_catchup_s=6, link_grace_s=1) is None
    slow = {**keep, 3: p(10, NOW - 7)}
    assert sync_set_change(s, alive, slow, NOW, max_not_catchup_s=6, link_grace_s=1) == frozenset({1, 2})
    closed = {**keep, 2: p(10, NOW - 0.1, connected=False, changed=NOW - 1.5)}
    assert sync_set_change(s, alive, closed, NOW, max_not_catchup_s=6, link_grace_s=1) == frozenset({1, 3})
    just_closed = {**keep, 2: p(10, NOW - 0.1, connected=False, changed=NOW - 0.5)}
    assert sync_set_change(s, alive, just_closed, NOW, max_not_catchup_s=6, link_grace_s=1) is None
    joined = {**keep, 4: p(10, NOW - 0.2)}
    assert sync_set_change(s, alive, joined, NOW, max_not_catchup_s=6, link_grace_s=1) == frozenset({1, 2, 3, 4})
    not_live = {b: a for b, a in alive.items() if b != 4}
    assert sync_set_change(s, not_live, joined, NOW, max_not_catchup_s=6, link_grace_s=1) is None
    unknown = {2: p(10, NOW - 1)}  # 3 never connected to this master
    assert sync_set_change(s, alive, unknown, NOW, max_not_catchup_s=6, link_grace_s=1) == frozenset({1, 2})


def test_the_master_stays_in_its_set() -> None:
    s = state(master=2, members=(2,))
    assert sync_set_change(s, {2: info(2)}, {}, NOW, max_not_catchup_s=6, link_grace_s=1) is None


def test_an_old_master_cuts_what_the_new_one_never_had() -> None:
    new_master = ((1, 0), (2, 100), (3, 250))
    assert truncation_point(((1, 0), (2, 100)), 300, new_master) == 250  # master of 2 wrote 250..300 alone
    assert truncation_point(((1, 0), (2, 100)), 200, new_master) == 200  # it had less: keeps all of it
    assert truncation_point(((1, 0), (2, 100), (3, 250)), 400, new_master) == 400  # a replica of epoch 3
    assert truncation_point(((1, 0),), 150, new_master) == 100  # an old master of epoch 1, beyond epoch 2's start
    assert truncation_point((), 500, ((1, 500),)) == 500  # a store from before failover: its bytes are epoch 0
    assert truncation_point(((1, 0), (2, 90)), 300, new_master) == 90  # a diverging epoch 2: back to epoch 1's end


histories = st.lists(st.integers(0, 50), min_size=1, max_size=6).map(
    lambda gaps: tuple((i + 1, sum(gaps[: i + 1])) for i in range(len(gaps)))
)


@given(histories, st.integers(0, 400), st.integers(0, 5), st.integers(0, 100))
def test_truncation_keeps_a_shared_prefix_and_never_more_than_the_log(
    theirs: tuple[tuple[int, int], ...], my_end: int, shared: int, extra: int
) -> None:
    mine = theirs[:shared]
    if mine:  # my own later epoch, which the set never saw
        mine = (*mine, (theirs[-1][0] + 1 + extra, max(mine[-1][1], my_end // 2)))
    point = truncation_point(mine, my_end, theirs)
    assert 0 <= point <= my_end
    if shared and shared < len(theirs):
        assert point <= theirs[shared][1]  # nothing past where the set's next epoch began


def test_a_master_acknowledges_only_before_its_lease_could_expire() -> None:
    c = LeaseClock(5.0, 1.0)
    assert not c.valid(0.0) and c.expired(0.0)
    c.renewed(10.0)
    assert c.valid(13.9) and not c.valid(14.0) and not c.expired(14.9) and c.expired(15.0)
    c.renewed(9.0)  # an older answer arriving late moves nothing back
    assert c.valid(13.9) and c.left(13.0) == pytest.approx(1.0)
    c.lost()
    assert not c.valid(10.0) and c.expired(10.0) and c.left(10.0) == 0.0
    with pytest.raises(ValueError):
        LeaseClock(2.0, 2.0)
