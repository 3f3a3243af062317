"""A real browser for the dashboard's tests and screenshots: Debian's ``chromium`` headless, driven through Debian's
``chromedriver`` by selenium (packages ``chromium`` and ``chromium-driver``; scripts/test.sh installs them).

A missing browser is a failure, never a skip: the dashboard's browser tests are part of the suite.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webelement import WebElement

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
WIDTH = 1440


def chrome(profile: Path, height: int = 900) -> webdriver.Chrome:
    """Headless chromium (its own profile folder ``profile``); AssertionError naming the packages when missing."""
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if binary is None or driver is None:
        raise AssertionError("the dashboard's browser tests need Debian's chromium and chromedriver: "
                             "apt-get install chromium chromium-driver (scripts/test.sh installs them)")  # fmt: skip
    opts = Options()
    opts.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
                f"--window-size={WIDTH},{height}", f"--user-data-dir={profile}", "--force-device-scale-factor=1",
                "--lang=en-US", "--no-first-run", "--disable-extensions"):  # fmt: skip
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=opts, service=Service(executable_path=driver))


def open_view(driver: webdriver.Chrome, url: str, *texts: str, timeout: float = 30.0) -> str:
    """Load ``url`` (a dashboard page; reloaded when it is the one shown) and wait until its view is rendered and
    its main part shows every one of ``texts``; the main part's text."""
    if driver.current_url == url:
        driver.refresh()  # the same link again would not render anew
    else:
        driver.get(url)
    return wait_text(driver, *texts, timeout=timeout)


_RENDERED = """
const b = document.body;
return Boolean(b && b.dataset.ready && b.dataset.hash === location.hash);
"""
"""Whether the page shows the view of its current link (app.js sets ``ready`` and ``hash`` once a view is in)."""


def wait_text(driver: webdriver.Chrome, *texts: str, timeout: float = 30.0) -> str:
    """Wait until the view of the page's current link is rendered and its main part shows every one of
    ``texts``; its text."""
    deadline = time.monotonic() + timeout
    shown = ""
    while time.monotonic() < deadline:
        if driver.execute_script(_RENDERED):
            shown = driver.find_element(By.ID, "main").text
            if all(t in shown for t in texts):
                return str(shown)
        time.sleep(0.1)
    missing = [t for t in texts if t not in shown]
    raise AssertionError(f"{driver.current_url}: {missing} not shown within {timeout}s; the page shows:\n"
                         f"{shown[:3000]}")  # fmt: skip


MAX_SHOT_HEIGHT = 4000
"""Pages taller than this (CSS pixels) are cut there."""


def screenshot(driver: webdriver.Chrome, path: Path, min_height: int = 700) -> Path:
    """The whole page (the viewport grown to its height, at most ``MAX_SHOT_HEIGHT``) as a PNG at ``path``.

    The window's size is not the viewport's: the window keeps some height for itself, so the window is grown by
    that difference and the viewport checked to hold the page (else the bottom of the page would be cut off)."""
    want = 0
    for _ in range(5):  # the layout may change with the width or the height: measure again until it holds
        page = int(driver.execute_script("return Math.ceil(document.documentElement.scrollHeight)"))
        want = max(min_height, min(page, MAX_SHOT_HEIGHT))
        inner, outer = driver.execute_script("return [window.innerHeight, window.outerHeight]")
        if int(inner) == want:
            break
        driver.set_window_size(WIDTH, want + int(outer) - int(inner))
        time.sleep(0.2)
    path.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(path))
    return path


_LOCAL_PARTS = """
const d = new Date(arguments[0]);
const pad = (x) => String(x).padStart(2, "0");
const h = d.getHours() % 12 || 12;
return [pad(d.getMonth() + 1) + pad(d.getDate()) + String(d.getFullYear()).padStart(4, "0"),
        pad(h) + pad(d.getMinutes()) + pad(d.getSeconds()) + (d.getHours() < 12 ? "AM" : "PM")];
"""


def type_datetime(driver: webdriver.Chrome, field: WebElement, ms: int) -> str:
    """Type the time ``ms`` (epoch milliseconds, to the second) into the ``datetime-local`` input ``field`` as a
    person does, in the browser's own time zone (chromium runs with ``--lang=en-US``: month, day, year, then hour,
    minute, second, AM/PM); the field's value afterwards."""
    date, clock = driver.execute_script(_LOCAL_PARTS, ms)
    field.send_keys(str(date), Keys.TAB, str(clock))  # the year takes up to 6 digits: Tab moves on to the hour
    return str(field.get_attribute("value"))


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) of a PNG file; AssertionError when it is not one."""
    data = path.read_bytes()
    if not data.startswith(PNG_MAGIC) or data[12:16] != b"IHDR":
        raise AssertionError(f"{path} is not a PNG")
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def console_errors(driver: webdriver.Chrome) -> list[dict[str, Any]]:
    """The browser console's SEVERE entries since the last call (a blocked inline script, a script error)."""
    entries: list[dict[str, Any]] = driver.get_log("browser")  # type: ignore[no-untyped-call]
    return [e for e in entries if e.get("level") == "SEVERE"]
