"""The dashboard's Access page (docs/dashboard.md §9) in front of a real broker with ACL 2.0 on
(authenticationEnabled, authorizationEnabled, initAuthenticationUser), the dashboard signing as the broker's super
user: ``/api/access`` lists users without passwords and their policy entries; ``POST /api/access`` creates and
deletes users and entries for a dashboard admin only, from the page's own origin only, with the broker's refusals
as their reasons; and in chromium an admin creates a user and its policy entries through the forms and deletes
them (two clicks), while a viewer sees the lists and no form."""

from __future__ import annotations

import hashlib
import json
import secrets
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By

from tests.dashboard.conftest import Answer, get, ok, refused
from tests.support.browser import chrome, console_errors, open_view, wait_text
from tests.support.procs import Proc, broker_proc, free_port, namesrv_proc

ROOT = ("rootadmin", "root-password")
ADMIN, VIEWER = secrets.token_urlsafe(32), secrets.token_urlsafe(32)


def _entry(name: str, token: str, role: str) -> str:
    digest = hashlib.sha256(token.encode()).hexdigest()
    return f'[[users]]\nname = "{name}"\ntokenHash = "sha256:{digest}"\nrole = "{role}"\n'


@dataclass
class Site:
    ns: Proc
    broker: Proc
    dashboard: Proc
    url: str

    def get(self, path: str, token: str | None = ADMIN) -> Answer:
        return get(f"{self.url}/api/{path}", {"Authorization": f"Bearer {token}"} if token else {})

    def post(self, body: object, token: str | None = ADMIN, content_type: str = "application/json",
             **headers: str) -> Answer:  # fmt: skip
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        h = {"Content-Type": content_type, **headers}
        if token:
            h["Authorization"] = f"Bearer {token}"
        req = urllib.request.Request(f"{self.url}/api/access", data=data, headers=h, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                return Answer(resp.status, dict(resp.headers.items()), resp.read())
        except urllib.error.HTTPError as e:
            return Answer(e.code, dict(e.headers.items()), e.read())


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    tmp = tmp_path_factory.mktemp("dash-access")
    init = json.dumps({"username": ROOT[0], "password": ROOT[1]})
    ns = namesrv_proc(tmp, "ns-dash-access")
    broker = broker_proc(tmp, ns.addr, "dash-access-a", "--authentication-enabled", "true",
                         "--authorization-enabled", "true", "--init-authentication-user", init)  # fmt: skip
    users = tmp / "dashboard-users.toml"
    users.write_text(_entry("ops", ADMIN, "admin") + "\n" + _entry("support", VIEWER, "viewer"))
    port = free_port()
    dash = Proc(["dashboard", "--namesrv-addr", ns.addr, "--http-port", str(port), "--users-file", str(users)], port,
                tmp / "dashboard.log", ready_text="sievemq dashboard on",
                env={"SIEVEMQ_DASHBOARD_ACCESS_KEY": ROOT[0], "SIEVEMQ_DASHBOARD_SECRET_KEY": ROOT[1],
                     "SIEVEMQ_DASHBOARD_AUTH_FAILURES_PER_MINUTE": "100000"})  # fmt: skip
    started: list[Proc] = []
    try:
        for p in (ns, broker, dash):
            p.start()
            started.append(p)
        s = Site(ns, broker, dash, f"http://127.0.0.1:{port}")
        for _ in range(200):  # the broker registers with the name server: the dashboard finds it there
            a = s.get("access")
            if a.status == 200 and a.json()["brokers"]:
                break
        else:
            raise AssertionError(f"the broker never showed on /api/access: {a.body[:500]!r}")
        yield s
    finally:
        for p in reversed(started):
            p.stop()


def names(site: Site) -> set[str]:
    return {u["username"] for u in ok(site.get("access"))["users"]}


def test_the_list_holds_no_password(site: Site) -> None:
    body = ok(site.get("access", VIEWER))
    assert body["enabled"] is True and body["canWrite"] is False and body["errors"] == {}
    assert body["brokers"] == [site.broker.addr]
    (root,) = body["users"]
    assert root == {"username": ROOT[0], "userType": "Super", "userStatus": "enable", "brokers": [site.broker.addr],
                    "differs": False}  # fmt: skip
    assert ok(site.get("access"))["canWrite"] is True
    for raw in (site.get("access").body, site.get("access", VIEWER).body):
        assert ROOT[1].encode() not in raw and b"password" not in raw
    refused(site.get("access", None), 401, "AUTH_REQUIRED")
    refused(site.get("access?x=1"), 400, "INVALID_PARAMETER")


def test_writes_are_for_admins_from_the_page_only(site: Site) -> None:
    create = {"action": "createUser", "username": "mallory", "password": "mallory-password"}
    refused(site.post(create, token=None), 401, "AUTH_REQUIRED")
    refused(site.post(create, token=VIEWER), 403, "ADMIN_REQUIRED")
    refused(site.post(create, content_type="text/plain"), 415, "UNSUPPORTED_MEDIA_TYPE")
    refused(site.post(create, content_type="application/x-www-form-urlencoded"), 415, "UNSUPPORTED_MEDIA_TYPE")
    refused(site.post(create, Origin="http://evil.example"), 403, "CROSS_SITE_REQUEST")
    refused(site.post(create, Origin="null"), 403, "CROSS_SITE_REQUEST")
    refused(site.post(create, **{"Sec-Fetch-Site": "cross-site"}), 403, "CROSS_SITE_REQUEST")
    assert "mallory" not in names(site)
    for bad, field in ((b"{", "body"), (b"[]", "body"), ({"action": "dropAll"}, "action"),
                       ({**create, "extra": 1}, "extra"), ({**create, "username": "bad:name"}, "username"),
                       ({**create, "password": ""}, "password"), ({**create, "userType": "Root"}, "userType"),
                       ({"action": "createPolicy", "subject": "User:x", "resources": ["Queue:x"], "actions": "Pub",
                         "decision": "Allow"}, "policy"),
                       ({"action": "deletePolicy", "subject": "alice"}, "subject")):  # fmt: skip
        err = refused(site.post(bad), 400, "INVALID_PARAMETER")
        assert err["parameter"] == field, err
    assert "mallory" not in names(site)


def test_users_and_policies_through_the_api(site: Site) -> None:
    own = {"Origin": site.url, "Sec-Fetch-Site": "same-origin"}  # what chromium sends from the page
    done = ok(site.post({"action": "createUser", "username": "alice", "password": "alice-password"}, **own))
    assert done == {"action": "createUser", "brokers": [site.broker.addr], "errors": {}}
    err = refused(site.post({"action": "createUser", "username": "alice", "password": "again"}), 400, "ACL_INVALID")
    assert err["broker"] == site.broker.addr and "alice" in err["message"]
    ok(site.post({"action": "createPolicy", "subject": "User:alice", "resources": "Topic:orders, Group:g1",
                  "actions": ["Pub", "Sub"], "sourceIps": "10.0.0.0/8", "decision": "Allow"}))  # fmt: skip
    err = refused(site.post({"action": "createPolicy", "subject": "User:nobody", "resources": ["Topic:x"],
                             "actions": ["Pub"], "decision": "Deny"}), 400, "ACL_INVALID")  # fmt: skip
    body = ok(site.get("access"))
    assert {u["username"] for u in body["users"]} == {ROOT[0], "alice"}
    assert [(p["subject"], p["policyType"], p["resource"], p["actions"], p["sourceIps"], p["decision"])
            for p in body["policies"]] == [
        ("User:alice", "Custom", "Group:g1", ["Pub", "Sub"], ["10.0.0.0/8"], "Allow"),
        ("User:alice", "Custom", "Topic:orders", ["Pub", "Sub"], ["10.0.0.0/8"], "Allow")]  # fmt: skip
    ok(site.post({"action": "deletePolicy", "subject": "User:alice", "resource": "Topic:orders",
                  "policyType": "Custom"}))  # fmt: skip
    assert [p["resource"] for p in ok(site.get("access"))["policies"]] == ["Group:g1"]
    ok(site.post({"action": "deleteUser", "username": "alice"}))
    body = ok(site.get("access"))
    assert names(site) == {ROOT[0]} and body["policies"] == []  # its ACL went with it
    assert b"alice-password" not in (site.dashboard.log_path.read_bytes() + site.get("access").body)


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[webdriver.Chrome]:
    d = chrome(tmp_path_factory.mktemp("chromium-access"))
    try:
        yield d
    finally:
        d.quit()


def log_in(driver: webdriver.Chrome, site: Site, token: str) -> None:
    """Keep ``token`` in the tab and load the page again with it, until the page shows a logged-in view (the page
    opened before holds the login form, which a later change of the hash alone does not leave)."""
    driver.get(f"{site.url}/#/cluster")
    driver.execute_script("sessionStorage.setItem('sievemq.dashboard.token', arguments[0])", token)
    driver.refresh()
    deadline = time.monotonic() + 30
    while driver.execute_script("return document.body.dataset.page") != "cluster":
        assert time.monotonic() < deadline, driver.find_element(By.TAG_NAME, "body").text
        time.sleep(0.05)


def fill(driver: webdriver.Chrome, form: str, **values: str) -> None:
    f = driver.find_element(By.CSS_SELECTOR, f'form[data-key="{form}"]')
    for name, value in values.items():
        el = f.find_element(By.NAME, name)
        if el.tag_name == "select":
            el.find_element(By.CSS_SELECTOR, f'option[value="{value}"]').click()
        else:
            el.clear()
            el.send_keys(value)
    f.find_element(By.CSS_SELECTOR, "button[type=submit]").click()


def notice(driver: webdriver.Chrome, *texts: str) -> str:
    wait_text(driver, *texts)
    return str(driver.find_element(By.CSS_SELECTOR, '[data-key="notice"]').text)


def test_an_admin_manages_access_in_the_page(site: Site, driver: webdriver.Chrome, tmp_path: Path) -> None:
    log_in(driver, site, ADMIN)
    open_view(driver, f"{site.url}/#/access", "Users", ROOT[0], "New user", "New policy entries")
    fill(driver, "new-user", username="bob", password="bob-password", userType="Normal")
    assert "user bob created on" in notice(driver, "user bob created on", "bob")
    assert "bob" in names(site)
    fill(driver, "new-policy", subject="User:bob", resources="Topic:orders, Topic:ord*", actions="Pub",
         sourceIps="10.0.0.0/8", decision="Deny", policyType="Custom")  # fmt: skip
    notice(driver, "entries of User:bob added", "Topic:ord*", "10.0.0.0/8")
    assert {p["resource"] for p in ok(site.get("access"))["policies"]} == {"Topic:orders", "Topic:ord*"}
    fill(driver, "new-user", username="bad:name", password="x")
    assert "INVALID_PARAMETER" in notice(driver, "INVALID_PARAMETER", "username")

    button = driver.find_element(By.CSS_SELECTOR, '[data-key="delete-policy:User:bob:Custom:Topic:ord*"]')
    button.click()
    assert button.text == "Confirm delete" and len(ok(site.get("access"))["policies"]) == 2  # not yet
    button.click()
    notice(driver, "Topic:ord* of User:bob deleted")
    assert [p["resource"] for p in ok(site.get("access"))["policies"]] == ["Topic:orders"]
    for _ in range(2):
        driver.find_element(By.CSS_SELECTOR, '[data-key="delete-user:bob"]').click()
    notice(driver, "user bob deleted")
    assert names(site) == {ROOT[0]}
    main = driver.find_element(By.ID, "main").text
    assert "bob-password" not in main and ROOT[1] not in main
    errors = console_errors(driver)  # the refused write's 400 (and the first load's 401) are network lines only
    assert [e for e in errors if e.get("source") != "network"] == [], errors


def test_a_viewer_sees_access_without_forms(site: Site, driver: webdriver.Chrome) -> None:
    log_in(driver, site, VIEWER)
    shown = open_view(driver, f"{site.url}/#/access", ROOT[0], "Only a dashboard admin")
    assert "New user" not in shown and "Delete" not in shown
    assert driver.find_elements(By.CSS_SELECTOR, "form") == []
