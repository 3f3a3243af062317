"""The dashboard in a real browser (Debian's chromium, headless, through chromedriver and selenium) against a real
``sievemq dev`` with the sample data: each page shows the expected content and is saved as a screenshot; the
search forms work by clicks; hostile message text shows literally and never runs. A missing browser fails.
"""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By

from sievemq import Message, Producer
from tests.dashboard import sample
from tests.dashboard.conftest import Board
from tests.support.browser import chrome, console_errors, open_view, png_size, screenshot, wait_text

ALL_ORDERS = sample.ORDERS + sample.LATE_ORDERS
NONE = "\u2013"
"""What the page shows for "none" (an en dash)."""


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[webdriver.Chrome]:
    d = chrome(tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield d
    finally:
        d.quit()


def shot(driver: webdriver.Chrome, tmp_path: Path, name: str) -> None:
    path = screenshot(driver, tmp_path / f"{name}.png")
    width, height = png_size(path)
    assert width >= 1000 and height >= 400, (name, width, height)
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


def test_each_page_shows_its_content(board: Board, driver: webdriver.Chrome, tmp_path: Path) -> None:
    url = board.url
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
    time.sleep(0.5)  # an onerror would have fired by now
    assert driver.execute_script("return window.__xss === undefined")
