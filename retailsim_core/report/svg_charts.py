"""Inline SVG charts of the evaluation report: bars by method, a scatter plot, and the real vs
simulated basket-size histogram. Plain strings, no scripts."""

from __future__ import annotations

import html

COLOURS = (
    "#4f43dd",
    "#8b83ee",
    "#2a9d8f",
    "#e76f51",
    "#f4a261",
    "#264653",
    "#e9c46a",
    "#a8dadc",
    "#999999",
)


def bars(values: dict[str, float], title: str, width: int = 560) -> str:
    items = list(values.items())
    top = max([v for _, v in items] + [1e-9])
    h = 22 * len(items) + 30
    bars = "".join(
        f"<text x='4' y='{30 + 22 * i + 12}' font-size='12'>{html.escape(k)}</text>"
        f"<rect x='190' y='{30 + 22 * i}' width='{(width - 260) * v / top:.1f}' height='16' "
        f"fill='{COLOURS[i % len(COLOURS)]}'/>"
        f"<text x='{196 + (width - 260) * v / top:.1f}' y='{30 + 22 * i + 12}' "
        f"font-size='11'>{v:.4f}</text>"
        for i, (k, v) in enumerate(items)
    )
    return (
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{h}' role='img'>"
        "<text x='4' y='16' font-size='13' "
        f"font-weight='bold'>{html.escape(title)}</text>{bars}</svg>"
    )


def scatter(xs, ys, xlabel: str, ylabel: str, size: int = 260) -> str:
    xs, ys = list(xs), list(ys)
    if not xs:
        return ""
    lo_x, hi_x, lo_y, hi_y = min(xs), max(xs), min(ys), max(ys)

    def sx(v):
        return 30 + (size - 40) * (v - lo_x) / ((hi_x - lo_x) or 1)

    def sy(v):
        return size - 30 - (size - 40) * (v - lo_y) / ((hi_y - lo_y) or 1)

    dots = "".join(
        f"<circle cx='{sx(x):.1f}' cy='{sy(y):.1f}' r='3' fill='#4f43dd'/>"
        for x, y in zip(xs, ys, strict=True)
    )
    return (
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{size}' height='{size}'>{dots}"
        f"<text x='30' y='{size - 8}' font-size='11'>{html.escape(xlabel)} →</text>"
        f"<text x='4' y='12' font-size='11'>↑ {html.escape(ylabel)}</text></svg>"
    )


def size_bars(real: list[int], simulated: list[int], width: int = 560) -> str:
    """Share of baskets by size, real (dark) and simulated (light), sizes 1..20 and > 20."""

    def shares(h):
        h = [*h[1:21], sum(h[21:])]
        total = max(sum(h), 1)
        return [v / total for v in h]

    r, q = shares(real), shares(simulated)
    top = max(r + q + [1e-9])
    step = (width - 40) / len(r)
    bars = "".join(
        f"<rect x='{30 + i * step:.1f}' y='{150 - 120 * a / top:.1f}' width='{step / 2 - 1:.1f}' "
        f"height='{120 * a / top:.1f}' fill='#4f43dd'/><rect x='{30 + i * step + step / 2:.1f}' "
        f"y='{150 - 120 * b / top:.1f}' width='{step / 2 - 1:.1f}' height='{120 * b / top:.1f}' "
        "fill='#b8b2f2'/>"
        for i, (a, b) in enumerate(zip(r, q, strict=True))
    )
    return (
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='175' role='img'>"
        "<text x='4' y='14' font-size='13' font-weight='bold'>basket size: real (dark) vs "
        "simulated (light)"
        f"</text>{bars}<text x='30' y='168' font-size='11'>1 product → 20, then &gt; "
        "20</text></svg>"
    )


def loss_curve_svg(losses: list[float], width: int = 480, height: int = 200) -> str:
    """A minimal SVG line chart of the training loss (no plotting dependency)."""
    lo, hi = min(losses), max(losses)
    span = (hi - lo) or 1.0
    pts = " ".join(
        f"{40 + i * (width - 50) / max(len(losses) - 1, 1):.1f},"
        f"{10 + (hi - v) * (height - 40) / span:.1f}"
        for i, v in enumerate(losses)
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">'
        f'<polyline fill="none" stroke="#4f43dd" stroke-width="2" points="{pts}"/>'
        f'<text x="40" y="{height - 8}" font-size="11">epoch 1..{len(losses)}; loss {hi:.3f} → '
        f"{losses[-1]:.3f}</text>"
        f"</svg>"
    )


def lines(series: dict[str, list[float]], title: str, width: int = 560, height: int = 240) -> str:
    """Several named series over the same x positions, one polyline each, with a legend."""
    values = [v for ys in series.values() for v in ys] or [0.0]
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1.0
    count = max((len(ys) for ys in series.values()), default=1)
    plot_w, plot_h = width - 170, height - 50

    def point(i: int, v: float) -> str:
        return f"{50 + i * plot_w / max(count - 1, 1):.1f},{25 + (hi - v) * plot_h / span:.1f}"

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">',
        f'<text x="10" y="15" font-size="12">{html.escape(title)}</text>',
        f'<text x="4" y="{29}" font-size="10">{hi:.3f}</text>',
        f'<text x="4" y="{25 + plot_h}" font-size="10">{lo:.3f}</text>',
    ]
    for k, (name, ys) in enumerate(series.items()):
        colour = COLOURS[k % len(COLOURS)]
        pts = " ".join(point(i, v) for i, v in enumerate(ys))
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{pts}"/>')
        parts.append(
            f'<text x="{width - 110}" y="{30 + 14 * k}" font-size="11" fill="{colour}">'
            f"{html.escape(name)}</text>"
        )
    parts.append(f'<text x="50" y="{height - 8}" font-size="11">week 1..{count}</text></svg>')
    return "".join(parts)
