"""docs/benchmarks.svg: each figure of scripts/bench as a row of bars, ours beside the reference and the floor.

Each row has its own logarithmic axis (the figures have different units), spanning the decades its three
values need, so the gap between ours, the reference and what the machine allows reads at a glance: one
grid step is a factor of ten. The issue's target, where a row has one, is a dashed mark across its bars. Written by `scripts/bench` (see `--svg`); no dependencies.
"""

import math
from html import escape
from pathlib import Path

WIDTH = 960
LABEL = 360  # the metric's name, left of the bars
BAR_H = 12
ROW_H = 3 * BAR_H + 30
COLOURS = {"ours": "#2b7bb9", "reference": "#d95f02", "floor": "#7f7f7f"}
TARGET = "#c00000"


def _bounds(values: list[float]) -> tuple[float, float]:
    lo = 10 ** math.floor(math.log10(min(values)))
    hi = 10 ** math.ceil(math.log10(max(values)))
    return lo, hi if hi > lo else lo * 10


def _label(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def write(path: Path, figures: list, caption: str) -> None:
    """`figures`: (metric, Figure) pairs, Figure having unit, ours, reference, floor, target (each may be None)."""
    axis = WIDTH - LABEL - 90
    height = 60 + ROW_H * len(figures) + 30
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
           f'font-family="sans-serif" font-size="11">',
           '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="10" y="20" font-size="14" font-weight="bold">kimi-agent beside the reference '
           f'(`scripts/bench`), log scale per row</text>',
           f'<text x="10" y="38">{escape(caption)}</text>']
    x = LABEL
    for name, colour in COLOURS.items():
        out.append(f'<rect x="{x}" y="44" width="10" height="10" fill="{colour}"/>'
                   f'<text x="{x + 14}" y="53">{name}</text>')
        x += 90
    out.append(f'<line x1="{x + 5}" y1="43" x2="{x + 5}" y2="55" stroke="{TARGET}" stroke-width="2" '
               f'stroke-dasharray="3,2"/><text x="{x + 14}" y="53">target</text>')
    y = 64
    for metric, figure in figures:
        values = {k: getattr(figure, k) for k in COLOURS if getattr(figure, k)}
        if not values:
            continue
        target = getattr(figure, "target", None)
        lo, hi = _bounds(list(values.values()) + ([target] if target else []))
        decades = round(math.log10(hi / lo))
        text = metric if len(metric) <= 58 else metric[:56] + "…"
        out.append(f'<text x="10" y="{y + BAR_H + 4}">{escape(text)}</text>')
        out.append(f'<text x="10" y="{y + 2 * BAR_H + 8}" fill="#555">{escape(figure.unit)}</text>')
        for d in range(decades + 1):
            gx = LABEL + axis * d / decades
            out.append(f'<line x1="{gx:.1f}" y1="{y - 2}" x2="{gx:.1f}" y2="{y + 3 * BAR_H + 4}" stroke="#ddd"/>')
            out.append(f'<text x="{gx:.1f}" y="{y + 3 * BAR_H + 16}" fill="#999" text-anchor="middle" '
                       f'font-size="9">{_label(lo * 10 ** d)}</text>')
        for i, (name, colour) in enumerate(COLOURS.items()):
            value = values.get(name)
            if value is None:
                continue
            # A bar starts at the left of the axis, so it has a length even at the lowest decade.
            length = max(2.0, axis * math.log10(value / lo) / decades)
            by = y + i * BAR_H
            out.append(f'<rect x="{LABEL}" y="{by}" width="{length:.1f}" height="{BAR_H - 2}" fill="{colour}"/>')
            out.append(f'<text x="{LABEL + length + 4:.1f}" y="{by + BAR_H - 3}">{_label(value)}</text>')
        if target:
            tx = LABEL + max(2.0, axis * math.log10(target / lo) / decades)
            out.append(f'<line x1="{tx:.1f}" y1="{y - 4}" x2="{tx:.1f}" y2="{y + 3 * BAR_H}" stroke="{TARGET}" '
                       f'stroke-width="2" stroke-dasharray="3,2"/>')
        y += ROW_H
    out.append("</svg>")
    path.write_text("\n".join(out) + "\n")
