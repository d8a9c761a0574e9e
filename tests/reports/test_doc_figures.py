"""The figures of the committed reference run that README.md and docs/ state are read from its results files
(fixtures/compat/) through the code `neuron-compat report` uses: a page that disagrees with the file fails
here, and so does a claim no page makes any more (a reworded page must say here how it words the figure)."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

from reports.compat_report import build_report
from reports.results import load_top100

ROOT = Path(__file__).resolve().parents[2]
SIM = ROOT / "fixtures" / "compat" / "results-neuron-sim.jsonl"
STANDIN = ROOT / "fixtures" / "compat" / "results-neuron-standin.jsonl"
N = r"\**(\d+)\**"  # a figure, bold or not

# How the pages word each figure: (pattern, the figure each group states). A figure is a headline bucket of
# the reference run's first (checkpoint-config) run, one of its readings (`reading:KEY`), or `same-on-standin`.
CLAIMS: list[tuple[str, tuple[str, ...]]] = [
    (rf"\| works \(compiled[^|]*\| {N} \|", ("works",)),
    (rf"\| works \(eager[^|]*\| {N} \|", ("works-eager",)),
    (rf"\| works with caveats[^|]*\| {N} \|", ("works-with-caveats",)),
    (rf"\| fails \(device\)[^|]*\| {N} \|", ("fails-device",)),
    (rf"\| fails \(Transformers bug[^|]*\| {N} \|", ("fails-transformers",)),
    (rf"\| not measured: simulator limitation \| {N} \|", ("not-measured-simulator",)),
    (rf"\| not measured: harness[^|/]*\| {N} \|", ("not-measured-harness",)),
    (
        rf"\| not measured: simulator limitation / harness \| {N} / {N} \|",
        ("not-measured-simulator", "not-measured-harness"),
    ),
    (
        rf"{N} works \(compiled\), {N} works \(eager generation\), {N} with caveats, {N} fails on device, "
        rf"{N} Transformers bugs, {N} not measured \(simulator\), {N} harness error",
        (
            "works",
            "works-eager",
            "works-with-caveats",
            "fails-device",
            "fails-transformers",
            "not-measured-simulator",
            "not-measured-harness",
        ),
    ),
    (
        rf"\({N} works, {N} works-eager, {N} works with caveats, {N} fails \(Transformers\), "
        rf"{N} not measured \(simulator\), {N} harness error\)",
        (
            "works",
            "works-eager",
            "works-with-caveats",
            "fails-transformers",
            "not-measured-simulator",
            "not-measured-harness",
        ),
    ),
    (rf"{N} work in any form", ("reading:any",)),
    (
        rf"{N} (?:without an every-step recompile|work without a decode step that recompiles)",
        ("reading:no-step-no-raise",),
    ),
    (rf"{N} (?:clean\b|work compiled with nothing to report)", ("reading:clean",)),
    # "caveats (17 ..." and "several): 17 ...": the top 100's caveats, not the 189 types' ("caveats 75 (34 ...")
    (rf"(?:caveats \(|several\): ){N} recompile at every decode step", ("reading:every-step",)),
    (rf"{N} avoid an op the device raises on", ("reading:raising-avoided",)),
    (rf"all {N} verdicts (?:as on CPU|are the\s+same)", ("same-on-standin",)),
]


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


@cache
def figures() -> dict[str, int]:
    """The reference run's figures, as the report computes them."""
    _, context = build_report([SIM], "md")
    first = context["runs"][0]["headline"]
    found = dict(first.counts)
    found |= {f"reading:{reading.key}": reading.count for reading in first.readings}
    found["same-on-standin"] = same_verdicts_on_the_standin()
    return found


def same_verdicts_on_the_standin() -> int:
    """Top-100 architectures whose verdict on the stand-in device equals the CPU reference's."""
    _, context = build_report([SIM, STANDIN], "md")
    frame = context["frame"]
    cpu = frame[frame["run"] == 0].set_index("model_type")["verdict"]
    standin_run = next(view["index"] for view in context["runs"] if STANDIN.name in " ".join(view["sources"]))
    standin = frame[frame["run"] == standin_run].set_index("model_type")["verdict"]
    top100 = [entry.model_type for entry in load_top100([SIM])]
    return sum(name in cpu and name in standin and cpu[name] == standin[name] for name in top100)


def stated(pattern: str) -> list[tuple[str, tuple[int, ...]]]:
    """(page, the figures it states) for each place a page words a figure this way."""
    found = []
    for page in pages():
        text = " ".join(page.read_text(encoding="utf-8").split())  # a figure's words may wrap
        for match in re.finditer(pattern, text):
            found.append((str(page.relative_to(ROOT)), tuple(int(group) for group in match.groups())))
    return found


@pytest.mark.parametrize(("pattern", "keys"), CLAIMS, ids=[keys[0] for _, keys in CLAIMS])
def test_the_pages_state_the_figures_of_the_results_file(pattern: str, keys: tuple[str, ...]) -> None:
    places = stated(pattern)
    assert places, f"no page words a figure as {pattern!r}: update CLAIMS with the page"
    wanted = tuple(figures()[key] for key in keys)
    wrong = [f"{page}: {dict(zip(keys, found, strict=True))}" for page, found in places if found != wanted]
    assert not wrong, f"{SIM.name} gives {dict(zip(keys, wanted, strict=True))}; the pages say {wrong}"


def test_a_page_that_disagrees_with_the_file_is_found(tmp_path: Path, monkeypatch) -> None:
    page = tmp_path / "README.md"
    page.write_text("Read every way: 91 work in any form, 52 without an every-step recompile.\n")
    monkeypatch.setattr(f"{__name__}.pages", lambda: [page])
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    pattern, keys = next(claim for claim in CLAIMS if claim[1] == ("reading:any",))
    with pytest.raises(AssertionError, match="README.md"):
        test_the_pages_state_the_figures_of_the_results_file(pattern, keys)
