"""Rates, daily marks and windows of the broker's counters as RocketMQ's runtime info and stats data show them
(docs/admin.md §10), with a clock the test moves."""

from __future__ import annotations

import datetime

from sievemq.broker.rates import DailyMarks, PerSecond, Windowed, human_bytes
from sievemq.broker.stats import BrokerStats, latency_ms, uptime_text
from sievemq.settings.properties import java_double, java_text
from sievemq.store.disk import used_percent_ratio


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_rates_over_10_60_600_seconds_empty_until_covered() -> None:
    clock = Clock(1_000_000.0)
    rates = PerSecond(1, clock)
    rates.tick([0])
    assert rates.tps_text(0) == "  "
    total = 0
    for _ in range(70):  # 2 messages a second for 70 s
        clock.now += 1
        rates.tick([total])
        total += 2
    rates.tick([total])
    assert rates.tps(0, 10) == 2.0 and rates.tps(0, 60) == 2.0 and rates.tps(0, 600) is None
    assert rates.tps_text(0) == "2.0 2.0 "
    clock.now += 300  # quiet: the seconds in between are filled in
    rates.tick([total])
    assert rates.tps(0, 10) == 0.0 and rates.tps(0, 600) is None


def test_daily_marks_roll_at_local_midnight() -> None:
    day = datetime.datetime(2026, 3, 1, 23, 59, 0).timestamp()
    clock = Clock(day)
    marks = DailyMarks(1, clock)
    marks.tick([5])
    assert (marks.today_morning, marks.yesterday_morning) == ((0,), (0,)), "0 before the first midnight, as RocketMQ"
    clock.now += 120
    marks.tick([7])
    assert (marks.today_morning, marks.yesterday_morning) == ((7,), (0,))
    clock.now += 86_400
    marks.tick([9])
    assert (marks.today_morning, marks.yesterday_morning) == ((9,), (7,))
    clock.now += 3 * 86_400
    marks.tick([9])
    assert (marks.today_morning, marks.yesterday_morning) == ((9,), (9,)), "quiet days: both the count then"


def test_windows_sum_the_last_minute_hour_and_day() -> None:
    clock = Clock(2_000_000.0)
    w = Windowed(clock)
    w.add("TOPIC_PUT", "T", 4, 400)
    w.add("TOPIC_PUT", "T", 2, 200)
    snap = w.snapshot("TOPIC_PUT", "T", 1)
    assert [snap[p]["sum"] for p in ("minute", "hour", "day")] == [6, 6, 6] and snap["minute"]["avgpt"] == 3.0
    assert w.snapshot("TOPIC_PUT", "T", 2)["day"]["sum"] == 600
    clock.now += 120
    w.roll(clock.now)
    w.add("TOPIC_PUT", "T", 1, 100)  # closes the first bucket
    snap = w.snapshot("TOPIC_PUT", "T", 1)
    assert [snap[p]["sum"] for p in ("minute", "hour", "day")] == [1, 7, 7]
    assert snap["hour"]["tps"] == 7 / 120, "per second of the time since the start, when shorter than the span"
    clock.now += 7200
    snap = w.snapshot("TOPIC_PUT", "T", 1)
    assert (snap["hour"]["sum"], snap["day"]["sum"]) == (0, 7) and not w.knows("TOPIC_PUT", "U")
    clock.now += 86_400 * 2
    w.roll(clock.now)
    for i in range(5000):  # a day later, keys counted under long ago are swept out
        w.add("GROUP_GET", f"T@g{i}", 1, 1)
    assert not w.knows("TOPIC_PUT", "T")


def test_broker_stats_runtime_table() -> None:
    clock = Clock(3_000_000.0)
    stats = BrokerStats(clock)
    clock.now += 3725
    stats.put("T", 2, 500)
    stats.get("T", 0, 0)
    stats.get("T", 2, 500, group="G")
    stats.send_latency.observe(0.003)
    table = stats.runtime_table()
    assert table["runtime"] == "[ 0 days, 1 hours, 2 minutes, 5 seconds ]"
    assert (table["msgPutTotalTodayNow"], table["msgGetTotalTodayNow"]) == ("2", "2")
    assert table["putMessageAverageSize"] == "250.0" and table["putLatency99"] == "5.00"
    assert table["bootTimestamp"] == "3000000000"
    assert stats.found_total == 1 and stats.stats_data("GROUP_GET_NUMS", "T@G") is not None
    assert stats.stats_data("TOPIC_PUT_SIZE", "T")["minute"]["sum"] == 500  # type: ignore[index]
    assert stats.stats_data("SNDBCK_PUT_NUMS", "T") is None
    assert uptime_text(90_061_000) == "[ 1 days, 1 hours, 1 minutes, 1 seconds ]"
    assert latency_ms(BrokerStats().send_latency, 0.99) == 0.0


def test_java_texts() -> None:
    assert [java_double(x) for x in (0.0, 12.5, 3.0, 1e-4, 0.00012345, 12345678.0)] == [
        "0.0", "12.5", "3.0", "1.0E-4", "1.2345E-4", "1.2345678E7"]  # fmt: skip
    assert [java_text(x) for x in (True, 72.0, 0.5, 3, None, "x")] == ["true", "72", "0.5", "3", "", "x"]
    assert [human_bytes(n) for n in (512, 1536, 270553174016)] == ["512 B", "1.5 KiB", "252.0 GiB"]


def test_disk_ratio_as_rocketmq_and_df_count_it() -> None:
    """Blocks reserved for root are neither used nor usable: 34.5 GiB used and 56.6 GiB usable of 252 GiB is
    38 % (RocketMQ said 0.38 where sievemq said 0.1370)."""
    gib = 1 << 30
    assert used_percent_ratio(int(34.5 * gib), int(56.6 * gib)) == "0.38"
    assert used_percent_ratio(1, 99) == "0.01" and used_percent_ratio(0, 10) == "0.0"
    assert used_percent_ratio(0, 0) == "-1.0"
