"""report.html in a real browser: headless Chromium (Debian's `chromium` + `chromium-driver`, driven by
selenium; nothing is downloaded at run time) renders an equivalent and a divergent report, and the test
reads what the page shows. A report whose traces carry markup shows it as text and runs nothing.

Screenshots are kept under the test's tmp dir (their paths are printed: `pytest -s` shows them).
Without Chromium the tests are skipped with the reason, never passed."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_html import DIVERGES_AT, IMG, SCRIPT, make_report_dir

from ddp_parity.compare.findings import Report
from ddp_parity.compare.html import CAUSAL_ORDER, write_html
from ddp_parity.compare.report import table_rows

pytestmark = pytest.mark.slow  # a browser is a tree of processes

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
# a closed machine: no network, no first-run work, no sandbox (root in a container), no GPU
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1200,1000",
)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if missing:
        pytest.skip(
            f"browser test needs Debian's chromium and chromium-driver ({', '.join(missing)} missing): "
            "apt-get install -y chromium chromium-driver"
        )
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("browser test needs selenium: pip install -e '.[dev]' -c constraints.txt")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def open_report(browser, out: Path, report: dict, shot: Path):
    """Write report.html, load it from file://, keep a full-page screenshot."""
    page = write_html(out, Report.from_json(report))
    browser.set_window_size(1200, 1000)
    browser.get(page.as_uri())
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(1200, min(int(height) + 120, 8000))
    assert browser.save_screenshot(str(shot)), f"no screenshot written to {shot}"
    print(f"screenshot: {shot}")
    return browser


def text_of(browser, element_id: str) -> str:
    from selenium.webdriver.common.by import By

    return browser.find_element(By.ID, element_id).text


def table_cells(browser, element_id: str) -> list[list[str]]:
    from selenium.webdriver.common.by import By

    table = browser.find_element(By.ID, element_id)
    return [
        [cell.text for cell in row.find_elements(By.TAG_NAME, "td")]
        for row in table.find_elements(By.TAG_NAME, "tr")[1:]
    ]


def assert_plot_shown(browser) -> None:
    from selenium.webdriver.common.by import By

    image = browser.find_element(By.ID, "loss-curves")
    width, height = browser.execute_script(
        "const i = arguments[0]; return [i.complete ? i.naturalWidth : 0, i.naturalHeight];", image
    )
    assert width > 0 and height > 0, "the loss-curve image did not load"
    assert image.get_attribute("src").startswith("data:image/png;base64,")


def expected_rows(report: dict) -> list[list[str]]:
    per_step = report["per_step"]
    return table_rows(Report.from_json({**report, "per_step": {k: per_step[k] for k in CAUSAL_ORDER if k in per_step}}))


def test_equivalent_report_in_chromium(browser, tmp_path):
    out, report = make_report_dir(tmp_path, divergent=False)
    assert report["verdict"] == "equivalent"
    open_report(browser, out, report, tmp_path / "equivalent.png")
    assert text_of(browser, "verdict").startswith("verdict: EQUIVALENT")
    assert text_of(browser, "diagnosis-line") == "diagnosis: equivalent"
    assert table_cells(browser, "summary") == expected_rows(report)
    assert_plot_shown(browser)
    assert "First differing steps" not in browser.find_element("tag name", "body").text


def test_divergent_report_in_chromium(browser, tmp_path):
    out, report = make_report_dir(tmp_path, divergent=True)
    assert report["verdict"] == "different"
    open_report(browser, out, report, tmp_path / "divergent.png")
    assert text_of(browser, "verdict").startswith("verdict: DIFFERENT")
    assert text_of(browser, "diagnosis-line") == f"diagnosis: undetermined at step {DIVERGES_AT} rank 0"
    assert text_of(browser, "diagnosis-fix").startswith("fix: ")
    rows = table_cells(browser, "summary")
    assert rows == expected_rows(report)
    assert [r[0] for r in rows][:2] == ["samples/step", "loss/step"]
    assert_plot_shown(browser)
    steps = table_cells(browser, "steps-rank0")
    first_loss = next(r for r in steps if r[1] == "loss" and r[0] == str(DIVERGES_AT))
    divergence = report["per_step"]["loss"]["first_divergence"]
    assert first_loss[2:] == [repr(divergence["a"]), repr(divergence["b"])]
    marked = browser.find_elements("css selector", "#steps-rank0 mark")
    assert marked, "the differing digits are not marked"


def test_markup_from_traces_shows_as_text_and_runs_nothing(browser, tmp_path):
    out, report = make_report_dir(tmp_path, divergent=True, hostile=True)
    open_report(browser, out, report, tmp_path / "hostile.png")
    assert browser.execute_script("return typeof window.__pwned") == "undefined", "a script from a trace ran"
    assert browser.title == f"ddp-parity: DIFFERENT (raw vs lightning</title>{SCRIPT})"
    assert "PWNED" != browser.title
    body = browser.find_element("tag name", "body").text
    assert SCRIPT in body and IMG in body  # the literal text, visible
    config = {row[0]: row[1:] for row in table_cells(browser, "config")}
    assert config["config.run_name"] == [SCRIPT, IMG]
    module = {row[0]: row[1] for row in table_cells(browser, "module")}
    assert module["name"] == SCRIPT and module["type"] == IMG
    assert not browser.find_elements("css selector", "body script, body img:not(#loss-curves)")
