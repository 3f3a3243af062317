"""The dashboard in a real browser (Debian's chromium, headless, through chromedriver and selenium) against a real
``sievemq dev`` with the sample data: each page shows the expected content and is saved as a screenshot; the
search forms (by id, by key, by time range, explain, a group's filter counts) work by typing and clicks; the
topics' rates follow traffic sent while the page is open; a group whose members subscribe differently shows as
inconsistent; hostile message text shows literally and never runs. A missing browser fails.
"""

from __future__ import annotations

import asyncio
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By

from sievemq import Message, MessageExt, Producer, PushConsumer
from sievemq.admin.api import AdminClient
from tests.dashboard import sample
from tests.dashboard.conftest import Board
from tests.support import browser
from tests.support.browser import chrome, console_errors, open_view, png_size, screenshot, type_datetime, wait_text
from tests.support.quiet import quiet_period_blocking

ALL_ORDERS = sample.ORDERS + sample.LATE_ORDERS
NONE = "\u2013"
"""What the page shows for "none" (an en dash)."""
REFRESH = 2
"""Seconds between the page's refreshes in this module (5 by default): the rates test waits for a few."""
DEV_ENV = {"SIEVEMQ_DASHBOARD_REFRESH_SECONDS": str(REFRESH)}
"""The module's ``sievemq dev`` environment (tests/dashboard/conftest.py)."""


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[webdriver.Chrome]:
    d = chrome(tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield d
    finally:
        d.quit()


def shot(driver: webdriver.Chrome, tmp_path: Path, name: str) -> None:
    """Save the page as ``<name>.png`` and check it is a real PNG of the whole page (not cut off, not blank)."""
    path = screenshot(driver, tmp_path / f"{name}.png")
    width, height = png_size(path)
    assert width >= 1000 and height >= 400, (name, width, height)
    page = int(driver.execute_script("return Math.ceil(document.documentElement.scrollHeight)"))
    assert height >= min(page, browser.MAX_SHOT_HEIGHT), f"{name}.png is {height} px high, the page {page}: cut off"
    assert path.stat().st_size > 15_000, f"{name}.png is {path.stat().st_size} bytes: a blank page?"


def offset_id(board: Board, key: str) -> str:
    from sievemq.admin.api import AdminClient
    from sievemq.admin.messages import show

    async def find() -> str:
        async with AdminClient(board.namesrv) as admin:
            return (await show(admin, board.sample.order_ids[key])).messages[0].msg.offset_msg_id

    return str(board.loop.run(find()))


_ROWS = """
const table = document.querySelectorAll('#main table')[arguments[0]];
if (!table) return [];
return Array.from(table.querySelectorAll('tbody tr'),
                  tr => Array.from(tr.querySelectorAll('td'), td => td.innerText.trim()));
"""
"""The cells' texts of a table, read in one step: the page re-renders on its refresh timer, so elements found one
call earlier may be gone (stale) by the next."""


def cells(driver: webdriver.Chrome, first: str, table: int = 0) -> list[str]:
    """The cells' texts of the row of the ``table``-th table of the view whose first cell is ``first``."""
    for texts in driver.execute_script(_ROWS, table):
        if texts and texts[0] == first:
            return [str(t) for t in texts]
    raise AssertionError(f"no row {first!r} in table {table} of {driver.current_url}")


def rows(driver: webdriver.Chrome, table: int = 0) -> list[list[str]]:
    """The cells' texts of every row of the ``table``-th table of the view."""
    return [[str(t) for t in r] for r in driver.execute_script(_ROWS, table)]


def until(probe: Any, what: str, timeout: float = 30.0) -> Any:
    """Call ``probe`` until it returns something truthy; AssertionError naming ``what`` at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout}s")
        time.sleep(0.2)


def fmt_num(n: int | None) -> str:
    """A count as the page shows it (dom.js ``fmt.num``: en-US grouping, an en dash for none)."""
    return NONE if n is None else f"{n:,}"


def test_each_page_shows_its_content(board: Board, driver: webdriver.Chrome, tmp_path: Path) -> None:
    url = board.url
    assert board.api("info").json()["refreshSeconds"] == REFRESH
    console_errors(driver)  # start afresh

    text = open_view(driver, f"{url}/#/cluster", "broker-a", "ASYNC_MASTER", "serving")
    assert board.dev.addr in text
    shot(driver, tmp_path, "cluster")

    open_view(driver, f"{url}/#/topics", "orders", "payments", "audit-log")
    orders = cells(driver, "orders")
    assert orders[1:3] == ["broker-a: 4", str(ALL_ORDERS)] and orders[5] == "billing, shipping", orders
    assert cells(driver, "payments")[1:3] == ["broker-a: 2", str(sample.PAYMENTS)]
    shot(driver, tmp_path, "topics")

    text = open_view(driver, f"{url}/#/topic?topic=orders", "Queues", "Consumer groups")
    assert f"MESSAGES STORED\n{ALL_ORDERS}" in text
    assert cells(driver, "shipping", table=2) == ["shipping", str(sample.ORDERS)]
    shot(driver, tmp_path, "topic")

    deadline = time.monotonic() + 30
    while True:  # billing commits its offsets every few seconds
        open_view(driver, f"{url}/#/groups", "billing", "shipping")
        billing = cells(driver, "billing")
        if billing[6] == "0" or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert billing[1:6] == ["1", "push", "CLUSTERING", "%RETRY%billing *\norders TagA", "consistent"], billing
    assert billing[6] == "0", billing
    shipping = cells(driver, "shipping")
    assert shipping[1:7] == ["0", NONE, NONE, NONE, "no clients", str(sample.LATE_ORDERS)], shipping
    shot(driver, tmp_path, "groups")

    text = open_view(driver, f"{url}/#/group?group=shipping", "Lag per queue", "Filter counts")
    assert f"LAG\n{sample.LATE_ORDERS}" in text
    lags = [int(line.split()[5]) for line in text.splitlines() if line.startswith("orders broker-a ")]
    assert len(lags) == 4 and sum(lags) == sample.LATE_ORDERS, lags
    shot(driver, tmp_path, "group")

    text = open_view(driver, f"{url}/#/group?group=billing", "Members", "TagA")
    assert "yes" in text and "consistent" in text
    shot(driver, tmp_path, "group-billing")

    oid = offset_id(board, "order-7")
    text = open_view(driver, f"{url}/#/message?id={oid}", "Properties", "Consumed by")
    props = {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in text.splitlines()
             if line.split(" ", 1)[0] in ("region", "amount", "KEYS")}  # fmt: skip
    assert props == {"region": "us", "amount": "70", "KEYS": "order-7"}, props
    assert '{"order": 7, "items": 4}' in text
    assert cells(driver, "billing", table=1)[1:3] == ["CONSUMED", "yes"]
    shot(driver, tmp_path, "message")

    expected = sum(1 for i in range(ALL_ORDERS) if sample.REGIONS[i % 3] == "eu" and i * 10 > 100)
    params = urllib.parse.urlencode({"topic": "orders", "type": "SQL92",
                                     "expression": "region = 'eu' AND amount > 100"})  # fmt: skip
    text = open_view(driver, f"{url}/#/filters?{params}", "Matching (sample)")
    assert f"SCANNED\n{ALL_ORDERS}" in text and f"MATCHED\n{expected}" in text, text[:800]
    shot(driver, tmp_path, "filters")

    assert console_errors(driver) == [], "no script error, nothing blocked by the Content-Security-Policy"


def test_search_forms_by_clicks(board: Board, driver: webdriver.Chrome, tmp_path: Path) -> None:
    open_view(driver, f"{board.url}/#/messages", "By key")
    form = driver.find_element(By.CSS_SELECTOR, "form[data-key=key]")
    form.find_element(By.NAME, "topic").send_keys("orders")
    form.find_element(By.NAME, "key").send_keys("order-11")
    form.find_element(By.CSS_SELECTOR, "button").click()
    text = wait_text(driver, "1 message(s)", "order-11")
    assert "TagA" in text
    shot(driver, tmp_path, "messages-by-key")
    driver.find_element(By.LINK_TEXT, board.sample.order_ids["order-11"]).click()
    text = wait_text(driver, "Properties", "amount")
    assert "110" in text and "apac" in text  # order 11: amount 110, region apac

    open_view(driver, f"{board.url}/#/filters", "A group's filter counts")
    form = driver.find_elements(By.CSS_SELECTOR, "form.search")[0]
    form.find_element(By.NAME, "topic").send_keys("orders")
    form.find_element(By.NAME, "expression").send_keys("TagA || TagB")
    form.find_element(By.CSS_SELECTOR, "select option[value=TAG]").click()
    form.find_element(By.CSS_SELECTOR, "button").click()
    text = wait_text(driver, "Matching (sample)")
    assert f"MATCHED\n{ALL_ORDERS}" in text

    open_view(driver, f"{board.url}/#/filters", "A group's filter counts")
    form = driver.find_elements(By.CSS_SELECTOR, "form.search")[0]
    form.find_element(By.NAME, "topic").send_keys("orders")
    form.find_element(By.NAME, "expression").send_keys("a ==")
    form.find_element(By.CSS_SELECTOR, "button").click()
    text = wait_text(driver, "INVALID_EXPRESSION")
    assert "single =" in text


def test_search_by_id_form(board: Board, driver: webdriver.Chrome, tmp_path: Path) -> None:
    """The "By message id" form, typed in and submitted: a msgId (UNIQ_KEY) finds its one message; an offsetMsgId
    with its topic the same; an id nothing has shows the API's reason."""
    i = 20  # order 20: TagB (even), 1 item (20 % 4 + 1)
    msg_id, oid = board.sample.order_ids[f"order-{i}"], offset_id(board, f"order-{i}")
    # topic, broker, message id (the msgId is shown when there is one), tags, keys, body
    expected = ["orders", "broker-a", msg_id, "TagB", f"order-{i}", f'{{"order": {i}, "items": 1}}']
    for typed, topic in ((msg_id, ""), (oid, "orders")):
        open_view(driver, f"{board.url}/#/messages", "By message id")
        form = driver.find_element(By.CSS_SELECTOR, "form[data-key=id]")
        form.find_element(By.NAME, "id").send_keys(typed)
        if topic:
            form.find_element(By.NAME, "topic").send_keys(topic)
        form.find_element(By.CSS_SELECTOR, "button").click()
        wait_text(driver, "1 message(s)", msg_id)
        params = urllib.parse.parse_qs(driver.current_url.split("?", 1)[1])
        assert params == {"mode": ["id"], "id": [typed], **({"topic": [topic]} if topic else {})}, params
        (row,) = rows(driver)
        assert [row[1], row[2], row[5], row[6], row[7], row[8]] == expected, row
    shot(driver, tmp_path, "messages-by-id")

    open_view(driver, f"{board.url}/#/messages", "By message id")
    form = driver.find_element(By.CSS_SELECTOR, "form[data-key=id]")
    form.find_element(By.NAME, "id").send_keys("0" * 32)
    form.find_element(By.CSS_SELECTOR, "button").click()
    wait_text(driver, "MESSAGE_NOT_FOUND")


def _second(ms: int) -> int:
    """The start of the second of ``ms`` (epoch milliseconds)."""
    return ms - ms % 1000


def test_search_by_time_range_form(board: Board, driver: webdriver.Chrome, tmp_path: Path) -> None:
    """The "By time range" form, filled in by typing the dates and times as a person does: exactly the messages
    stored from the first second typed to the end of the last one, none of those before or after."""
    topic = "timed"

    async def send() -> None:
        async with AdminClient(board.namesrv) as admin:
            await admin.create_topic(topic, 2)
        producer = Producer(board.namesrv, "timed-producer")
        await producer.start()
        try:
            # each group of messages in seconds of its own: "before" | "inside" (two seconds) | "after"
            for n, batch in enumerate(("before", "inside", "inside", "after")):
                if n:
                    await asyncio.sleep(1.15 - time.time() % 1)  # just past the next second's start
                for i in range(3):
                    await producer.send(Message(topic, f"{batch} {n} {i}".encode(), keys=[f"{batch}-{n}-{i}"]))
        finally:
            await producer.close()

    board.loop.run(send())
    stored = board.api(f"messages/by-time?topic={topic}&begin=0&end={int(time.time() * 1000) + 60_000}").json()
    stamps = {m["keys"][0]: m["storeTimestamp"] for m in stored["messages"]}
    inside = sorted(k for k in stamps if k.startswith("inside"))
    begin = _second(min(stamps[k] for k in inside))
    end = _second(max(stamps[k] for k in inside))
    assert len(stamps) == 12 and len(inside) == 6 and end >= begin + 1000, stamps
    assert max(v for k, v in stamps.items() if k.startswith("before")) < begin
    assert min(v for k, v in stamps.items() if k.startswith("after")) >= end + 1000

    open_view(driver, f"{board.url}/#/messages", "By time range")
    form = driver.find_element(By.CSS_SELECTOR, "form[data-key=time]")
    form.find_element(By.NAME, "topic").send_keys(topic)
    for name, ms in (("begin", begin), ("end", end)):
        field = form.find_element(By.NAME, name)
        value = type_datetime(driver, field, ms)
        assert driver.execute_script("return new Date(arguments[0]).getTime()", value) == ms, (name, value)
    form.find_element(By.CSS_SELECTOR, "button").click()
    text = wait_text(driver, "message(s)")
    assert "mode=time" in driver.current_url
    found = rows(driver)
    assert sorted(r[7] for r in found) == inside, text[:2000]
    assert f"{len(inside)} message(s)" in text
    assert [r[0] for r in found] == sorted(r[0] for r in found), "oldest first"
    shot(driver, tmp_path, "messages-by-time")


def rate_of(cell: str) -> float | None:
    """A rate cell's value in messages per second ("12.5/s", "1,234/s"); None for none yet (an en dash)."""
    if cell == NONE:
        return None
    assert cell.endswith("/s"), cell
    return float(cell.removesuffix("/s").replace(",", ""))


def test_topic_rates_follow_traffic(board: Board, driver: webdriver.Chrome, tmp_path: Path) -> None:
    """While the topics page is open, messages sent to a topic at a known pace and consumed by a group show as In
    and Out rates above zero and no more than what was sent, while an idle topic's stay 0; once the group stops,
    Out falls back to 0 while In goes on; once the traffic stops, In falls back to 0 too."""
    topic, group, pace = "rated", "rated-reader", 10  # at most 10 messages a second
    stop = asyncio.Event()
    sent = [0]

    async def start_reader() -> PushConsumer:
        async with AdminClient(board.namesrv) as admin:
            await admin.create_topic(topic, 2)
        reader = PushConsumer(board.namesrv, group, consume_from="first", persist_interval=0.5,
                              rebalance_interval=1.0)  # fmt: skip
        reader.subscribe(topic, "*")

        @reader.listener
        async def on(messages: list[MessageExt]) -> None:
            pass

        await reader.start()
        return reader

    async def traffic() -> None:
        producer = Producer(board.namesrv, "rated-producer")
        await producer.start()
        try:
            while not stop.is_set():
                await producer.send(Message(topic, f"m{sent[0]}".encode()))
                sent[0] += 1
                await asyncio.sleep(1 / pace)
        finally:
            await producer.close()

    def rates() -> tuple[float | None, float | None]:
        row = cells(driver, topic)
        return rate_of(row[3]), rate_of(row[4])

    def moving() -> tuple[float, float, int] | None:
        r_in, r_out = rates()
        so_far = sent[0]  # read after the page's counters: no fewer than they counted
        return (r_in, r_out, so_far) if r_in and r_out else None

    reader: PushConsumer | None = board.loop.run(start_reader())
    sending = None
    try:
        assert reader is not None
        open_view(driver, f"{board.url}/#/topics", topic)
        sending = asyncio.run_coroutine_threadsafe(traffic(), board.loop.loop)
        r_in, r_out, so_far = until(moving, "non-zero In and Out rates of a topic receiving traffic", 40)
        # two samples at least REFRESH seconds apart, of counters that grew by no more than was sent
        assert 0 < r_in <= so_far / REFRESH, (r_in, so_far)
        assert 0 < r_out <= so_far / REFRESH, (r_out, so_far)
        idle = cells(driver, "audit-log")
        assert (rate_of(idle[3]), rate_of(idle[4])) == (0.0, 0.0), idle
        shot(driver, tmp_path, "topics-rates")

        board.loop.run(reader.close())  # commits its offsets: nothing more is consumed
        reader = None

        def only_in() -> bool:
            r_in, r_out = rates()
            return r_out == 0.0 and r_in is not None and r_in > 0

        until(only_in, f"Out of {topic} back to 0 once {group} stopped, while In goes on")

        board.loop.loop.call_soon_threadsafe(stop.set)
        sending.result(30)
        until(lambda: rates() == (0.0, 0.0), f"In of {topic} back to 0 once its traffic stopped")
    finally:
        board.loop.loop.call_soon_threadsafe(stop.set)
        if sending is not None:
            sending.result(30)
        if reader is not None:
            board.loop.run(reader.close())


def test_group_filter_counts_form(board: Board, driver: webdriver.Chrome, tmp_path: Path) -> None:
    """The filters page's "A group's filter counts" form, typed in and submitted, shows each of the group's counts
    as the JSON API gives them: for shipping (SQL92: its other messages filtered by evaluation; stopped) and for
    billing (TAG: filtered by tag hash; once its lag is 0 it has pulled everything and its counts stay put)."""
    until(lambda: board.api("group?group=billing").json()["totals"]["lag"] == 0, "billing's lag 0")
    shown: dict[str, list[list[str]]] = {}
    for group in ("shipping", "billing"):
        open_view(driver, f"{board.url}/#/filters", "A group's filter counts")
        form = driver.find_elements(By.CSS_SELECTOR, "form.search")[1]
        form.find_element(By.NAME, "group").send_keys(group)
        form.find_element(By.CSS_SELECTOR, "button").click()
        wait_text(driver, f"Filter counts of {group}")
        assert f"group={group}" in driver.current_url
        expected = []
        for rep in board.api(f"group?group={group}").json()["filters"]:
            for f in rep["filters"]:
                c = f["counts"]
                expression = f"{f.get('expressionType') or ''} {f['expression']}" if f.get("expression") else NONE
                numbers = [fmt_num(c[k]) for k in ("matched", "filtered_by_tag", "filtered_by_bitmap",
                                                   "filtered_by_evaluation")]  # fmt: skip
                expected.append([rep["broker"], f["topic"], expression, *numbers,
                                 f.get("error") or fmt_num(c["evaluation_errors"])])  # fmt: skip
        shown[group] = rows(driver)
        assert shown[group] == expected, (group, shown[group], expected)
        if group == "shipping":
            shot(driver, tmp_path, "filters-group")
    # what the sample makes the brokers count, so the columns above were not all zeros
    orders = {g: [r for r in shown[g] if r[1] == "orders"] for g in shown}
    assert [r[2] for r in orders["shipping"]] == ["SQL92 region = 'eu'"], shown
    assert [r[2] for r in orders["billing"]] == ["TAG TagA"], shown
    (ship,), (bill,) = orders["shipping"], orders["billing"]
    assert int(ship[3]) >= sample.eu_orders(sample.ORDERS) and int(ship[6]) > 0 and ship[4] == "0", ship
    assert int(bill[3]) >= ALL_ORDERS // 2 and int(bill[4]) > 0 and bill[6] == "0", bill


def test_inconsistent_group_shows_in_the_browser(board: Board, driver: webdriver.Chrome, tmp_path: Path) -> None:
    """A group whose second member subscribes its topic differently (the broker refuses that subscription) is
    shown inconsistent on the groups page and on its own page, which names that member and its expression."""
    stock = board.loop.run(sample.inconsistent_group(board.namesrv))
    try:
        first, second = stock.first.client_id, stock.second.client_id
        topic, (_, group_expr), (_, other_expr) = sample.STOCK_TOPIC, sample.STOCK_FIRST, sample.STOCK_SECOND
        c = board.api(f"group?group={sample.STOCK_GROUP}").json()["consistency"]
        assert c["state"] == "inconsistent" and c["inconsistentClients"] == {second: {topic: other_expr}}, c

        open_view(driver, f"{board.url}/#/groups", sample.STOCK_GROUP)
        row = cells(driver, sample.STOCK_GROUP)
        assert row[1] == "2" and row[5] == "inconsistent", row
        assert cells(driver, "billing")[5] == "consistent"

        text = open_view(driver, f"{board.url}/#/group?group={sample.STOCK_GROUP}", "Inconsistent subscriptions",
                         f"{second} {topic}: {other_expr}")  # fmt: skip
        badge = driver.find_element(By.CSS_SELECTOR, "#main .title-row .badge")
        assert (badge.text, badge.get_attribute("class")) == ("inconsistent", "badge bad")
        assert first not in text.split("Subscriptions")[0], "the alert names only the member that differs"
        retry = f"%RETRY%{sample.STOCK_GROUP}"  # every member subscribes the group's retry topic too
        assert rows(driver, 0) == [[retry, "*"], [topic, group_expr]], "the group's subscription is the first's"
        assert cells(driver, first, table=1)[4:6] == [f"{retry} *\n{topic} {group_expr}", "yes"]
        assert cells(driver, second, table=1)[4:6] == [f"{retry} *\n{topic} {other_expr} \u2260 group", "no"]
        shot(driver, tmp_path, "group-inconsistent")
    finally:
        board.loop.run(stock.close())


HOSTILE_BODY = "<script>window.__xss = 1</script><img src=x onerror=\"window.__xss = 2\">"
HOSTILE_PROP = "<img src=x onerror=window.__xss=3><svg onload=window.__xss=4>"
HOSTILE_KEY = "<b>k</b>'\"<iframe>"


def test_hostile_message_text_shows_literally_and_never_runs(
    board: Board, driver: webdriver.Chrome, tmp_path: Path
) -> None:
    async def send() -> str:
        producer = Producer(board.namesrv, "hostile-producer")
        await producer.start()
        try:
            props = {"note": HOSTILE_PROP, "<img src=x onerror=1>": "name"}
            r = await producer.send(Message("hostile", HOSTILE_BODY.encode(), tags="<i>t</i>", keys=[HOSTILE_KEY],
                                            properties=props))  # fmt: skip
            return r.offset_msg_id
        finally:
            await producer.close()

    oid = board.loop.run(send())
    pages = [
        (f"#/message?id={oid}", (HOSTILE_BODY, HOSTILE_PROP, HOSTILE_KEY, "<img src=x onerror=1>", "<i>t</i>")),
        ("#/messages?" + urllib.parse.urlencode({"mode": "key", "topic": "hostile", "key": HOSTILE_KEY}),
         ("1 message(s)", HOSTILE_KEY, "<i>t</i>")),
        ("#/filters?" + urllib.parse.urlencode({"topic": "hostile", "type": "SQL92", "expression": "note IS NOT NULL"}),
         ("Matching (sample)", HOSTILE_PROP)),
        ("#/topic?topic=hostile", ("Queues",)),
    ]
    for i, (page, texts) in enumerate(pages):
        text = open_view(driver, f"{board.url}/{page}", *texts)
        assert driver.execute_script("return window.__xss === undefined"), f"hostile text ran on {page}"
        try:
            alert = driver.switch_to.alert
            raise AssertionError(f"an alert opened on {page}: {alert.text}")
        except NoAlertPresentException:
            pass
        made = driver.find_elements(By.CSS_SELECTOR, "#main script, #main img, #main iframe, #main svg, #main b, "
                                    "#main i")  # fmt: skip
        assert made == [], f"hostile text became elements on {page}: {[e.tag_name for e in made]}"
        assert all(t in text for t in texts)
        shot(driver, tmp_path, f"hostile-{i}")
    quiet_period_blocking(0.5, "an onerror handler of hostile text firing")
    assert driver.execute_script("return window.__xss === undefined")
