"""A real browser for the console's tests: Debian's chromium, driven by Selenium through Debian's
chromedriver (`make setup` installs both; Selenium never downloads a driver here).

`KRM_SCREENSHOTS=DIR` makes `shot()` save PNGs there (docs' console pictures come from it:
`KRM_SCREENSHOTS=docs/images .venv/bin/python -m pytest tests/e2e/test_prometheus_alertmanager.py`).
"""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


@contextmanager
def chromium(width: int = 1280, height: int = 900) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary = shutil.which("chromium") or CHROMIUM
    driver_path = shutil.which("chromedriver") or CHROMEDRIVER
    assert Path(binary).exists() and Path(driver_path).exists(), \
        "chromium / chromedriver missing: `make setup` installs Debian's chromium and chromium-driver"
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={width},{height}", "--ignore-certificate-errors"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def shot(driver: Any, name: str) -> None:
    folder = os.environ.get("KRM_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(folder) / f"{name}.png"))


HEADS = ("return Array.from(document.querySelectorAll('[id^=\"head-\"]'))"
         ".map(function (e) { return [e.id.slice(5), e.className, e.innerText]; })")


class LiveWatch:
    """A console page left open in chromium and never reloaded: a thread reads what its live part shows
    every `every_s` (`script`'s answer, by default each broker head of a cluster's grid: id, class, text),
    so a test sees what an on-call watching the screen saw, when. Only the thread drives the browser
    until `stop()`; then the caller may (a screenshot)."""

    def __init__(self, url: str, script: str = HEADS, every_s: float = 0.5) -> None:
        import threading

        self.url, self.script, self.every_s = url, script, every_s
        self.seen: list[tuple[float, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="live-watch", daemon=True)
        self._browser_cm = chromium()
        self.browser: Any = None
        self.errors: list[str] = []

    def __enter__(self) -> "LiveWatch":
        self.browser = self._browser_cm.__enter__()
        self.browser.get(self.url)
        self.browser.execute_script("window.__krmNotReloaded = true;")
        self._thread.start()
        return self

    def _run(self) -> None:
        import time

        while not self._stop.wait(self.every_s):
            try:
                self.seen.append((time.time(), self.browser.execute_script(self.script)))
            except Exception as e:  # noqa: BLE001 - recorded; the test asserts on what was seen
                self.errors.append(repr(e))

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)

    def close(self) -> None:
        self.__exit__(None, None, None)

    def reloaded(self) -> bool:
        """The page was loaded again since it opened (the live part must change without that)."""
        return not self.browser.execute_script("return window.__krmNotReloaded === true;")

    def __exit__(self, *exc: Any) -> None:
        self.stop()
        if self.browser is not None:
            self.browser = None
            self._browser_cm.__exit__(*exc)

    def heads(self, broker: int) -> list[tuple[float, str, str]]:
        """(time, class, text) of one broker's head, each time it was read."""
        return [(t, cls, text) for t, rows in self.seen for b, cls, text in rows or () if b == str(broker)]
