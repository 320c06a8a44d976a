"""A line chart as SVG, the way people chart nccl-tests output: bus bandwidth against message
size, the size axis in powers of two. Standard library only, so fgpu needs nothing installed."""

import math
from html import escape

WIDTH, HEIGHT = 900, 520
LEFT, RIGHT, TOP, BOTTOM = 80, 250, 50, 70  # margins: the legend sits on the right
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f",
           "#bcbd22")


def size_label(size: float) -> str:
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if size >= scale:
            return f"{size / scale:g}{unit}"
    return f"{size:g}"


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5 or 5 times a power of ten at or above value."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= value)


def line_chart(series, title: str, x_title: str, y_title: str) -> str:
    """series: [(label, [(x > 0, y), ...]), ...]; x on a log2 axis, y linear from 0."""
    points = [p for _, pts in series for p in pts]
    if not points:
        raise ValueError("nothing to plot")
    lo = math.floor(math.log2(min(x for x, _ in points)))
    hi = max(math.ceil(math.log2(max(x for x, _ in points))), lo + 1)
    top = nice_ceiling(max(y for _, y in points))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x):
        return LEFT + (math.log2(x) - lo) / (hi - lo) * plot_w

    def py(y):
        return TOP + plot_h - y / top * plot_h

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
           f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
           f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
           f'<text x="{LEFT + plot_w / 2}" y="{TOP / 2 + 6}" text-anchor="middle" font-size="15">{escape(title)}</text>']
    every = max(1, math.ceil((hi - lo) / 12))  # at most a dozen size labels
    for k in range(lo, hi + 1):
        x = px(2 ** k)
        out.append(f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{TOP + plot_h}" stroke="#e5e5e5"/>')
        if (k - lo) % every == 0:
            out.append(f'<text x="{x:.1f}" y="{TOP + plot_h + 18}" text-anchor="middle">{size_label(2 ** k)}</text>')
    for i in range(6):
        y = top * i / 5
        out.append(f'<line x1="{LEFT}" y1="{py(y):.1f}" x2="{LEFT + plot_w}" y2="{py(y):.1f}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{LEFT - 8}" y="{py(y) + 4:.1f}" text-anchor="end">{y:g}</text>')
    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#333"/>')
    out.append(f'<text x="{LEFT + plot_w / 2}" y="{HEIGHT - 20}" text-anchor="middle">{escape(x_title)}</text>')
    out.append(f'<text x="20" y="{TOP + plot_h / 2}" text-anchor="middle" '
               f'transform="rotate(-90 20 {TOP + plot_h / 2})">{escape(y_title)}</text>')
    for i, (label, pts) in enumerate(series):
        colour = COLOURS[i % len(COLOURS)]
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in sorted(pts))
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{path}">'
                   f'<title>{escape(label)}</title></polyline>')
        for x, y in pts:
            out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.5" fill="{colour}"/>')
        ly = TOP + 10 + i * 20
        out.append(f'<line x1="{WIDTH - RIGHT + 20}" y1="{ly}" x2="{WIDTH - RIGHT + 44}" y2="{ly}" stroke="{colour}" '
                   'stroke-width="3"/>')
        out.append(f'<text x="{WIDTH - RIGHT + 50}" y="{ly + 4}">{escape(label)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
