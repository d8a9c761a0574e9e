"""Opens the HTML report and checklist in headless Chromium (Debian's package, never `playwright install`),
as a reader would, and checks what is shown against the results. Screenshots go to out/."""

from __future__ import annotations

import csv
import json
import shutil
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from compat_matrix.schema import Row
from reports.checklist import build_checklist, write_checklist
from reports.compat_report import reason_parts, write_report
from reports.vocabulary import bucket_of
from tests.reports.conftest import measured
from tests.reports.test_checklist import INFERENCE_SCRIPT, fake_analyze, finding

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
DATA = Path(__file__).parent / "data"
DASH = "–"

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
    """Opens a file:// page (optionally with a fragment), refusing every network request, and fails on any
    script error."""
    contexts, errors, network = [], [], []

    def open_file(path: Path, fragment: str = "", width: int = 1440):
        context = browser.new_context(viewport={"width": width, "height": 1000})
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
        page.goto(path.resolve().as_uri() + fragment)
        return page

    yield open_file
    for context in contexts:
        context.close()
    assert errors == [], errors
    assert network == [], f"the page tried to reach the network: {network}"


def reload_until_ticked(page, checkbox: str, seconds: float = 10.0) -> None:
    """Reloads the page until the checkbox shows its tick, for at most `seconds`. Chromium hands a page's
    localStorage write to its browser process asynchronously, and the reloaded document may read before it
    lands (seen once on a loaded CI machine); a tick that was never stored still fails the caller."""
    deadline = time.monotonic() + seconds
    page.reload()
    while not page.locator(checkbox).is_checked() and time.monotonic() < deadline:
        page.wait_for_timeout(100)
        page.reload()


def screenshot(page, name: str, full_page: bool = True) -> Path:
    SCREENSHOTS.mkdir(exist_ok=True)
    path = SCREENSHOTS / name
    page.screenshot(path=str(path), full_page=full_page)
    assert path.stat().st_size > 5_000
    return path


def stated_reasons(row: dict) -> list[str]:
    """The reasons the report shows for a row as written in a file (of any schema version), one per stage."""
    return reason_parts(Row.from_dict(row).to_dict())


def kept_rows(name: str) -> dict[str, dict]:
    """The rows of a results file as the report keeps them: a later row for an architecture wins."""
    lines = (DATA / name).read_text().splitlines()
    return {row["model_type"]: row for row in map(json.loads, filter(None, lines))}


@pytest.fixture(scope="module")
def compat_html(tmp_path_factory):
    output = tmp_path_factory.mktemp("report") / "compat.html"
    assert write_report([DATA / "results-v2-sim.jsonl", DATA / "results-v2-hw.jsonl"], output, "html") == 0
    return output


@pytest.fixture(scope="module")
def single_run_html(tmp_path_factory):
    output = tmp_path_factory.mktemp("single") / "compat.html"
    assert write_report([DATA / "results-v2-sim.jsonl"], output, "html") == 0
    return output


def visible_models(page) -> list[str]:
    return page.eval_on_selector_all(
        "#matrix tbody.arch", "bodies => bodies.filter(b => !b.hidden).map(b => b.dataset.model)"
    )


def test_numbers_verdicts_and_nulls_shown_equal_the_results(open_page, compat_html):
    page = open_page(compat_html)
    for run_index, name in enumerate(("results-v2-sim.jsonl", "results-v2-hw.jsonl")):
        for model_type, row in kept_rows(name).items():
            body = page.locator(f"#arch-{model_type}")
            cell = body.locator(f'td.verdict[data-run="{run_index}"]')
            assert cell.get_attribute("data-verdict") == row["verdict"]
            assert cell.inner_text().strip() == row["verdict"]
            for stage in ("generate", "train"):
                shown = body.locator(f'td.stage.{stage}[data-run="{run_index}"]').inner_text().strip()
                assert shown == (row[f"{stage}_verdict"] or DASH), (model_type, stage)
            for column, field in (
                ("recompiles", "recompile_count"),
                ("graph-breaks", "graph_breaks"),
                ("compiles", "compile_count"),
            ):
                shown = body.locator(f'td.{column}[data-run="{run_index}"]').inner_text().split(" ")[0]
                assert shown == (DASH if measured(row, field) is None else str(row[field])), (
                    model_type,
                    field,
                )
            why = body.locator(f'td.why[data-run="{run_index}"]')
            assert why.get_attribute("data-cause") == (row["cause"] or "")
            # Each stage's part of the reason on its own line, in full.
            assert why.locator(".reason .part").all_inner_texts() == stated_reasons(row)
    # Not measured is never shown as 0, in the table or in the evidence.
    gemma = page.locator("#arch-gemma")
    gemma.locator('td.verdict[data-run="0"] button').click()
    evidence = gemma.locator("tr.evidence").inner_text()
    assert f"Compiles / recompiles\n{DASH} / {DASH}" in evidence and f"Graph breaks\n{DASH}" in evidence
    assert "harness" in evidence and "could not be built" in evidence
    # The recompile count of a cache guard is marked as growing with every decode step.
    assert "every step" in page.locator('#arch-qwen3 td.recompiles[data-run="0"]').inner_text()
    all_models = set(kept_rows("results-v2-sim.jsonl")) | set(kept_rows("results-v2-hw.jsonl"))
    assert page.inner_text("#shown") == page.inner_text("#total") == str(len(all_models))
    assert page.locator("#simulated-banner").is_visible()
    assert "89%" in page.inner_text("#claim") and "not measured here" in page.inner_text("#claim").lower()


def test_headline_chart_and_filters_agree_with_the_results(open_page, single_run_html):
    page = open_page(single_run_html)
    rows = kept_rows("results-v2-sim.jsonl")
    with (DATA / "top100.csv").open() as handle:
        listed = {record["model_type"] for record in csv.DictReader(handle)}
    headline = page.locator('.headline[data-run="0"]')
    shown_buckets = headline.locator(".figure").evaluate_all("figures => figures.map(f => f.dataset.bucket)")
    for bucket in shown_buckets:
        expected = sum(
            bucket_of(row["verdict"], row["cause"]) == bucket
            for row in rows.values()
            if row["model_type"] in listed
        )
        if bucket == "not-measured":
            expected += len(listed - set(rows))
        assert headline.locator(f'.figure[data-bucket="{bucket}"] .count').inner_text() == str(expected), (
            bucket
        )
        # The band chart's segments over the ranked bands add up to the same figures.
        segments = page.eval_on_selector_all(
            f'#charts rect[data-segment="{bucket}"]',
            "rects => rects.filter(r => r.dataset.band !== 'unranked').map(r => Number(r.dataset.count))",
        )
        no_row = page.eval_on_selector_all(
            '#charts rect[data-segment="no row"]', "rects => rects.map(r => Number(r.dataset.count))"
        )
        assert sum(segments) + (sum(no_row) if bucket == "not-measured" else 0) == expected, bucket
    bins = dict(
        page.eval_on_selector_all(
            "#charts rect[data-bin]", "rects => rects.map(r => [r.dataset.bin, Number(r.dataset.count)])"
        )
    )

    def shown_for(option: str) -> int:
        page.select_option("#f-recompiles", option)
        count = int(page.inner_text("#shown"))
        assert count == len(visible_models(page))
        return count

    counted = [row for row in rows.values() if measured(row, "recompile_count") is not None]
    assert shown_for("0") == bins["0"] == sum(row["recompile_count"] == 0 for row in counted)
    assert shown_for("1") == sum(count for label, count in bins.items() if label != "0")
    assert shown_for("null") == len(rows) - len(counted) > 0
    assert shown_for("step") == sum(bool(row["recompiles_every_step"]) for row in rows.values())
    page.select_option("#f-recompiles", "")
    page.select_option("#f-breaks", "0")
    assert set(visible_models(page)) == {
        model for model, row in rows.items() if measured(row, "graph_breaks") == 0
    }
    page.click("#reset-filters")
    page.select_option("#f-bucket", "fails-transformers")
    assert visible_models(page) == ["gemma3_text"]
    page.select_option("#f-bucket", "not-measured-simulator")
    assert visible_models(page) == ["qwen3_moe"]
    page.select_option("#f-bucket", "not-measured-harness")
    assert visible_models(page) == ["gemma"]
    page.select_option("#f-bucket", "not-measured")
    assert visible_models(page) == ["phi3"]  # timeout


def test_runs_side_by_side_with_changes_replacements_and_time(open_page, compat_html):
    page = open_page(compat_html)
    labels = page.eval_on_selector_all("#matrix th.run-head", "heads => heads.map(h => h.textContent)")
    assert labels[0].startswith("results-v2-sim.jsonl · neuron-sim (simulated)")
    assert labels[1].startswith("results-v2-hw.jsonl · neuron")
    expected = {
        "gpt2": "fixed",
        "qwen3": "regressed",
        "qwen2": "changed",
        "gemma": "missing",
        "falcon": "new",
    }
    for model_type, change in expected.items():
        assert page.inner_text(f'#arch-{model_type} td.change[data-run="1"]') == change
    assert "not in this run" in page.inner_text('#arch-gemma td.absent[data-run="1"]')
    summary = page.locator('.change-table tr[data-change="fixed"]').inner_text()
    assert "gpt2" in summary and "gemma2" in summary
    replaced = page.locator('#replaced-table tr[data-model="opt"]').inner_text()
    assert "results-v2-sim.jsonl:11" in replaced and "results-v2-sim.jsonl:13" in replaced
    assert page.inner_text('#env td.measured[data-run="0"]') == "2026-11-29 18:00 UTC to 2026-11-29 18:40 UTC"
    assert page.inner_text('#env td.measured[data-run="1"]') == "2026-11-30 09:00 UTC to 2026-11-30 09:40 UTC"
    assert "never blended" in page.inner_text("#runs-note")


def test_older_schema_rows_render_beside_current_ones(open_page, tmp_path):
    output = tmp_path / "compat.html"
    assert write_report([DATA / "results-v2-sim.jsonl", DATA / "results-sim.jsonl"], output, "html") == 0
    page = open_page(output)
    assert "older schema for 12 row(s)" in page.inner_text('#env td.schema[data-run="1"]')
    gpt2 = page.locator("#arch-gpt2")
    assert gpt2.locator('td.verdict[data-run="1"]').inner_text().startswith("fails")
    assert "older schema" in gpt2.locator('td.verdict[data-run="1"]').inner_text()
    assert "not split" in gpt2.locator('td.older-split[data-run="1"]').inner_text()
    assert "aten::_unique2 has no neuron lowering" in gpt2.locator('td.why[data-run="1"]').inner_text()
    assert (
        page.locator('.headline[data-run="1"] .figure[data-bucket="fails-unattributed"] .count').inner_text()
        == "3"
    )


@pytest.mark.parametrize(
    ("query", "expected", "hint"),
    [
        ("Qwen3ForCausalLM", {"qwen3"}, ""),
        ("Qwen/Qwen3-8B", {"qwen3"}, "Qwen/Qwen3-8B is qwen3"),
        ("meta-llama/Llama-3.1-8B-Instruct", {"llama"}, "is llama"),
        ("UNIQUE2MARK", {"gpt2"}, ""),  # the reason
        ("neuron out of hbm", {"opt"}, ""),  # the error text
        ("cumulative_length_int", {"qwen3"}, ""),  # recompile reasons and guard
        ("sliding_window_mask", {"mistral"}, ""),  # graph-break reasons
        ("aten::_grouped_mm", {"qwen3_moe"}, ""),  # unsupported ops
        ("aten::nonzero", {"mistral"}, ""),  # CPU fallback ops
    ],
)
def test_search(open_page, compat_html, query, expected, hint):
    page = open_page(compat_html)
    page.fill("#f-search", query)
    assert set(visible_models(page)) == expected
    assert hint in page.inner_text("#search-hint")


def test_filters_sort_and_anchors_live_in_the_url(open_page, compat_html):
    page = open_page(compat_html)
    page.select_option("#f-verdict", "fails")
    page.fill("#f-search", "device")
    page.click('#matrix th[data-sort="rc0"]')
    page.click('#matrix th[data-sort="rc0"]')
    fragment = page.evaluate("location.hash")
    assert (
        "verdict=fails" in fragment
        and "q=device" in fragment
        and "sort=rc0" in fragment
        and "dir=desc" in fragment
    )
    shown = visible_models(page)
    assert shown
    # The link reproduces the view: same filters, same order.
    again = open_page(compat_html, fragment)
    assert again.input_value("#f-verdict") == "fails" and again.input_value("#f-search") == "device"
    assert again.get_attribute('#matrix th[data-sort="rc0"]', "aria-sort") == "descending"
    assert visible_models(again) == shown
    # A row anchor opens that row's evidence and brings it into view.
    anchored = open_page(compat_html, "#arch-gemma2")
    assert anchored.locator("#arch-gemma2 tr.evidence").is_visible()
    assert anchored.locator("#arch-gemma2 th.model").is_visible()
    box = anchored.locator("#arch-gemma2 th.model").bounding_box()
    assert 0 <= box["y"] <= 1000


def test_sort_headers_work_from_the_keyboard(open_page, compat_html):
    page = open_page(compat_html)
    headers = page.locator("#matrix th[data-sort]")
    assert headers.count() > 5
    assert set(headers.evaluate_all("hs => hs.map(h => h.tabIndex)")) == {0}
    assert set(headers.evaluate_all("hs => hs.map(h => h.getAttribute('aria-sort'))")) == {"none"}
    page.focus('#matrix th[data-sort="model"]')
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.dataset.sort") == "v0"  # the next sortable header
    page.keyboard.press("Enter")
    assert page.get_attribute('#matrix th[data-sort="v0"]', "aria-sort") == "ascending"
    page.keyboard.press(" ")
    assert page.get_attribute('#matrix th[data-sort="v0"]', "aria-sort") == "descending"
    assert page.get_attribute('#matrix th[data-sort="model"]', "aria-sort") == "none"
    rows = kept_rows("results-v2-sim.jsonl")
    order = page.eval_on_selector_all("#matrix tbody.arch", "bodies => bodies.map(b => b.dataset.v0 || '')")
    measured = [int(value) for value in order if value != ""]
    assert measured == sorted(measured, reverse=True) and len(measured) == len(rows)
    assert order[-1] == ""  # falcon has no row in the first run: it sorts last either way


def test_wide_table_scrolls_in_its_box_with_the_architecture_column_fixed(open_page, compat_html):
    page = open_page(compat_html, width=1400)
    assert page.evaluate("document.documentElement.scrollWidth") <= 1400
    scroll = page.locator("#matrix-scroll")
    assert scroll.evaluate("box => box.scrollWidth > box.clientWidth")
    box_left = scroll.bounding_box()["x"]
    scroll.evaluate("box => { box.scrollLeft = box.scrollWidth; }")
    assert scroll.evaluate("box => box.scrollLeft") > 500
    # Scrolled to the last run's columns, the architecture column is still there, at the box's left edge.
    for model_type in ("llama", "falcon"):
        cell = page.locator(f"#arch-{model_type} th.model").bounding_box()
        assert cell["x"] == pytest.approx(box_left + 1, abs=1)
    header = page.locator("#matrix thead th.model").bounding_box()
    assert header["x"] == pytest.approx(box_left + 1, abs=1)
    page.locator("#matrix-section").scroll_into_view_if_needed()
    screenshot(page, "compat-wide-scrolled.png", full_page=False)


def test_narrow_screen_has_no_sideways_page_scroll(open_page, compat_html):
    page = open_page(compat_html, width=420)
    assert page.evaluate("document.documentElement.scrollWidth") <= 420
    assert page.locator("#matrix-scroll").evaluate("box => box.scrollWidth > box.clientWidth")
    # Pills and headline figures are whole, not cut.
    cut = page.eval_on_selector_all(
        ".pill, .figure",
        "els => els.filter(e => e.offsetParent && e.scrollWidth > e.clientWidth + 1).map(e => e.textContent)",
    )
    assert cut == []
    chart = page.locator("#charts svg.chart").first.bounding_box()
    assert chart["x"] + chart["width"] <= 420
    screenshot(page, "compat-420px.png")
    # Opened evidence fits the screen: long guards and op names wrap instead of running off the right edge.
    page.locator('#arch-qwen3 td.verdict[data-run="0"] button').click()
    evidence = page.locator("#arch-qwen3 .evidence-run").first
    assert evidence.evaluate("e => e.scrollWidth <= e.clientWidth + 1")
    box = evidence.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 420
    # A row anchor shows the row's own line, not hidden under the sticky header above its tall evidence.
    anchored = open_page(compat_html, "#arch-qwen3", width=420)
    assert anchored.locator("#arch-qwen3 th.model").evaluate(
        "th => { const r = th.getBoundingClientRect();"
        " return th.contains(document.elementFromPoint(r.left + 8, r.top + r.height / 2)); }"
    )


def test_print_hides_controls_and_prints_every_row_with_its_reason(open_page, compat_html):
    page = open_page(compat_html)
    page.select_option("#f-verdict", "works")  # a filter on screen does not shorten the printout
    page.emulate_media(media="print")
    assert not page.locator(".filters").is_visible()
    assert not page.locator("#expand-all").is_visible()
    assert all(page.eval_on_selector_all("#matrix tbody.arch", "bs => bs.map(b => b.offsetHeight > 0)"))
    reasons = page.locator("td.why .reason")
    assert reasons.count() > 10
    clipped = page.locator("td.why .reason .part").evaluate_all(
        "ps => ps.filter(p => p.scrollWidth > p.clientWidth + 1 || p.scrollHeight > p.clientHeight + 1)"
        ".map(p => p.textContent)"
    )
    assert clipped == []
    assert page.locator("#arch-gemma3_text td.why[data-run='0']").is_visible()
    screenshot(page, "compat-print.png")


def test_evidence_expands_and_screenshot(open_page, compat_html):
    page = open_page(compat_html)
    evidence = page.locator("#arch-gpt2 tr.evidence")
    assert not evidence.is_visible()
    page.click('#arch-gpt2 td.verdict[data-run="0"] button')
    assert evidence.is_visible()
    gpt2 = kept_rows("results-v2-sim.jsonl")["gpt2"]
    text = evidence.inner_text()
    assert gpt2["error"] in text and gpt2["unsupported_ops"][0] in text and "What to do" in text
    assert "device" in text and "results-v2-sim.jsonl:5" in text
    assert page.locator("#arch-llama button.evidence-toggle").count() == 0  # green in both runs
    # The pointer still rests on the row just opened: its stage cells keep their colour (white text).
    stage = page.locator('#arch-gpt2 td.stage.generate[data-run="0"]')
    page.mouse.move(0, 0)
    colour = stage.evaluate("td => getComputedStyle(td).backgroundColor")
    stage.hover()
    assert stage.evaluate("td => getComputedStyle(td).backgroundColor") == colour
    screenshot(page, "compat-report.png")


def test_checklist_page(open_page, tmp_path):
    output = tmp_path / "checklist.html"
    results = DATA / "results-sim.jsonl"
    assert write_checklist([EXAMPLES], output, results, False) == 0
    context = build_checklist([EXAMPLES], results, online=False)
    page = open_page(output)
    items = (
        len(context["blocking"])
        + len(context["model_items"])
        + len(context["platform_items"])
        + sum(len(s.items) for s in context["sections"])
    )
    assert page.inner_text("#total-tasks") == str(items)
    keys = page.eval_on_selector_all("li.task", "items => items.map(i => i.dataset.key)")
    assert len(keys) == items == len(set(keys)) and all(keys)
    assert page.inner_text("#summary .count-blocking") == str(context["counts"]["blocking"])
    assert page.locator("#blocking li.task").count() == context["counts"]["blocking"]
    qwen3 = kept_rows("results-sim.jsonl")["qwen3"]
    row = page.locator('#models-table tr[data-reference="Qwen/Qwen3-0.6B"]')
    assert row.locator("td.verdict").inner_text() == qwen3["verdict"]
    assert row.locator("td.recompiles").inner_text() == str(qwen3["recompile_count"])
    # Paths are relative to the scanned folder.
    assert "/" not in page.locator(".file h3 code").first.inner_text()
    assert str(EXAMPLES) not in page.content()
    first = page.locator("li.task").first
    first.locator("input").check()
    assert page.inner_text("#done") == "1"
    reload_until_ticked(page, "li.task input >> nth=0")
    assert page.locator("li.task").first.locator("input").is_checked() and page.inner_text("#done") == "1"
    screenshot(page, "checklist.png")


def test_checklist_ticks_stay_on_their_items_when_regenerated(open_page, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    script = project / "infer.py"
    script.write_text(INFERENCE_SCRIPT)
    output = tmp_path / "out" / "checklist.html"
    results = DATA / "results-sim.jsonl"

    def generate(findings):
        assert (
            write_checklist([project], output, results, False, analyze=fake_analyze({"infer.py": findings}))
            == 0
        )

    manual = [
        finding("NM901", 5, "no rewrite rule for this load; do it by hand", False),
        finding("NM105", 8, "generate() arguments differ; check them", False),
    ]
    generate(manual)
    page = open_page(output)
    ticked = page.locator('li.task[data-code="NM105"]')
    key = ticked.get_attribute("data-key")
    ticked.locator("input").check()
    assert page.inner_text("#done") == "1"
    # A line is added at the top (every finding moves down one line) and the NM901 line is edited: the
    # NM105 item keeps its key and its tick; nothing else becomes ticked.
    script.write_text(
        "import os\n" + INFERENCE_SCRIPT.replace('instance_type="inf2"', 'instance_type="inf2", num_cores=2')
    )
    generate([replace(item, line=item.line + 1) for item in manual])
    reload_until_ticked(page, 'li.task[data-code="NM105"] input')
    assert page.get_attribute('li.task[data-code="NM105"]', "data-key") == key
    assert page.locator('li.task[data-code="NM105"] input').is_checked()
    checked = page.eval_on_selector_all(
        "li.task", "items => items.filter(i => i.querySelector('input').checked).map(i => i.dataset.key)"
    )
    assert checked == [key] and page.inner_text("#done") == "1"


def test_checklist_links_to_rules_and_to_report_rows(open_page, tmp_path):
    folder = tmp_path / "out"
    results = DATA / "results-sim.jsonl"
    assert write_report([results], folder / "compat.html", "html") == 0
    assert write_checklist([EXAMPLES], folder / "checklist.html", results, False) == 0
    page = open_page(folder / "checklist.html")
    rule = page.locator("a.rule-link").first
    href = rule.get_attribute("href")
    document, anchor = href.split("#")
    assert (folder / document).resolve() == REPO / "docs" / "reference" / "rules.md"
    assert f'<a id="{anchor}"></a>' in (REPO / "docs" / "reference" / "rules.md").read_text()
    page.click('#models-table tr[data-reference="Qwen/Qwen3-0.6B"] td.architecture a')
    page.wait_for_url("**/compat.html#arch-qwen3")
    assert page.locator("#arch-qwen3").is_visible()
    assert page.locator("#arch-qwen3 tr.evidence").is_visible()  # works with caveats in these results


REFERENCE = REPO / "fixtures" / "compat" / "results-neuron-sim.jsonl"


def reference_run(tmp_path: Path) -> tuple[Path, dict[str, dict]]:
    """The reference file's first run (checkpoint configs) alone, as its own file beside the ranked list: the
    second run in the file (the class defaults where they differ) is tested by itself below."""
    lines = [line for line in REFERENCE.read_text().splitlines() if line.strip()]
    kept = [line for line in lines if json.loads(line)["env"].get("config", "checkpoint") == "checkpoint"]
    path = tmp_path / "reference-checkpoint-run.jsonl"
    path.write_text("\n".join(kept) + "\n")
    for name in ("top100.csv", "optimum_neuron_0.4.5.csv"):
        shutil.copy(REFERENCE.parent / name, tmp_path / name)
    return path, {row["model_type"]: row for row in map(json.loads, kept)}


@pytest.mark.skipif(not REFERENCE.is_file(), reason="the reference run is not committed")
def test_reference_run_nulls_filters_and_chart_agree(open_page, tmp_path):
    """The committed reference run: its null figures are "–", and the recompile filter equals the chart."""
    output = tmp_path / "compat.html"
    path, rows = reference_run(tmp_path)
    assert write_report([path], output, "html") == 0
    page = open_page(output)
    shown = dict(
        page.eval_on_selector_all(
            "#matrix tbody.arch",
            "bs => bs.map(b => [b.dataset.model, b.querySelector('td.compiles').textContent])",
        )
    )
    assert {model for model, text in shown.items() if text == DASH} == {
        model for model, row in rows.items() if row.get("compile_count") is None
    }
    bins = dict(
        page.eval_on_selector_all(
            "#charts rect[data-bin]", "rects => rects.map(r => [r.dataset.bin, Number(r.dataset.count)])"
        )
    )
    page.select_option("#f-recompiles", "0")
    assert (
        int(page.inner_text("#shown"))
        == bins["0"]
        == sum(measured(row, "recompile_count") == 0 for row in rows.values())
    )
    page.select_option("#f-recompiles", "null")
    assert int(page.inner_text("#shown")) == sum(
        measured(row, "recompile_count") is None for row in rows.values()
    )
    # Generation Transformers does not compile has no recompile figure: "–", marked "not compiled".
    uncompiled = [model for model, row in rows.items() if row.get("compiled_generation") is False]
    assert uncompiled
    for model in uncompiled:
        cell = page.inner_text(f'#arch-{model} td.recompiles[data-run="0"]')
        assert cell.startswith(DASH) and "not compiled" in cell, (model, cell)


@pytest.mark.skipif(not REFERENCE.is_file(), reason="the reference run is not committed")
def test_reference_run_headline_reasons_and_time_read_from_the_file(open_page, tmp_path):
    """The committed reference run as `make demo` shows it: every headline figure, the band chart and the
    measured time range equal what the file says, and a two-stage reason shows both stages."""
    output = tmp_path / "compat.html"
    path, rows = reference_run(tmp_path)
    assert write_report([path], output, "html") == 0
    with (REFERENCE.parent / "top100.csv").open() as handle:
        listed = {
            record["model_type"] for record in csv.DictReader(handle) if (record.get("rank") or "").isdigit()
        }
    page = open_page(output)
    headline = page.locator('.headline[data-run="0"]')
    shown = dict(
        headline.locator(".figure").evaluate_all(
            "fs => fs.map(f => [f.dataset.bucket, Number(f.querySelector('.count').textContent)])"
        )
    )
    expected = Counter(
        bucket_of(rows[name]["verdict"], rows[name]["cause"]) for name in listed if name in rows
    )
    expected["not-measured"] += len(listed - set(rows))
    assert {bucket: count for bucket, count in shown.items() if count} == +expected
    assert sum(shown.values()) == len(listed)
    for bucket in ("works", "works-eager", "fails-device", "fails-transformers", "not-measured-simulator"):
        assert bucket in shown  # always shown, also when 0 (fails on device is the figure people look for)
    bands = page.eval_on_selector_all(
        "#charts rect[data-segment]",
        "rs => rs.filter(r => r.dataset.band !== 'unranked').map(r => [r.dataset.segment, Number(r.dataset.count)])",
    )
    by_segment = Counter()
    for segment, count in bands:
        by_segment["not-measured" if segment == "no row" else segment] += count
    assert by_segment == +expected
    stamps = sorted(row["measured_at"] for row in rows.values())
    measured = page.inner_text('#env td.measured[data-run="0"]')
    assert measured.startswith(stamps[0][:10] + " " + stamps[0][11:16]) and measured.endswith(
        stamps[-1][11:16] + " UTC"
    )
    two_stage = next(name for name, row in rows.items() if len(stated_reasons(row)) == 2)
    parts = page.locator(f'#arch-{two_stage} td.why[data-run="0"] .reason .part')
    assert parts.all_inner_texts() == stated_reasons(rows[two_stage])
    assert all(part.is_visible() for part in parts.all())


@pytest.mark.skipif(not REFERENCE.is_file(), reason="the reference run is not committed")
def test_reference_file_shows_checkpoint_configs_first_and_every_reading(open_page, tmp_path):
    """The committed file as `make demo` shows it: the checkpoint-config run first, the class defaults of the
    architectures whose checkpoint values differ beside it as a partial comparison run; every reading of the
    headline adds up; what only a trn2 can show lists rows; nothing claims to have run on a device."""
    output = tmp_path / "compat.html"
    assert write_report([REFERENCE], output, "html") == 0
    rows = [json.loads(line) for line in REFERENCE.read_text().splitlines() if line.strip()]
    page = open_page(output)
    configs = page.locator("#env td.configs").all_inner_texts()
    assert configs[0].startswith("checkpoint values") and configs[1] == "config-class defaults"
    compared = {row["model_type"] for row in rows if row["env"]["config"] == "class-defaults"}
    assert compared and page.locator('.headline[data-run="1"] .partial').inner_text().startswith(
        f"partial run: {len(compared)}"
    )
    readings = dict(
        page.locator('.readings[data-run="0"] tr.reading').evaluate_all(
            "trs => trs.map(tr => [tr.dataset.reading, Number(tr.querySelector('.count').textContent)])"
        )
    )
    top = [row for row in rows if row["env"]["config"] == "checkpoint" and row.get("rank")]
    assert readings["clean"] == sum(row["verdict"] == "works" for row in top)
    assert readings["any"] == readings["clean"] + readings["eager"] + readings["caveats"]
    assert readings["any"] + readings["fails"] + readings["not-measured"] == len(top)
    assert readings["fails"] == sum(
        readings[key] for key in ("fails-device-measured", "fails-device-rule", "fails-transformers")
    )
    assert "beside the blog" in page.inner_text('.readings[data-run="0"] tr[data-reading="any"]')
    assert "46" in page.inner_text("#reconciled") and "generic NeuronTrainer" in page.inner_text(
        "#reconciled"
    )
    assert "nothing here ran on a Neuron device" in page.inner_text("#intro")
    assert page.locator('#trn2 .gaps[data-run="0"] dt').count() >= 4
