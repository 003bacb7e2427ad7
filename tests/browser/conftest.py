"""The browser tier: headless Chromium (Debian's chromium and chromedriver) driving the
portal on a live server, where grades are made for real (Docker, Redis). The browser is
started by helpers.browser.chromium(); nothing else is shared yet beyond tests/conftest.py."""
