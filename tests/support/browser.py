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
    """Load ``url`` (a dashboard page) and wait until the view is rendered and its main part shows every one of
    ``texts``; the main part's text."""
    driver.get(url)
    return wait_text(driver, *texts, timeout=timeout)


def wait_text(driver: webdriver.Chrome, *texts: str, timeout: float = 30.0) -> str:
    """Wait until the rendered view's main part shows every one of ``texts``; its text."""
    deadline = time.monotonic() + timeout
    shown = ""
    while time.monotonic() < deadline:
        ready = driver.execute_script("return document.body.dataset.ready || ''")
        if ready:
            shown = driver.find_element(By.ID, "main").text
            if all(t in shown for t in texts):
                return str(shown)
        time.sleep(0.1)
    missing = [t for t in texts if t not in shown]
    raise AssertionError(f"{driver.current_url}: {missing} not shown within {timeout}s; the page shows:\n"
                         f"{shown[:3000]}")  # fmt: skip


def screenshot(driver: webdriver.Chrome, path: Path, min_height: int = 700) -> Path:
    """The whole page (the window grown to its height) as a PNG at ``path``."""
    height = int(driver.execute_script("return Math.ceil(document.documentElement.scrollHeight)"))
    driver.set_window_size(WIDTH, max(min_height, min(height, 4000)))
    time.sleep(0.2)
    path.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(path))
    return path


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) of a PNG file; AssertionError when it is not one."""
    data = path.read_bytes()
    if not data.startswith(PNG_MAGIC) or data[12:16] != b"IHDR":
        raise AssertionError(f"{path} is not a PNG")
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def console_errors(driver: webdriver.Chrome) -> list[dict[str, Any]]:
    """The browser console's SEVERE entries since the last call (a blocked inline script, a script error)."""
    return [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
