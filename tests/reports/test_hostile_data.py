"""Data from results files, file names and scripts reaches the pages as text: no HTML element, link, code
span or table cell of its own in Markdown (checked by rendering it with a CommonMark parser), no formula in
CSV, and the report command never overwrites its input or guesses a format."""

from __future__ import annotations

import csv
import io
import json

import pytest
from markdown_it import MarkdownIt

from reports.checklist import write_checklist
from reports.compat_report import write_report
from tests.reports.conftest import write_jsonl

HOSTILE = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(2)>",
    "[click me](javascript:alert(3))",
    "a`b` | c",
    "*bold* _under_ ~~struck~~",
    "<!-- an unclosed comment",
    '=HYPERLINK("https://example.invalid")',
    "line one\n# a heading of its own",
]


def render_markdown(text: str) -> str:
    """What a Markdown viewer shows: CommonMark with GFM tables, raw HTML allowed (as most viewers do)."""
    return MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"]).render(text)


def assert_no_markup_from_data(html: str) -> None:
    for marker in (
        "<script",
        "<img",
        'href="javascript',
        "<!-- an unclosed",
        "<h1>a heading",
        "<strong>bold",
        "<em>under",
        "<s>struck",
    ):
        assert marker not in html, marker


@pytest.fixture
def hostile_results(tmp_path, rows):
    records = []
    for index, (row, text) in enumerate(zip(rows["results-v2-sim"], HOSTILE, strict=False)):
        records.append(
            row
            | {
                "model_type": f"{row['model_type']}{text}" if index % 2 else row["model_type"],
                "verdict": "fails",
                "stage": "generate",
                "cause": "device",
                "generate_verdict": "fails",
                "error": text,
                "reason": text,
                "graph_break_reasons": [text],
                "unsupported_ops": [text],
                "env": row["env"] | {"torch": f"2.14 {text}"},
            }
        )
    return write_jsonl(tmp_path / "hostile.jsonl", records)


def test_compat_markdown_shows_hostile_data_as_text(hostile_results, tmp_path):
    output = tmp_path / "compat.md"
    assert write_report([hostile_results], output, "md") == 0
    source = output.read_text()
    html = render_markdown(source)
    assert_no_markup_from_data(html)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # shown, as text
    # Every row of the matrix has as many cells as its header: no `|` in the data opened a cell.
    table = html[html.index(">rank</th>") :]
    table = table[: table.index("</table>")]
    header_cells = table.split("</tr>")[0].count("<th") + 1  # the rank header itself
    widths = {row.count("<td") for row in table.split("<tr>")[2:]}
    assert widths == {header_cells}, (widths, header_cells)


def test_compat_csv_quotes_formulas(hostile_results, tmp_path):
    output = tmp_path / "compat.csv"
    assert write_report([hostile_results], output, "csv") == 0
    cells = [cell for record in csv.reader(io.StringIO(output.read_text())) for cell in record]
    assert not [cell for cell in cells if cell.startswith(("=", "@", "+"))]
    assert '\'=HYPERLINK("https://example.invalid")' in cells


def test_compat_html_escapes_hostile_data(hostile_results, tmp_path):
    output = tmp_path / "compat.html"
    assert write_report([hostile_results], output, "html") == 0
    html = output.read_text()
    assert "<script>alert(1)" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_checklist_markdown_shows_hostile_file_names_and_model_ids_as_text(tmp_path, rows):
    project = tmp_path / "project"
    project.mkdir()
    for index, text in enumerate(HOSTILE[:6]):
        name = text.replace("/", "-").replace("\n", " ") + f" {index}.py"
        (project / name).write_text(
            "import torch_xla.core.xla_model as xm\n"
            f"MODEL_ID = {json.dumps('org/' + text.replace(chr(10), ' '))}\n"
            "device = xm.xla_device()\n"
            "total = xm.all_reduce('sum', [device])\n"  # manual work: an item that names the file
        )
    results = write_jsonl(tmp_path / "results.jsonl", rows["results-sim"])
    output = tmp_path / "checklist.md"
    assert write_checklist([project], output, results, False) == 0
    html = render_markdown(output.read_text())
    assert_no_markup_from_data(html)
    assert "&lt;img src=x onerror=alert(2)&gt; 1.py" in html


def test_report_refuses_to_overwrite_its_input(data, tmp_path, capsys):
    """`neuron-compat report r.jsonl -o r.jsonl` replaced the results with HTML and exited 0."""
    results = tmp_path / "r.jsonl"
    results.write_bytes((data / "results-sim.jsonl").read_bytes())
    before = results.read_bytes()
    assert write_report([results], results, "html") == 2
    assert "would replace it" in capsys.readouterr().err
    assert results.read_bytes() == before


def test_report_refuses_a_suffix_of_another_format(data, tmp_path, capsys):
    """`-o x.pdf` wrote HTML into x.pdf."""
    from click.testing import CliRunner

    from commands.neuron_compat import main

    result = CliRunner().invoke(
        main, ["report", str(data / "results-sim.jsonl"), "-o", str(tmp_path / "x.pdf")]
    )
    assert result.exit_code == 2 and "names no report format" in result.output
    assert not (tmp_path / "x.pdf").exists()
    explicit = CliRunner().invoke(
        main, ["report", str(data / "results-sim.jsonl"), "-o", str(tmp_path / "x.txt"), "--format", "md"]
    )
    assert explicit.exit_code == 0 and (tmp_path / "x.txt").read_text().startswith("# TorchNeuron")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00binary", "not UTF-8 text"),
        (b'{"model_type": "llama", "env": "not an object"}\n', "not a neuron-compat result row"),
        (b'{"model_type": ' + b"[" * 50_000 + b"]" * 50_000 + b"}\n", "nested too deeply"),
        (b'{"model_type": "llama", "rank": ' + b"1" * 5000 + b"}\n", "Exceeds the limit"),
    ],
)
def test_merge_refuses_damaged_files_with_a_message(tmp_path, content, message):
    from click.testing import CliRunner

    from commands.neuron_compat import main

    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(content)
    result = CliRunner().invoke(main, ["merge", str(bad), "-o", str(tmp_path / "merged.jsonl")])
    assert result.exit_code == 2 and message in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
