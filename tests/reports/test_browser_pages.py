"""Opens the HTML report and checklist in headless Chromium (Debian's package, never `playwright install`)."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest

from reports.checklist import build_checklist, write_checklist
from reports.compat_report import write_report

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO / "out"
EXAMPLES = REPO / "fixtures" / "examples"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.xdist_group("browser"),
    pytest.mark.skipif(
        CHROMIUM is None, reason="chromium is not installed (run scripts/install-chromium.sh)"
    ),
]


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def open_page(browser):
    """Opens a file:// page, refusing every network request, and fails on any script error."""
    contexts, errors, network = [], [], []

    def open_file(path: Path):
        context = browser.new_context(viewport={"width": 1440, "height": 1000})
        contexts.append(context)

        def route(request_route):
            if request_route.request.url.startswith("file://"):
                request_route.continue_()
            else:
                network.append(request_route.request.url)
                request_route.abort()

        context.route("**/*", route)
        page = context.new_page()
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
        page.goto(path.resolve().as_uri())
        return page

    yield open_file
    for context in contexts:
        context.close()
    assert errors == [], errors
    assert network == [], f"the page tried to reach the network: {network}"


@pytest.fixture(scope="module")
def compat_html(tmp_path_factory):
    data = Path(__file__).parent / "data"
    output = tmp_path_factory.mktemp("report") / "compat.html"
    assert write_report([data / "results-sim.jsonl", data / "results-hw.jsonl"], output, "html") == 0
    return output


def visible_models(page) -> list[str]:
    return page.eval_on_selector_all(
        "#matrix tbody.arch", "bodies => bodies.filter(b => !b.hidden).map(b => b.dataset.model)"
    )


def test_numbers_shown_equal_the_results(open_page, compat_html, rows):
    page = open_page(compat_html)
    for run_index, name in enumerate(("results-sim", "results-hw")):
        for row in rows[name]:
            body = page.locator(f'#matrix tbody[data-model="{row["model_type"]}"]')
            cell = body.locator(f'td.verdict[data-run="{run_index}"]')
            assert cell.get_attribute("data-verdict") == row["verdict"]
            assert cell.inner_text().strip() == row["verdict"]
            for column, field in (("recompiles", "recompile_count"), ("graph-breaks", "graph_breaks")):
                shown = body.locator(f'td.{column}[data-run="{run_index}"]').inner_text()
                assert shown == str(row[field])
            assert body.locator(f'td.compiles[data-run="{run_index}"]').inner_text() == str(
                row["compile_count"]
            )
    all_models = {row["model_type"] for name in ("results-sim", "results-hw") for row in rows[name]}
    assert page.inner_text("#shown") == page.inner_text("#total") == str(len(all_models))
    # Headline: the simulated run's counts over the listed top architectures.
    headline = page.locator('.headline[data-run="0"]')
    with (Path(__file__).parent / "data" / "top100.csv").open() as handle:
        listed = {record["model_type"] for record in csv.DictReader(handle)}
    measured = [row for row in rows["results-sim"] if row["model_type"] in listed]
    expected = {
        "works": sum(row["verdict"] == "works" for row in measured),
        "works-with-caveats": sum(row["verdict"] == "works-with-caveats" for row in measured),
        "fails": sum(row["verdict"] in ("fails", "crash") for row in measured),
    }
    expected["not-measured"] = len(listed) - sum(expected.values())
    for bucket, count in expected.items():
        assert headline.locator(f'.figure[data-bucket="{bucket}"] .count').inner_text() == str(count)
    assert page.locator("#simulated-banner").is_visible()
    assert "89%" in page.inner_text("#claim") and "not measured here" in page.inner_text("#claim").lower()


def test_sorting(open_page, compat_html, rows):
    page = open_page(compat_html)
    page.click('#matrix th[data-sort="rc0"]')
    recompiles = {row["model_type"]: row["recompile_count"] for row in rows["results-sim"]}
    ascending = [model for model in visible_models(page) if model in recompiles]
    assert [recompiles[model] for model in ascending] == sorted(recompiles.values())
    assert visible_models(page)[-1] == "falcon"  # not in this run: missing values sort last
    page.click('#matrix th[data-sort="rc0"]')
    descending = [model for model in visible_models(page) if model in recompiles]
    assert [recompiles[model] for model in descending] == sorted(recompiles.values(), reverse=True)
    page.click('#matrix th[data-sort="model"]')
    assert visible_models(page) == sorted(visible_models(page))
    page.click('#matrix th[data-sort="rank"]')
    ranks = [row["rank"] for row in rows["results-sim"] if row["rank"] is not None] + [24]
    shown_ranks = page.eval_on_selector_all(
        "#matrix tbody.arch", "bodies => bodies.map(b => b.dataset.rank).filter(r => r !== '').map(Number)"
    )
    assert shown_ranks == sorted(ranks)


def test_filters(open_page, compat_html, rows):
    page = open_page(compat_html)
    every = rows["results-sim"] + rows["results-hw"]

    def expect(models: set[str]):
        assert set(visible_models(page)) == models
        assert page.inner_text("#shown") == str(len(models))

    page.select_option("#f-verdict", "fails")
    expect({row["model_type"] for row in every if row["verdict"] == "fails"})
    page.select_option("#f-verdict", "not-works")
    expect({row["model_type"] for row in every if row["verdict"] != "works"})
    page.click("#reset-filters")
    page.select_option("#f-recompiles", "1")
    expect({row["model_type"] for row in every if row["recompile_count"] >= 1})
    page.select_option("#f-recompiles", "")
    page.select_option("#f-breaks", "1")
    expect({row["model_type"] for row in every if row["graph_breaks"] >= 1})
    page.click("#reset-filters")
    page.select_option("#f-band", "11-25")
    expect({row["model_type"] for row in every if row["rank"] and 11 <= row["rank"] <= 25})
    page.click("#reset-filters")
    page.select_option("#f-change", "regressed")
    expect({"mistral"})
    page.click("#reset-filters")
    page.fill("#f-search", "UNIQUE2")
    expect({"gpt2"})
    page.click("#reset-filters")
    expect({row["model_type"] for row in every})


def test_evidence_expands_and_screenshot(open_page, compat_html, rows):
    page = open_page(compat_html)
    evidence = page.locator('#matrix tbody[data-model="gpt2"] tr.evidence')
    assert not evidence.is_visible()
    page.click('#matrix tbody[data-model="gpt2"] td.verdict[data-run="0"] button')
    assert evidence.is_visible()
    gpt2 = next(row for row in rows["results-sim"] if row["model_type"] == "gpt2")
    text = evidence.inner_text()
    assert gpt2["error"] in text and gpt2["unsupported_ops"][0] in text and "What to do" in text
    assert page.locator('#matrix tbody[data-model="llama"] button.evidence-toggle').count() == 0  # green rows
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "compat-report.png"), full_page=True)
    assert (SCREENSHOTS / "compat-report.png").stat().st_size > 10_000


def test_checklist_page(open_page, tmp_path, rows):
    data = Path(__file__).parent / "data"
    output = tmp_path / "checklist.html"
    assert write_checklist([EXAMPLES], output, data / "results-sim.jsonl", False) == 0
    context = build_checklist([EXAMPLES], data / "results-sim.jsonl", online=False)
    page = open_page(output)
    items = (
        len(context["blocking"])
        + len(context["model_items"])
        + sum(len(s.items) for s in context["sections"])
    )
    platform = 1 + len(context["requirements"]) + len(context["removals"])
    assert page.inner_text("#total-tasks") == str(items + platform)
    assert page.inner_text("#summary .count-blocking") == str(context["counts"]["blocking"])
    assert page.locator("#blocking li.task").count() == context["counts"]["blocking"]
    qwen3 = next(row for row in rows["results-sim"] if row["model_type"] == "qwen3")
    row = page.locator('#models-table tr[data-reference="Qwen/Qwen3-0.6B"]')
    assert row.locator("td.verdict").inner_text() == qwen3["verdict"]
    assert row.locator("td.recompiles").inner_text() == str(qwen3["recompile_count"])
    page.check("#task-1")
    assert page.inner_text("#done") == "1"
    page.reload()
    assert page.is_checked("#task-1") and page.inner_text("#done") == "1"
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "checklist.png"), full_page=True)
