"""A real browser for the console's tests: Debian's chromium, driven by Selenium through Debian's
chromedriver (`make setup` installs both; Selenium never downloads a driver here).

`KRM_SCREENSHOTS=DIR` makes `shot()` save PNGs there (README's console pictures come from it:
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
