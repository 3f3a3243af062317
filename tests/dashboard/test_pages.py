"""The topic and group lists come in pages (``limit``, ``after``, ``next``): a cluster with 100,000 topics is
listed a page at a time, every topic reachable, none twice (docs/dashboard.md §3)."""

from __future__ import annotations

from urllib.parse import quote

from tests.dashboard.conftest import Board, ok


def _walk(board: Board, path: str, key: str, limit: int) -> list[str]:
    names: list[str] = []
    after = ""
    while True:
        page = ok(board.api(f"{path}?system=true&limit={limit}" + (f"&after={quote(after)}" if after else "")))
        names += [r[key] for r in page[key + "s"]]
        assert len(page[key + "s"]) <= limit
        assert page["total"] >= len(names)
        if page["next"] is None:
            assert not page["truncated"]
            return names
        assert page["truncated"] and page["next"] == names[-1]
        after = page["next"]


def test_topics_and_groups_page_through_every_name_once(board: Board) -> None:
    whole = [r["topic"] for r in ok(board.api("topics?system=true"))["topics"]]
    assert len(whole) > 2
    paged = _walk(board, "topics", "topic", 2)
    assert paged == sorted(whole) and len(set(paged)) == len(paged)
    assert "%RETRY%billing" in paged, "a system name is a page boundary like any other"
    groups = _walk(board, "groups", "group", 1)
    assert groups == sorted(r["group"] for r in ok(board.api("groups?system=true"))["groups"])


def test_a_page_past_the_end_is_empty(board: Board) -> None:
    page = ok(board.api("topics?after=~"))
    assert (page["topics"], page["truncated"], page["next"]) == ([], False, None)
