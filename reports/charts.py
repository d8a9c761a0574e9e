"""Inline SVG charts: no scripts, no fonts or images fetched, so the report renders offline."""

from __future__ import annotations

import pandas as pd
from markupsafe import Markup, escape

from reports.vocabulary import BUCKET_LABELS, NOT_RUN

# One colour per headline bucket (the harness's causes), the same in the headline, pills and charts.
BUCKET_COLORS = {
    "works": "#2e8540",
    "works-eager": "#1b7f86",
    "works-with-caveats": "#e0a800",
    "fails-device": "#c62828",
    "fails-transformers": "#7b1fa2",
    "fails-unattributed": "#8d4b4b",
    "not-measured-simulator": "#9e9e9e",
    "not-measured-harness": "#607d8b",
    "not-measured": "#bdbdbd",
    NOT_RUN: "#e3e7ed",
}
SEGMENT_LABELS = {**BUCKET_LABELS, NOT_RUN: "no row (not measured)"}
# Light segments get dark numbers.
LABEL_COLORS = {"works-with-caveats": "#3d2c00", "not-measured": "#333", NOT_RUN: "#333"}
FONT = 'font-family="system-ui, sans-serif" font-size="12"'


def _open_svg(width: float, height: float, title: str) -> str:
    # The viewBox lets the page scale a chart down to a narrow screen.
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" class="chart" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" aria-label="{escape(title)}">'
    )


def buckets_by_band_svg(table: pd.DataFrame, title: str) -> Markup:
    """Stacked horizontal bars: one bar per rank band, one segment per headline bucket."""
    label_width, bar_width, bar_height, gap, top = 86, 420, 22, 10, 28
    height = top + len(table.index) * (bar_height + gap) + 10
    largest = max(int(table.sum(axis=1).max()) if not table.empty else 0, 1)
    parts = [
        _open_svg(max(label_width + bar_width + 60, 7 * len(title)), height, title),
        f'<text x="0" y="16" {FONT} font-weight="600">{escape(title)}</text>',
    ]
    for position, band in enumerate(table.index):
        y = top + position * (bar_height + gap)
        parts.append(
            f'<text x="0" y="{y + bar_height * 0.7:.1f}" {FONT}>'
            f"{escape('rank ' + band if band[0].isdigit() else band)}</text>"
        )
        x = float(label_width)
        for segment, count in table.loc[band].items():
            if not count:
                continue
            width = bar_width * int(count) / largest
            parts.append(
                f'<rect x="{x:.1f}" y="{y}" width="{width:.1f}" height="{bar_height}" '
                f'fill="{BUCKET_COLORS[segment]}" data-band="{escape(band)}" data-segment="{escape(segment)}" '
                f'data-count="{int(count)}">'
                f"<title>{escape(band)}: {int(count)} {escape(SEGMENT_LABELS[segment])}</title></rect>"
            )
            if width >= 18:
                parts.append(
                    f'<text x="{x + width / 2:.1f}" y="{y + bar_height * 0.7:.1f}" {FONT} '
                    f'fill="{LABEL_COLORS.get(segment, "#fff")}" text-anchor="middle">{int(count)}</text>'
                )
            x += width
        parts.append(
            f'<text x="{x + 6:.1f}" y="{y + bar_height * 0.7:.1f}" {FONT}>{int(table.loc[band].sum())}</text>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def histogram_svg(bins: list[tuple[str, int]], title: str, x_label: str) -> Markup:
    """Vertical bars, one per bin, count written above each bar."""
    left, plot_height, bar_width, gap, top = 10, 140, 46, 14, 42
    width = max(left + len(bins) * (bar_width + gap) + 10, 7 * len(title))
    height = top + plot_height + 44
    largest = max([count for _, count in bins] + [1])
    parts = [
        _open_svg(width, height, title),
        f'<text x="0" y="16" {FONT} font-weight="600">{escape(title)}</text>',
    ]
    baseline = top + plot_height
    for position, (label, count) in enumerate(bins):
        x = left + position * (bar_width + gap)
        bar = plot_height * count / largest
        parts.append(
            f'<rect x="{x}" y="{baseline - bar:.1f}" width="{bar_width}" height="{bar:.1f}" fill="#3f6fb5" '
            f'data-bin="{escape(label)}" data-count="{count}">'
            f"<title>{escape(label)}: {count}</title></rect>"
        )
        parts.append(
            f'<text x="{x + bar_width / 2}" y="{baseline - bar - 4:.1f}" {FONT} text-anchor="middle">'
            f"{count}</text>"
        )
        parts.append(
            f'<text x="{x + bar_width / 2}" y="{baseline + 16}" {FONT} text-anchor="middle">'
            f"{escape(label)}</text>"
        )
    parts.append(f'<line x1="{left}" y1="{baseline}" x2="{width - 10}" y2="{baseline}" stroke="#555"/>')
    parts.append(
        f'<text x="{width / 2}" y="{baseline + 36}" {FONT} text-anchor="middle">{escape(x_label)}</text>'
    )
    parts.append("</svg>")
    return Markup("".join(parts))
