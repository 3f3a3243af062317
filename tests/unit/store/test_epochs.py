"""Epoch history (``store/epochs.py``): validation, append/cut/end_of, the JSON file, and the consistent point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sievemq.store.epochs import EpochEntry, EpochHistory, consistent_point, load_epochs, save_epochs


def h(*pairs: tuple[int, int]) -> EpochHistory:
    return EpochHistory(pairs)


# ------------------------------------------------------------------------------------------------ validation
@pytest.mark.parametrize(
    ("pairs", "says"),
    [
        ([(2, 0), (2, 10)], "epochs must increase"),
        ([(3, 0), (2, 10)], "epochs must increase"),
        ([(1, 100), (2, 50)], "starts must not decrease"),
        ([(-1, 0)], "epoch must be an integer >= 0"),
        ([(1, -5)], "start must be an integer >= 0"),
        ([(True, 0)], "epoch must be an integer"),
        ([(1, 2.5)], "start must be an integer"),
    ],
)
def test_out_of_order_or_invalid_entries_are_refused(pairs: list[tuple[int, int]], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        EpochHistory(pairs)


def test_equal_starts_are_an_epoch_without_bytes() -> None:
    hist = h((1, 0), (2, 500), (3, 500))
    assert hist.end_of(2, 900) == 500, "epoch 2 wrote nothing: it ends where it starts"
    assert hist.end_of(3, 900) == 900
    assert hist.last == EpochEntry(3, 500)
    assert [e.epoch for e in hist] == [1, 2, 3] and len(hist) == 3


def test_append_checks_order_and_is_idempotent() -> None:
    hist = EpochHistory()
    assert hist.last is None
    assert hist.append(1, 0) is True
    assert hist.append(2, 300) is True
    assert hist.append(2, 300) is False, "the same entry again changes nothing"
    assert hist == h((1, 0), (2, 300))
    with pytest.raises(ValueError, match="already recorded with start 300, not 400"):
        hist.append(2, 400)
    with pytest.raises(ValueError, match="epochs must increase"):
        hist.append(1, 900)
    with pytest.raises(ValueError, match="starts must not decrease"):
        hist.append(3, 299)
    assert hist == h((1, 0), (2, 300)), "a refused append changes nothing"
    assert hist.append(3, 300) is True


def test_end_of() -> None:
    hist = h((1, 0), (4, 1000), (6, 1500))
    assert hist.end_of(1, 2000) == 1000
    assert hist.end_of(4, 2000) == 1500
    assert hist.end_of(6, 2000) == 2000
    assert hist.end_of(4, 1200) == 1200, "never past the log's end"
    with pytest.raises(KeyError):
        hist.end_of(5, 2000)
    assert hist.get(4) == EpochEntry(4, 1000) and hist.get(5) is None


def test_cut_drops_entries_starting_at_or_past_the_offset() -> None:
    hist = h((1, 0), (2, 500), (4, 1000), (5, 1000), (7, 1800))
    assert hist.cut(1000) == 3, "epochs 4 and 5 started at 1000: they own no byte any more"
    assert hist == h((1, 0), (2, 500))
    assert hist.cut(1000) == 0
    assert hist.cut(501) == 0
    assert hist.cut(0) == 2 and len(hist) == 0


# ------------------------------------------------------------------------------------------------ JSON and file
def test_json_round_trip_and_shape() -> None:
    hist = h((1, 0), (3, 4096), (4, 4096))
    doc = hist.to_json()
    assert doc == {"epochs": [[1, 0], [3, 4096], [4, 4096]]}
    assert EpochHistory.from_json(json.loads(json.dumps(doc))) == hist
    assert EpochHistory.from_json({"epochs": []}) == EpochHistory()


@pytest.mark.parametrize(
    "doc",
    [[], {}, {"epochs": {}}, {"epochs": [[1]]}, {"epochs": [{"epoch": 1, "start": 0}]}, {"epochs": [[2, 0], [1, 5]]},
     {"epochs": [["1", 0]]}, None],
)  # fmt: skip
def test_from_json_refuses_what_is_not_a_history(doc: object) -> None:
    with pytest.raises(ValueError):
        EpochHistory.from_json(doc)


def test_save_and_load(tmp_path: Path) -> None:
    path = tmp_path / "store" / "epochs.json"
    assert load_epochs(path) == EpochHistory(), "no file: an empty history"
    save_epochs(path, h((1, 0)))
    save_epochs(path, h((1, 0), (2, 700)))
    assert load_epochs(path) == h((1, 0), (2, 700))
    assert json.loads(path.read_text()) == {"epochs": [[1, 0], [2, 700]]}
    assert not path.with_name("epochs.json.tmp").exists()
    path.write_bytes(b'{"epochs": [[1, 0], [2')  # damaged (not by our writes, which replace atomically)
    assert load_epochs(path) == h((1, 0)), "falls back to the previous version"
    path.write_text('{"epochs": [[2, 0], [1, 0]]}')
    with pytest.raises(ValueError, match="epochs must increase"):
        load_epochs(path)


# ------------------------------------------------------------------------------------------------ consistent point
def test_old_master_coming_back() -> None:
    """The old master (epoch 2) wrote up to 1200 unreplicated; the new master's epoch 3 started at 1000."""
    old = h((1, 0), (2, 500))
    new = h((1, 0), (2, 500), (3, 1000))
    assert consistent_point(old, 1200, new, None) == 1000
    assert consistent_point(old, 1200, new, 1600) == 1000
    assert consistent_point(old, 900, new, None) == 900, "a replica behind keeps everything"
    assert consistent_point(new, 1600, old, 1200) == 1000, "symmetric"


def test_highest_common_epoch_with_the_same_start_decides() -> None:
    mine = h((1, 0), (2, 500), (4, 800))
    theirs = h((1, 0), (2, 600), (3, 700))  # epoch 2 at another start: not the same bytes
    assert consistent_point(mine, 900, theirs, None) == 500
    assert consistent_point(h((1, 0), (5, 100)), 300, h((1, 0), (5, 100)), None) == 300, "their open epoch"
    assert consistent_point(h((1, 0), (5, 100)), 300, h((1, 0), (5, 100)), 250) == 250


def test_no_common_epoch_means_nothing_is_kept() -> None:
    assert consistent_point(h((2, 0)), 500, h((1, 0), (3, 100)), None) == 0
    assert consistent_point(EpochHistory(), 0, h((1, 0)), 100) == 0
    assert consistent_point(EpochHistory(), 700, h((1, 0)), None) == 0, "a log with no history: all of it goes"
    assert consistent_point(h((1, 0)), 700, EpochHistory(), 0) == 0
    with pytest.raises(ValueError, match="my_end"):
        consistent_point(EpochHistory(), -1, EpochHistory(), None)


def test_an_epoch_without_bytes_on_one_side() -> None:
    """I was elected (epoch 4) at 1000 but wrote nothing; epoch 3's master, elected at 1000 too, wrote on."""
    mine = h((1, 0), (2, 500), (4, 1000))
    theirs = h((1, 0), (2, 500), (3, 1000))
    assert consistent_point(mine, 1000, theirs, None) == 1000
    mine.cut(1000)
    assert mine.append(3, 1000), "after the cut the replica takes the master's epochs"


# A log as the epochs its bytes were written in: [(epoch, bytes)], epochs increasing, bytes >= 0.
def _history(segments: list[tuple[int, int]]) -> tuple[EpochHistory, int]:
    hist, at = EpochHistory(), 0
    for epoch, n in segments:
        hist.append(epoch, at)
        at += n
    return hist, at


@st.composite
def diverging_logs(draw: st.DrawFn) -> tuple[list[tuple[int, int]], list[tuple[int, int]], int]:
    """Two logs that share a prefix of epochs and then go apart: after the prefix, each side's epochs are its own
    (one master, one byte sequence per epoch), and at most one side wrote more in the prefix's last epoch. Returns
    both and the length of the shared bytes."""
    prefix_epochs = sorted(draw(st.sets(st.integers(1, 30), max_size=5)))
    prefix = [(e, draw(st.integers(0, 50))) for e in prefix_epochs]
    top = prefix_epochs[-1] if prefix_epochs else 0
    later = draw(st.lists(st.integers(top + 1, 80), unique=True, max_size=8))
    side = draw(st.lists(st.booleans(), min_size=len(later), max_size=len(later)))
    mine = prefix + [(e, draw(st.integers(0, 50))) for e, s in zip(later, side, strict=True) if s]
    theirs = prefix + [(e, draw(st.integers(0, 50))) for e, s in zip(later, side, strict=True) if not s]
    mine.sort()
    theirs.sort()
    shared = sum(n for _e, n in prefix)
    if prefix and draw(st.booleans()):  # one side (the prefix's last master) wrote more in that epoch
        longer = mine if draw(st.booleans()) else theirs
        e, n = longer[len(prefix) - 1]
        longer[len(prefix) - 1] = (e, n + draw(st.integers(1, 50)))
    return mine, theirs, shared


@given(diverging_logs())
def test_point_is_the_shared_length(logs: tuple[list[tuple[int, int]], list[tuple[int, int]], int]) -> None:
    mine_segs, theirs_segs, shared = logs
    mine, my_end = _history(mine_segs)
    theirs, their_end = _history(theirs_segs)
    point = consistent_point(mine, my_end, theirs, their_end)
    assert point == shared
    assert point <= my_end and point <= their_end
    assert consistent_point(theirs, their_end, mine, my_end) == point, "symmetric"
    open_point = consistent_point(mine, my_end, theirs, None)
    assert point <= open_point <= my_end, "their open epoch can only let me keep more of mine"


@given(
    st.lists(st.tuples(st.integers(0, 6), st.integers(0, 40)), max_size=10),
    st.lists(st.tuples(st.integers(0, 6), st.integers(0, 40)), max_size=10),
    st.integers(0, 300),
    st.integers(0, 300),
)
def test_point_never_exceeds_either_end(
    a: list[tuple[int, int]], b: list[tuple[int, int]], end_a: int, end_b: int
) -> None:
    """Any two valid histories (built from increments), any ends: the point stays within both logs."""

    def build(steps: list[tuple[int, int]]) -> EpochHistory:
        hist, epoch, start = EpochHistory(), 0, 0
        for de, ds in steps:
            epoch, start = epoch + de + 1, start + ds
            hist.append(epoch, start)
        return hist

    ha, hb = build(a), build(b)
    p = consistent_point(ha, end_a, hb, end_b)
    assert 0 <= p <= min(end_a, end_b)
    assert consistent_point(hb, end_b, ha, end_a) == p
    assert consistent_point(ha, end_a, hb, None) <= end_a


@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 100)), max_size=10), st.integers(0, 600))
def test_cut_keeps_a_prefix_of_entries_starting_below(steps: list[tuple[int, int]], offset: int) -> None:
    hist, epoch, start = EpochHistory(), 0, 0
    for de, ds in steps:
        epoch, start = epoch + de + 1, start + ds
        hist.append(epoch, start)
    before = hist.entries
    dropped = hist.cut(offset)
    assert hist.entries == tuple(e for e in before if e.start < offset)
    assert dropped == len(before) - len(hist)
    assert EpochHistory.from_json(hist.to_json()) == hist
