"""The dashboard's logins (docs/dashboard.md §5) against a real ``sievemq dev`` whose dashboard asks for them
(``authEnable`` true, a users file with an admin, a viewer and a viewer that may read bodies), with the sample
data: every ``/api/`` route of the route table refuses a request without a token or with a wrong one (401 with
its reason); an admin reads messages, a viewer gets them without bodies and properties and no explain, unless
``readBodies``; a standalone dashboard holds back an address that keeps guessing (429); and, in chromium, the
page's login form: a wrong token is refused, a viewer sees no body, Log out forgets the token.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By

from sievemq.admin.api import AdminClient
from sievemq.dashboard.app import dashboard_routes
from sievemq.dashboard.service import DashboardData
from tests.dashboard import sample
from tests.dashboard.conftest import Board, get, ok, refused
from tests.support.browser import chrome, open_view, wait_text
from tests.support.procs import Proc, free_port


def new_token() -> str:
    """A token as ``sievemq dashboard hash-token`` makes one (made here: the test does not trust the code)."""
    return secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """Its ``tokenHash``, as docs/dashboard.md §5 defines it."""
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()


ADMIN, VIEWER, READER = new_token(), new_token(), new_token()
USERS = f"""
[[users]]
name = "ops"
tokenHash = "{hash_token(ADMIN)}"
role = "admin"

[[users]]
name = "support"
tokenHash = "{hash_token(VIEWER)}"
role = "viewer"

[[users]]
name = "audit"
tokenHash = "{hash_token(READER)}"
role = "viewer"
readBodies = true
"""
TOKEN_KEY = "sievemq.dashboard.token"
"""Where the page keeps the token (login.js)."""


def users_file(tmp: Path) -> Path:
    path = tmp / "dashboard-users.toml"
    path.write_text(USERS)
    return path


def DEV_ENV(tmp: Path) -> dict[str, str]:  # the name tests/dashboard/conftest.py looks for
    """Logins on, with the module's users; failures not held back (the route walk fails many on purpose)."""
    return {"SIEVEMQ_DASHBOARD_AUTH_ENABLE": "true", "SIEVEMQ_DASHBOARD_USERS_FILE": str(users_file(tmp)),
            "SIEVEMQ_DASHBOARD_AUTH_FAILURES_PER_MINUTE": "100000"}  # fmt: skip


def api_paths() -> list[str]:
    """Every ``/api/`` path of the dashboard's route table (the catch-all as an unknown path)."""
    routes = dashboard_routes(DashboardData(AdminClient("127.0.0.1:1")), "127.0.0.1")
    paths = [r.path.replace("{tail:.*}", "no/such/endpoint") for r in routes if r.path.startswith("/api/")]
    assert len(paths) >= 12 and "/api/messages/by-time" in paths and "/api/no/such/endpoint" in paths, paths
    return paths


@pytest.mark.parametrize("path", api_paths())
def test_every_api_route_needs_a_users_token(board: Board, path: str) -> None:
    url = board.url + path
    none = get(url)
    refused(none, 401, "AUTH_REQUIRED")
    assert none.headers["WWW-Authenticate"].startswith("Bearer realm=")
    assert none.headers["Content-Security-Policy"].startswith("default-src 'none'")
    for header in (f"Bearer {ADMIN}x", f"Bearer {hash_token(ADMIN)}", "Basic b3BzOg==", "Bearer", "Bearer a\tb",
                   "Bearer " + "A" * 5000):  # fmt: skip
        wrong = get(url, {"Authorization": header})
        refused(wrong, 401, "AUTH_FAILED")
        assert 'error="invalid_token"' in wrong.headers["WWW-Authenticate"]
    if path != "/api/no/such/endpoint":  # with a token the request reaches the endpoint (here: its parameters)
        assert get(url, {"Authorization": f"Bearer {ADMIN}"}).status in (200, 400)


def test_the_page_itself_needs_no_login(board: Board) -> None:
    for path in ("/", "/app.js", "/login.js"):
        assert get(board.url + path).status == 200, path
    assert ok(get(board.url + "/healthz"))["status"] == "ok"


def test_info_names_the_user(board: Board) -> None:
    assert ok(board.api("info", ADMIN))["auth"] == {
        "enabled": True,
        "user": {"name": "ops", "role": "admin", "readBodies": True},
    }
    assert ok(board.api("info", VIEWER))["auth"]["user"] == {"name": "support", "role": "viewer",
                                                             "readBodies": False}  # fmt: skip
    assert ok(board.api("info", READER))["auth"]["user"]["readBodies"] is True


def by_time(board: Board, topic: str, token: str) -> dict:  # type: ignore[type-arg]
    q = urllib.parse.urlencode({"topic": topic, "begin": 0, "end": int(time.time() * 1000) + 60_000, "limit": 500})
    return ok(board.api(f"messages/by-time?{q}", token))


def test_an_admin_reads_messages(board: Board) -> None:
    rows = by_time(board, "orders", ADMIN)["messages"]
    assert len(rows) == sample.ORDERS + sample.LATE_ORDERS
    first = next(r for r in rows if r["keys"] == ["order-5"])
    assert first["contentHidden"] is False
    assert first["body"] == '{"order": 5, "items": 2}' and first["userProperties"] == {"region": "apac",
                                                                                      "amount": "50"}  # fmt: skip
    m = ok(board.api("message?" + urllib.parse.urlencode({"id": first["offsetMsgId"]}), ADMIN))["message"]
    assert m["body"] == '{"order": 5, "items": 2}' and m["properties"]["region"] == "apac"
    e = ok(board.api("explain?" + urllib.parse.urlencode({"topic": "orders", "expression": "region = 'eu'"}), ADMIN))
    assert e["totals"]["matched"] == sample.eu_orders(sample.ORDERS + sample.LATE_ORDERS)


def test_a_viewer_gets_no_bodies_nor_properties(board: Board) -> None:
    rows = by_time(board, "orders", VIEWER)["messages"]
    assert len(rows) == sample.ORDERS + sample.LATE_ORDERS
    for r in rows:
        assert r["contentHidden"] is True
        assert r["body"] is None and r["bodyEncoding"] is None
        assert r["properties"] is None and r["userProperties"] is None
        assert r["keys"][0].startswith("order-") and r["tags"] in ("TagA", "TagB") and r["bodySize"] > 0
    oid = rows[0]["offsetMsgId"]
    for path in (f"message?id={oid}", f"messages/by-id?id={oid}", "messages/by-key?topic=orders&key=order-5"):
        raw = board.api(path, VIEWER)
        answer = ok(raw)
        assert b'"order"' not in raw.body and b"apac" not in raw.body and b"amount" not in raw.body, path
        shown = [answer["message"], *answer["records"]] if "message" in answer else answer["messages"]
        assert shown and all(m["contentHidden"] and m["body"] is None for m in shown), path
    for expression in ("region = 'eu'", "TagA"):
        q = urllib.parse.urlencode({"topic": "orders", "expression": expression,
                                    "type": "TAG" if expression == "TagA" else "SQL92"})  # fmt: skip
        err = refused(board.api(f"explain?{q}", VIEWER), 403, "BODY_NOT_ALLOWED")
        assert "readBodies" in err["message"]
    # the cluster's state is the viewer's too
    assert {t["topic"] for t in ok(board.api("topics", VIEWER))["topics"]} == {"orders", "payments", "audit-log"}
    assert ok(board.api("group?group=shipping", VIEWER))["totals"]["lag"] == sample.LATE_ORDERS
    assert ok(board.api("cluster", VIEWER))["brokers"][0]["state"] == "serving"


def test_a_viewer_with_read_bodies_reads_them(board: Board) -> None:
    rows = by_time(board, "audit-log", READER)["messages"]
    assert [r["body"] for r in rows] == [bytes([0, 159, 146, 150, n]).hex() for n in range(sample.AUDITS)]
    assert all(r["contentHidden"] is False for r in rows)
    q = urllib.parse.urlencode({"topic": "orders", "expression": "region = 'eu'"})
    assert ok(board.api(f"explain?{q}", READER))["totals"]["scanned"] == sample.ORDERS + sample.LATE_ORDERS


def test_a_guessing_address_is_held_back(board: Board, tmp_path: Path) -> None:
    """A standalone dashboard (its own limiter: 3 failures a minute): after 3 wrong tokens every request of the
    address is 429 with Retry-After, the right token too; asking without a token is no failure."""
    port = free_port()
    proc = Proc(["dashboard", "--namesrv-addr", board.namesrv, "--http-port", str(port), "--auth-enable", "true",
                 "--users-file", str(users_file(tmp_path)), "--auth-failures-per-minute", "3"], port,
                tmp_path / "dashboard.log", ready_text="sievemq dashboard on").start()  # fmt: skip
    url = f"http://127.0.0.1:{port}/api/topics"
    try:
        for _ in range(5):
            refused(get(url), 401, "AUTH_REQUIRED")
        assert ok(get(url, {"Authorization": f"Bearer {VIEWER}"}))["topics"]
        for _ in range(3):
            refused(get(url, {"Authorization": f"Bearer {new_token()}"}), 401, "AUTH_FAILED")
        held = get(url, {"Authorization": f"Bearer {ADMIN}"})
        refused(held, 429, "AUTH_RATE_LIMITED")
        assert 0 < int(held.headers["Retry-After"]) <= 60
        assert "3 failed logins from 127.0.0.1" in proc.log()
    finally:
        proc.stop()
    assert "logins: " in proc.log()


def test_hash_token_prints_a_token_and_the_entry_that_admits_it(tmp_path: Path) -> None:
    """``sievemq dashboard hash-token``: the token on stderr, the users-file entry (its hash only) on stdout, so
    ``>> users.toml`` gathers the entries; a standalone dashboard over that file admits the token."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIEVEMQ_")}
    users = tmp_path / "users.toml"
    tokens = {}
    for name, extra in (("ops", ["--role", "admin"]), ("support", ["--role", "VIEWER", "--read-bodies"])):
        res = subprocess.run([sys.executable, "-m", "sievemq.cli", "dashboard", "hash-token", "--name", name, *extra],
                             env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
        assert res.returncode == 0, res.stderr
        (token,) = re.findall(rf"token of {name} \(shown this once, stored nowhere\): (\S+)", res.stderr)
        assert token not in res.stdout and hash_token(token) in res.stdout
        tokens[name] = token
        with users.open("a") as f:
            f.write(res.stdout)
    port = free_port()
    proc = Proc(["dashboard", "--namesrv-addr", "127.0.0.1:1", "--http-port", str(port), "--auth-enable", "true",
                 "--users-file", str(users)], port, tmp_path / "dashboard.log",
                ready_text="sievemq dashboard on").start()  # fmt: skip
    try:
        info = ok(get(f"http://127.0.0.1:{port}/api/info", {"Authorization": f"Bearer {tokens['support']}"}))
        assert info["auth"]["user"] == {"name": "support", "role": "viewer", "readBodies": True}
        info = ok(get(f"http://127.0.0.1:{port}/api/info", {"Authorization": f"Bearer {tokens['ops']}"}))
        assert info["auth"]["user"]["role"] == "admin"
    finally:
        proc.stop()


# ------------------------------------------------------------------------------------------------ the page
@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[webdriver.Chrome]:
    d = chrome(tmp_path_factory.mktemp("chromium-profile-auth"))
    try:
        yield d
    finally:
        d.quit()


def log_in(driver: webdriver.Chrome, token: str) -> None:
    form = driver.find_element(By.CSS_SELECTOR, "form[data-key=login]")
    form.find_element(By.NAME, "token").send_keys(token)
    form.find_element(By.CSS_SELECTOR, "button").click()


def page(driver: webdriver.Chrome) -> str:
    return str(driver.execute_script("return document.body.dataset.page"))


def test_the_page_logs_in_through_its_form(board: Board, driver: webdriver.Chrome) -> None:
    text = open_view(driver, f"{board.url}/#/topics", "Log in", "Token")
    assert page(driver) == "login" and "AUTH_REQUIRED" not in text, "the first visit shows the form, no alert"

    log_in(driver, "not-a-users-token")
    wait_text(driver, "AUTH_FAILED", "Log in")
    assert page(driver) == "login"

    log_in(driver, VIEWER)
    wait_text(driver, "orders", "payments", "audit-log")  # the view the link names, once logged in
    assert page(driver) == "topics"
    assert driver.find_element(By.ID, "account").text == "support (viewer, no bodies)"
    assert driver.execute_script(f"return sessionStorage.getItem('{TOKEN_KEY}')") == VIEWER
    assert driver.execute_script("return document.cookie") == "" and driver.execute_script(
        "return localStorage.length") == 0, "the token is kept in this tab only"  # fmt: skip
    assert VIEWER not in driver.current_url

    oid = by_time(board, "orders", ADMIN)["messages"][0]["offsetMsgId"]
    text = open_view(driver, f"{board.url}/#/message?id={oid}", "Consumed by", "hidden")
    assert "may not read message bodies" in text and '"order"' not in text and "amount" not in text, text
    params = urllib.parse.urlencode({"topic": "orders", "type": "SQL92", "expression": "region = 'eu'"})
    open_view(driver, f"{board.url}/#/filters?{params}", "BODY_NOT_ALLOWED")

    driver.find_element(By.ID, "logout").click()
    wait_text(driver, "Log in", "Token")
    assert driver.execute_script(f"return sessionStorage.getItem('{TOKEN_KEY}')") is None
    open_view(driver, f"{board.url}/#/message?id={oid}", "Log in")
    assert page(driver) == "login", "a reload after Log out asks again"

    log_in(driver, ADMIN)
    text = wait_text(driver, "Properties", "Consumed by")
    assert '{"order": ' in text and "amount" in text and "hidden" not in text
    assert driver.find_element(By.ID, "account").text == "ops (admin)"
