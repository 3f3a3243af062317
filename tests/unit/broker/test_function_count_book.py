"""The broker's totals of its filter servers' function counts (``FunctionCountBook``, docs/metrics.md §4): counters
that only grow, across reports, re-registrations, restarts and several filter servers. Pure: report bodies in."""

from __future__ import annotations

from typing import Any

import pytest

from sievemq.broker.filter_servers import FunctionCountBook, FunctionCounts


def body(instance: str, *rows: tuple[str, int, int, int, int]) -> dict[str, Any]:
    """A 301 body: rows of (group, serial, matched, filtered out, errors), all on topic T."""
    return {"instance": instance, "functions": [
        {"consumerGroup": g, "topic": "T", "serial": s, "matched": m, "filteredOut": f, "errors": e}
        for g, s, m, f, e in rows]}  # fmt: skip


def test_reports_add_what_grew_and_restarts_and_re_registrations_add_on_top() -> None:
    book = FunctionCountBook()
    book.report(body("fs1", ("g", 1, 3, 7, 0)))
    book.report(body("fs1", ("g", 1, 3, 7, 0)))  # the same counts again: nothing added
    assert book.totals[("g", "T")] == FunctionCounts(3, 7, 0)
    book.report(body("fs1", ("g", 1, 5, 10, 1)))
    assert book.totals[("g", "T")] == FunctionCounts(5, 10, 1)
    book.report(body("fs1", ("g", 2, 1, 1, 0)))  # registered anew: its counts started again at 0
    assert book.totals[("g", "T")] == FunctionCounts(6, 11, 1)
    book.report(body("fs1-restarted", ("g", 1, 2, 0, 0)))  # a new process (same serial numbers, new instance)
    assert book.totals[("g", "T")] == FunctionCounts(8, 11, 1)
    book.report(body("fs2", ("g", 1, 4, 4, 0), ("h", 1, 1, 0, 0)))  # a second filter server of the same group
    assert book.totals[("g", "T")] == FunctionCounts(12, 15, 1)
    assert list(book.totals) == [("g", "T"), ("h", "T")], "in the order first reported"


def test_an_instance_forgotten_counts_anew_and_at_most_so_many_are_kept() -> None:
    book = FunctionCountBook(instances_kept=2)
    book.report(body("a", ("g", 1, 1, 0, 0)))
    book.report(body("b", ("g", 1, 1, 0, 0)))
    book.report(body("a", ("g", 1, 1, 0, 0)))  # a reported last: b is the oldest
    book.report(body("c", ("g", 1, 1, 0, 0)))  # b forgotten
    assert book.totals[("g", "T")].matched == 3
    book.report(body("a", ("g", 1, 2, 0, 0)))
    assert book.totals[("g", "T")].matched == 4, "a was kept: only what grew is added"
    book.report(body("b", ("g", 1, 1, 0, 0)))
    assert book.totals[("g", "T")].matched == 5, "b was forgotten: its counts are taken as new"


@pytest.mark.parametrize("bad", [[], {"functions": []}, {"instance": "x", "functions": {}},
                                 {"instance": "x", "functions": [{"consumerGroup": "g"}]},
                                 {"instance": "x", "functions": [{"consumerGroup": "g", "topic": "T", "serial": 1,
                                                                  "matched": "many", "filteredOut": 0,
                                                                  "errors": 0}]}])  # fmt: skip
def test_a_malformed_report_is_refused_whole(bad: Any) -> None:
    book = FunctionCountBook()
    with pytest.raises(ValueError):
        book.report(bad)
    assert book.totals == {}


def test_at_most_max_counted_pairs_are_added_up(monkeypatch: pytest.MonkeyPatch) -> None:
    from sievemq.broker import filter_servers

    monkeypatch.setattr(filter_servers, "MAX_COUNTED_PAIRS", 3)
    book = FunctionCountBook()
    book.report(body("fs1", *[(f"g{i}", 1, 1, 0, 0) for i in range(10)]))
    assert sorted(book.totals) == [("g0", "T"), ("g1", "T"), ("g2", "T")], "a report cannot grow the book without end"
    book.report(body("fs1", ("g1", 1, 4, 0, 0), ("g9", 1, 9, 9, 9)))
    assert book.totals[("g1", "T")] == FunctionCounts(4, 0, 0) and ("g9", "T") not in book.totals


def test_a_report_with_negative_counts_is_refused_and_changes_nothing() -> None:
    book = FunctionCountBook()
    book.report(body("fs1", ("g", 1, 5, 5, 0)))
    with pytest.raises(ValueError):
        book.report(body("fs2", ("g", 1, -100, 0, 0)))
    assert book.totals[("g", "T")] == FunctionCounts(5, 5, 0)
