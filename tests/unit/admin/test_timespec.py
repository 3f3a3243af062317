"""How operators write times on the command line (admin/timespec.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sievemq.admin.timespec import EARLIEST, LATEST, format_ms, parse_reset_point, parse_time


def test_words_and_numbers() -> None:
    assert parse_reset_point("earliest").timestamp == EARLIEST
    assert parse_reset_point(" LATEST ").timestamp == LATEST
    assert parse_reset_point("1700000000123").timestamp == 1700000000123
    assert parse_reset_point("0").timestamp == EARLIEST


@given(st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(9000, 1, 1)),
       st.integers(-14 * 60, 14 * 60))  # fmt: skip
def test_iso_times_with_a_zone_are_that_instant(when: datetime, offset_minutes: int) -> None:
    zone = timezone(timedelta(minutes=offset_minutes))
    aware = when.replace(tzinfo=zone, microsecond=when.microsecond // 1000 * 1000)
    expected = int((aware - datetime(1970, 1, 1, tzinfo=UTC)) / timedelta(milliseconds=1))
    assert parse_time(aware.isoformat()) == expected
    assert parse_time(aware.isoformat(sep=" ")) == expected
    assert parse_time(str(expected)) == expected


def test_times_without_a_zone_are_local() -> None:
    local = datetime(2024, 5, 1, 12, 30).astimezone()
    assert parse_time("2024-05-01T12:30:00") == int(local.timestamp() * 1000)
    assert parse_time("2024-05-01 12:30") == int(local.timestamp() * 1000)
    assert parse_time("2024-05-01") == int(datetime(2024, 5, 1).astimezone().timestamp() * 1000)


@pytest.mark.parametrize("text", ["", "yesterday", "12:00", "2024-13-01", "99999999999999999999", "-5", "1e3"])
def test_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_reset_point(text)


def test_format() -> None:
    assert format_ms(0) == "-"
    assert format_ms(-1) == "-"
    shown = format_ms(1700000000123)
    assert shown.endswith(".123" + datetime.fromtimestamp(1700000000).astimezone().isoformat()[-6:]), shown
    assert parse_time(shown) == 1700000000123, "what is printed can be given back"
