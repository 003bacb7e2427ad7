"""Headless Chromium through Debian's chromedriver, for the portal's browser tests."""

from __future__ import annotations

import shutil

import pytest


def chromium(*, javascript: bool = True, width: int = 1280):
    """Headless Chromium; `javascript=False` turns scripts off for every page (what a
    page promises to do without a script is then all it can do); `width` the window's."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service as ChromeService

    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not chromium or not driver:
        pytest.fail("chromium and chromedriver are not installed: run bash scripts/setup.sh", pytrace=False)
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for arg in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        f"--window-size={width},1000",
        "--disable-dev-shm-usage",
    ):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    if not javascript:
        opts.add_experimental_option("prefs", {"profile.managed_default_content_settings.javascript": 2})
    browser = webdriver.Chrome(service=ChromeService(driver), options=opts)
    browser.implicitly_wait(5)  # a click that navigates may return before the next page is there
    return browser
