"""The Dagster UI, driven in headless Chromium against a real local webserver.

Needs Debian's ``chromium`` and ``chromium-driver`` and the ``selenium`` package (``.ci/run``
installs them; no browser is ever downloaded). The webserver runs in its own process group,
bound to 127.0.0.1, and is always stopped with its children.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import quote

import pytest

from retailsim_dagster.definitions import defs

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
selenium = pytest.importorskip("selenium", reason="selenium not installed (make test installs it)")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (CHROMIUM and DRIVER) and not os.environ.get("CI"),
        reason="Debian chromium + chromium-driver not installed (.ci/run installs them)",
    ),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def webserver(tmp_path_factory):
    home = tmp_path_factory.mktemp("dagster_home")
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    port = _free_port()
    env = {**os.environ, "DAGSTER_HOME": str(home), "DGLBACKEND": "pytorch"}
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("dagster-webserver")),
            "-m",
            "retailsim_dagster.definitions",
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
        ],
        cwd=ROOT,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                urllib.request.urlopen(f"{url}/server_info", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("the Dagster webserver did not start")
        yield url
    finally:
        # Its own process group: stop it and any children (code servers), then make sure.
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=15)
                break
            except subprocess.TimeoutExpired:
                continue


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1600,1000",
    ):
        opts.add_argument(arg)
    opts.binary_location = CHROMIUM
    driver = webdriver.Chrome(service=Service(DRIVER), options=opts)
    yield driver
    driver.quit()


def _text(driver, url: str, expect: str, timeout: float = 60) -> str:
    """Open ``url`` and wait until the page text contains ``expect``; dismiss the first-visit
    dialog.
    """
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    driver.get(url)
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:  # the page re-renders while it loads: elements found a moment ago may be gone
            for button in driver.find_elements(By.TAG_NAME, "button"):
                if button.text.strip() == "Skip":
                    button.click()
            body = driver.find_element(By.TAG_NAME, "body").text
        except StaleElementReferenceException:
            continue
        if expect in body:
            return body
        time.sleep(0.5)
    raise AssertionError(f"{url}: {expect!r} never appeared")


def test_asset_graph_partitions_and_checks_in_a_real_browser(webserver, browser, tmp_path):
    graph = defs.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    groups = {graph.get(k).group_name for k in graph.get_all_asset_keys()}
    lineage = _text(browser, f"{webserver}/asset-groups", sorted(groups)[-1])
    assert groups <= set(lineage.split())  # every group of the graph is drawn
    shown = set()
    for group in sorted(groups):  # each group's graph, expanded
        first = next(
            k.to_user_string()
            for k in graph.get_all_asset_keys()
            if graph.get(k).group_name == group
        )
        selection = quote('group:"' + group + '"')
        body = _text(browser, f"{webserver}/asset-groups~{selection}", first)
        shown |= {k for k in keys if k in body.split()}
    assert shown == keys
    browser.save_screenshot(str(tmp_path / "asset_graph.png"))
    partitions = _text(browser, f"{webserver}/assets/derived_prices?view=partitions", "2006-04-10")
    assert "117" in partitions
    checks = _text(
        browser, f"{webserver}/assets/derived_prices?view=checks", "rule_price_nonpositive"
    )
    assert "rule_depth_over_max" in checks
    shot = tmp_path / "derived_prices_checks.png"
    browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000


def test_evaluation_report_opens_in_a_real_browser(browser, tmp_path):
    """The self-contained report renders every section: tables, bar charts, reliability curves."""
    import polars as pl
    from selenium.webdriver.common.by import By

    from retailsim_core.report.html import render_report

    methods = ["world_model", "oracle", "P-TopFreq", "TIFU-KNN", "G-TopFreq"]
    nb = {
        m: {"R@20": 0.1 * (i + 1), "NDCG@10": 0.05 * (i + 1), "P@10": 0.02, "MRR": 0.3}
        for i, m in enumerate(methods)
    }
    mi = {m: {"Hit@10": 0.2, "NDCG@10": 0.1, "MRR": 0.1} for m in methods}
    metrics = {
        "next_basket": {"all": nb, "cold_start": nb, "bucket_1": nb},
        "masked_item": {"all": mi, "cold_start": mi, "bucket_1": mi},
    }
    calibration = pl.DataFrame(
        {
            "head": ["basket_size"] * 2,
            "bin": [5, 8],
            "samples": [10, 20],
            "confidence": [0.55, 0.85],
            "accuracy": [0.5, 0.8],
            "head_accuracy": [0.7, 0.7],
            "majority_accuracy": [0.4, 0.4],
            "ece": [0.05, 0.05],
        }
    )
    own = pl.DataFrame(
        {
            "product_id": ["P1", "P2"],
            "model_elasticity": [-1.2, -0.4],
            "planted_elasticity": [-1.5, -0.6],
        }
    )
    response = {
        "context": "test context",
        "contexts": 30,
        "own": own,
        "elasticities": pl.DataFrame(
            {"product_id": ["P1"], "other_id": ["P2"], "elasticity": [0.1], "kind": ["top_cross"]}
        ),
    }
    tuning = {
        "test_samples": 100,
        "validation_samples": 50,
        "planted_elasticity_correlation": 0.9,
        "simulation": {
            "simulated_mean_size": 5.0,
            "real_mean_size": 5.2,
            "mean_size_ratio": 5.0 / 5.2,
            "expected_contexts": 100,
            "expected_mean_size": 5.1,
            "expected_real_mean_size": 5.2,
            "expected_size_ratio": 5.1 / 5.2,
            "expected_size_ratio_interval": [0.95, 1.01],
        },
    }
    page = tmp_path / "report.html"
    page.write_text(render_report(metrics, calibration, tuning, response))
    browser.get(page.as_uri())
    text = browser.find_element(By.TAG_NAME, "body").text
    for section in (
        "Verdict",
        "Next basket",
        "Masked items",
        "R@20 by slice",
        "By history bucket",
        "calibration",
        "Price elasticities",
        "Simulated baskets",
    ):
        assert section in text, section
    assert "NOT better" in text  # world_model below P-TopFreq here: said plainly
    assert "expected size over all 100 scored contexts" in text and "0.981" in text  # D131
    assert len(browser.find_elements(By.CSS_SELECTOR, "table.verdict tr")) == 1 + 2 * 3
    assert "Against held-out promotions" not in text and "real-LGSR target" not in text
    _no_empty_section(browser)
    assert (
        len(browser.find_elements(By.TAG_NAME, "table")) >= 6
        and len(browser.find_elements(By.TAG_NAME, "svg")) >= 5
    )
    shot = tmp_path / "report.png"
    browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000


def _no_empty_section(browser) -> None:
    """Every h2 heading is followed by something of its own before the next heading."""
    from selenium.webdriver.common.by import By

    empty = browser.execute_script(
        "return [...document.querySelectorAll('h2')].filter(h => !h.nextElementSibling"
        " || ['H1', 'H2'].includes(h.nextElementSibling.tagName)).map(h => h.textContent)"
    )
    assert empty == [] and browser.find_elements(By.TAG_NAME, "h2")


def test_a_complete_journey_report_shows_what_belongs_to_its_source(browser, tmp_path):
    """Real shoppers without mission labels: the verdict as one table, test-week slices, no
    LGSR target, no empty calibration section, the tuning as a table with a link to its file."""
    import polars as pl
    from selenium.webdriver.common.by import By

    from retailsim_core.report.html import render_report

    methods = ["world_model", "P-TopFreq", "TIFU-KNN"]
    nb = {m: {"R@20": 0.18 + 0.01 * i, "NDCG@10": 0.17, "MRR": 0.3} for i, m in enumerate(methods)}
    mi = {m: {"Hit@10": 0.2, "NDCG@10": 0.1, "MRR": 0.1} for m in methods}
    slices = ("all", "test_44_48", "test_49_53", "bucket_5")
    metrics = {"next_basket": dict.fromkeys(slices, nb), "masked_item": dict.fromkeys(slices, mi)}
    bounds = {"next_basket": {"all": {"TIFU-KNN": {"diff_R@20": [-0.03, -0.01]}}}}
    nan = float("nan")
    calibration = pl.DataFrame(
        {
            "head": ["mission_type"],
            "bin": [0],
            "samples": [0],
            "confidence": [nan],
            "accuracy": [nan],
            "head_accuracy": [nan],
            "majority_accuracy": [nan],
            "ece": [nan],
        }
    )
    own = pl.DataFrame({"product_id": ["P1", "P2"], "model_elasticity": [-1.2, -0.4]})
    response = {
        "context": "test context",
        "contexts": 30,
        "own": own,
        "elasticities": pl.DataFrame(
            {"product_id": ["P1"], "other_id": ["P2"], "elasticity": [0.1], "kind": ["top_cross"]}
        ),
        "observed": {"own_spearman": -0.159, "own_spearman_ci": [-0.4, 0.1], "own_products": 40},
    }
    tuning = {
        "source": "completejourney",
        "test_samples": 6000,
        "validation_samples": 1500,
        "checkpoint": {"epochs": 9, "best_epoch": 7},
        "TIFU-KNN": {"k": 300, "alpha": 0.9, "valid_R@20": 0.204},
    }
    page = tmp_path / "report.html"
    page.write_text(render_report(metrics, calibration, tuning, response, bounds))
    browser.get(page.as_uri())
    text = browser.find_element(By.TAG_NAME, "body").text
    headings = [h.text for h in browser.find_elements(By.TAG_NAME, "h2")]
    assert headings[:2] == ["What each method sees", "Verdict"]
    assert "Next basket by test-week slice" in headings and "test_49_53" in text
    assert not any("calibration" in h for h in headings)  # no labels: no section
    rows = browser.find_elements(By.CSS_SELECTOR, "table.verdict tr")
    assert len(rows) == 1 + 2 * 2  # all weeks (the headline off LGSR): two baselines, two metrics
    tifu = next(r.text for r in rows if "TIFU-KNN R@20" in r.text)
    assert "[-0.0300, -0.0100]" in tifu and "NOT better" in tifu
    assert "real-LGSR target" not in text and "Against held-out promotions" not in text
    assert "tuning.json" in text and "300" in text and not browser.find_elements(By.TAG_NAME, "pre")
    _no_empty_section(browser)
    browser.save_screenshot(str(tmp_path / "cj_report.png"))
