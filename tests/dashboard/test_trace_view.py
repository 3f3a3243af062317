"""The dashboard's message trace view (docs/traces.md §6) on a real ``sievemq dev`` with traced clients: a message
sent by a tracing producer, consumed by a tracing group on its tag and filtered out for a group of another tag and
one whose SQL92 subscription is FALSE; ``/api/trace`` answers ``AdminClient.message_trace``'s document, and in
chromium the view (opened from its form, by typing the id) shows the timeline and every group's verdict with its
reason. The Access page of a dev without ACL 2.0 says it is off."""

from __future__ import annotations

import asyncio
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By

from sievemq import ConsumeResult, Message, Producer, PushConsumer, Selector
from sievemq.admin.api import AdminClient
from tests.client.conftest import ready, start_dev
from tests.dashboard.conftest import Loop, get, ok, refused
from tests.support.browser import chrome, console_errors, open_view, wait_text
from tests.support.procs import Proc

TOPIC, G_OK, G_TAG, G_SQL = "TvTopic", "TvConsumed", "TvOtherTag", "TvSqlFalse"


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proc]:
    proc = start_dev(tmp_path_factory.mktemp("trace-view-dev"))
    try:
        yield proc
    finally:
        proc.stop(timeout=10.0)


@pytest.fixture(scope="module")
def traced(dev: Proc) -> Iterator[dict[str, Any]]:
    """The message's id and ``AdminClient.message_trace``'s document once the send and the consumption are
    traced; the groups stay online meanwhile (a group without clients has no subscription to judge by)."""
    loop = Loop()
    consumers: list[PushConsumer] = []
    try:
        yield loop.run(_send_and_consume(str(dev.extra["namesrv"]), consumers))
    finally:
        for c in consumers:
            loop.run(c.close())
        loop.close()


async def _send_and_consume(namesrv: str, consumers: list[PushConsumer]) -> dict[str, Any]:
    async with AdminClient(namesrv) as admin:
        await admin.create_topic(TOPIC, queues=1)
        consumers += [PushConsumer(namesrv, G_OK, trace=True), PushConsumer(namesrv, G_TAG, trace=True),
                      PushConsumer(namesrv, G_SQL, trace=True)]  # fmt: skip
        consumers[0].subscribe(TOPIC, "TagA")
        consumers[1].subscribe(TOPIC, "TagB")
        consumers[2].subscribe(TOPIC, Selector.sql("amount > 10"))
        for c in consumers:
            c.listener(lambda msgs: ConsumeResult.SUCCESS)
            await c.start()
            await ready(c, TOPIC)
        async with Producer(namesrv, "TvProducer", trace=True) as p:
            sent = await p.send(Message(TOPIC, b"traced", tags="TagA", keys="order-7", properties={"amount": "5"}))
        deadline = time.monotonic() + 60
        while True:
            doc = await admin.message_trace(sent.msg_id)
            groups = {g["group"]: g for g in doc["groups"]}
            if doc["sent"] and groups.get(G_OK, {}).get("consumed") and G_SQL in groups:
                return {"msgId": sent.msg_id, "doc": doc}
            assert time.monotonic() < deadline, f"the traces never arrived: {doc}"
            await asyncio.sleep(0.2)


def test_the_api_answers_the_trace(dev: Proc, traced: dict[str, Any]) -> None:
    url = str(dev.extra["http"])
    body = ok(get(f"{url}/api/trace?id={traced['msgId']}"))
    assert body["msgId"] == traced["msgId"] and body["contentHidden"] is False
    groups = {g["group"]: g for g in body["groups"]}
    assert groups[G_OK]["state"] == "CONSUMED" and groups[G_OK]["filter"]["verdict"] == "DELIVERED"
    assert (groups[G_TAG]["filter"]["verdict"], groups[G_TAG]["filter"]["stage"]) == ("FILTERED", "tag-hash")
    assert groups[G_SQL]["filter"]["details"]["properties"] == {"amount": "5"}
    assert "SENT" in [e["event"] for e in body["events"]]
    one = ok(get(f"{url}/api/trace?id={traced['msgId']}&group={G_SQL}"))
    assert [g["group"] for g in one["groups"]] == [G_SQL]
    refused(get(f"{url}/api/trace?id={'0' * 32}"), 404, "MESSAGE_NOT_FOUND")
    refused(get(f"{url}/api/trace?id=not-an-id"), 400, "INVALID_PARAMETER")
    refused(get(f"{url}/api/trace"), 400, "INVALID_PARAMETER")
    refused(get(f"{url}/api/trace?id={traced['msgId']}&group=bad%20group"), 400, "INVALID_NAME")
    refused(get(f"{url}/api/trace?id={traced['msgId']}&traceTopic=a%2Fb"), 400, "INVALID_NAME")


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[webdriver.Chrome]:
    d = chrome(tmp_path_factory.mktemp("chromium-trace"))
    try:
        yield d
    finally:
        d.quit()


def test_the_trace_view_shows_the_timeline_and_each_verdict(
    dev: Proc, traced: dict[str, Any], driver: webdriver.Chrome
) -> None:
    url = str(dev.extra["http"])
    open_view(driver, f"{url}/#/trace", "Trace a message")
    form = driver.find_element(By.CSS_SELECTOR, 'form[data-key="trace"]')
    form.find_element(By.NAME, "id").send_keys(traced["msgId"])
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    shown = wait_text(driver, "Timeline", "Consumer groups", G_OK, G_TAG, G_SQL, "CONSUMED", "order-7")
    rows = {r.find_element(By.CSS_SELECTOR, "td").text: r.text
            for r in driver.find_elements(By.CSS_SELECTOR, "section.panel tbody tr")
            if r.find_elements(By.CSS_SELECTOR, "td")}  # fmt: skip
    assert "DELIVERED" in rows[G_OK] and "TagA" in rows[G_OK]
    assert "FILTERED" in rows[G_TAG] and "'TagA' is not in" in rows[G_TAG], rows[G_TAG]
    assert "FILTERED" in rows[G_SQL] and "FALSE" in rows[G_SQL] and "amount > 10" in rows[G_SQL], rows[G_SQL]
    assert "SENT" in shown and "TvProducer" in shown
    assert driver.execute_script("return location.hash") == f"#/trace?id={traced['msgId']}"

    open_view(driver, f"{url}/#/trace?id={'0' * 32}", "Trace a message")  # an id nobody traced: said so
    wait_text(driver, "MESSAGE_NOT_FOUND", "no trace of message")
    open_view(driver, f"{url}/#/message?id={traced['doc']['message']['offsetMsgId']}", "Trace it")
    driver.find_element(By.LINK_TEXT, "Trace it").click()
    wait_text(driver, "Consumer groups", G_SQL)
    assert [e for e in console_errors(driver) if e.get("source") != "network"] == []


def test_the_access_page_says_acl2_is_off(dev: Proc, driver: webdriver.Chrome) -> None:
    url = str(dev.extra["http"])
    body = ok(get(f"{url}/api/access"))
    assert body["enabled"] is False and body["users"] == [] and body["canWrite"] is True
    (err,) = body["errors"].values()
    assert err["reason"] == "ACL2_OFF"
    req = urllib.request.Request(f"{url}/api/access", method="POST", headers={"Content-Type": "application/json"},
                                 data=b'{"action": "deleteUser", "username": "alice"}')  # fmt: skip
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=30)
    assert e.value.code == 409 and b'"ACL2_OFF"' in e.value.read()
    open_view(driver, f"{url}/#/access", "ACL 2.0 is off")
    assert driver.find_elements(By.CSS_SELECTOR, "form") == []
