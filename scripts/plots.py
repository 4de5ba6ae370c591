#!/usr/bin/env python3
"""The benchmark pages' plots, drawn from their result files (standard library only).

    python3 scripts/plots.py           # writes docs/src/images/bench-*.svg (make plots)
    python3 scripts/plots.py --check   # fails if a plot differs from what the result files make now,
                                       # or a result file holds a figure no table of its page holds
    python3 scripts/plots.py add e2e target/bench-e2e/results.md --page end-to-end.md \
        --build "ship 1a2b3c4" --date 2026-12-01 --command "make bench-e2e COUNTS=1000"
    python3 scripts/plots.py add swap swap.txt --page swap.md --build 1a2b3c4 --date 2026-12-01 \
        --command "make bench-swap" [--machine "2 cores (AMD EPYC), 24 GiB"]

The result files are docs/src/benchmarks/results/*.csv: one row per measurement, oldest run first,
each with the page whose table holds it and the build, date, machine and command of its run. `add`
appends the table a bench wrote (bench-e2e's results.md; what bench-swap printed) as the newest
rows. The plots show the newest: ours and the Go operator of the last build end-to-end.md has at
two sizes or more, ours alone of the last build of scale.md, the last build's swaps and soak.
They are SVG with a white background (readable in the book's light and dark themes), a <title> and
a <desc> saying what they show, and the same bytes for the same result files.
"""

from __future__ import annotations

import argparse
import csv
import math
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs/src/benchmarks/results"
PAGES = ROOT / "docs/src/benchmarks"
IMAGES = ROOT / "docs/src/images"

# Okabe-Ito: told apart with the common colour-vision deficiencies; each series also has its own
# marker and dash.
BLUE = "#0072B2"
VERMILLION = "#D55E00"
GREEN = "#009E73"
ORANGE = "#E69F00"
SKY = "#56B4E9"
INK = "#1a1a1a"
GREY = "#595959"
GRID = "#d9d9d9"
FONT = "DejaVu Sans, Verdana, Arial, sans-serif"

# The compile strategy deploy/ and the chart ship (--compile-strategy), as the swap page names it.
SHIPPED_STRATEGY = "tiered"

# The Go operator as the benches name it.
GO = "Go v0.4.0"

# Columns that say which measurement a row is, not a measured figure.
NOT_FIGURES = {"crs", "run", "parents", "poll_ms"}


Row = dict[str, str]


def read_results(name: str) -> list[Row]:
    with (RESULTS / name).open(newline="", encoding="utf-8") as file:
        return list(csv.DictReader(file))


def num(text: str) -> float:
    return float(text)


def fmt(value: float) -> str:
    """A coordinate: at most two decimals, no trailing zeros (the same text on every run)."""
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def log_ticks(values: Iterable[float]) -> list[float]:
    """The 1-2-5 ticks from the one at or below the least value to the one at or above the greatest."""
    values = list(values)
    low, high = min(values), max(values)
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    candidates = [step * 10.0**power for power in range(first, last + 1) for step in (1, 2, 5)]
    start = max(i for i, tick in enumerate(candidates) if tick <= low)
    end = min(i for i, tick in enumerate(candidates) if tick >= high)
    return candidates[start : end + 1]


def thousands(value: float) -> str:
    return f"{value:,.0f}"


class Svg:
    """An SVG document built element by element."""

    def __init__(self, name: str, width: int, height: int, title: str, desc: str) -> None:
        self.name = name
        self.width = width
        self.height = height
        self.parts: list[str] = []
        self.title = title
        self.desc = desc

    def add(self, element: str) -> None:
        self.parts.append(element)

    def text(
        self,
        x: float,
        y: float,
        content: str,
        *,
        size: int = 13,
        anchor: str = "start",
        fill: str = INK,
        weight: str = "normal",
        rotate: bool = False,
    ) -> None:
        extra = f' transform="rotate(-90 {fmt(x)} {fmt(y)})"' if rotate else ""
        bold = ' font-weight="bold"' if weight == "bold" else ""
        self.add(
            f'<text x="{fmt(x)}" y="{fmt(y)}" font-size="{size}" text-anchor="{anchor}" fill="{fill}"{bold}{extra}>'
            f"{escape(content)}</text>"
        )

    def line(self, x1: float, y1: float, x2: float, y2: float, stroke: str, width: float = 1, dash: str = "") -> None:
        dashed = f' stroke-dasharray="{dash}"' if dash else ""
        self.add(
            f'<line x1="{fmt(x1)}" y1="{fmt(y1)}" x2="{fmt(x2)}" y2="{fmt(y2)}" stroke="{stroke}"'
            f' stroke-width="{fmt(width)}"{dashed}/>'
        )

    def rect(self, x: float, y: float, w: float, h: float, fill: str, stroke: str = "none") -> None:
        self.add(
            f'<rect x="{fmt(x)}" y="{fmt(y)}" width="{fmt(w)}" height="{fmt(h)}" fill="{fill}" stroke="{stroke}"/>'
        )

    def polyline(self, points: Iterable[tuple[float, float]], stroke: str, width: float = 2, dash: str = "") -> None:
        dashed = f' stroke-dasharray="{dash}"' if dash else ""
        coords = " ".join(f"{fmt(x)},{fmt(y)}" for x, y in points)
        self.add(f'<polyline points="{coords}" fill="none" stroke="{stroke}" stroke-width="{fmt(width)}"{dashed}/>')

    def marker(self, shape: str, x: float, y: float, color: str, size: float = 5) -> None:
        if shape == "circle":
            self.add(f'<circle cx="{fmt(x)}" cy="{fmt(y)}" r="{fmt(size)}" fill="{color}"/>')
        elif shape == "square":
            s = size * 0.9
            self.rect(x - s, y - s, 2 * s, 2 * s, color)
        elif shape == "triangle":
            s = size * 1.2
            points = [(x, y - s), (x + s, y + s * 0.8), (x - s, y + s * 0.8)]
            coords = " ".join(f"{fmt(px)},{fmt(py)}" for px, py in points)
            self.add(f'<polygon points="{coords}" fill="{color}"/>')
        elif shape == "diamond":
            s = size * 1.2
            points = [(x, y - s), (x + s, y), (x, y + s), (x - s, y)]
            coords = " ".join(f"{fmt(px)},{fmt(py)}" for px, py in points)
            self.add(f'<polygon points="{coords}" fill="{color}"/>')
        elif shape == "bar":
            self.rect(x - 1.5, y - size * 1.4, 3, size * 2.8, color)
        else:
            raise ValueError(f"unknown marker {shape}")

    def render(self) -> str:
        head = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width}" height="{self.height}"'
            f' viewBox="0 0 {self.width} {self.height}" role="img" aria-labelledby="{self.name}-title {self.name}-desc"'
            f' font-family="{FONT}">\n'
            f'<title id="{self.name}-title">{escape(self.title)}</title>\n'
            f'<desc id="{self.name}-desc">{escape(self.desc)}</desc>\n'
            f'<rect width="{self.width}" height="{self.height}" fill="#ffffff"/>\n'
        )
        return head + "\n".join(self.parts) + "\n</svg>\n"


@dataclass
class Axis:
    """A logarithmic or linear axis from `low` to `high` onto the pixels `start` to `end`."""

    low: float
    high: float
    start: float
    end: float
    log: bool = True

    def __call__(self, value: float) -> float:
        if self.log:
            share = (math.log10(value) - math.log10(self.low)) / (math.log10(self.high) - math.log10(self.low))
        else:
            share = (value - self.low) / (self.high - self.low)
        return self.start + share * (self.end - self.start)


@dataclass
class Series:
    label: str
    color: str
    marker: str
    dash: str
    # (x, the figure of each run there, as the result file writes it), in order of x.
    points: list[tuple[float, list[str]]] = field(default_factory=list)
    # Build, date and machine; the commands.
    run: str = ""
    commands: list[str] = field(default_factory=list)
    # Where a vertex's label goes, by its x: (dx, dy, anchor); above right when not named.
    label_at: dict[float, tuple[float, float, str]] = field(default_factory=dict)


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def e2e_series(rows: list[Row], column: str) -> list[Series]:
    """Ours and the Go operator of the last build compared at two sizes (end-to-end.md), and ours
    alone to 100,000 CRs (the last build of scale.md): the figure of every run at each size."""
    compared = compared_build(rows)
    alone = last_build(rows, lambda row: row["page"] == "scale.md")
    out = []
    for keep, series in (
        (
            lambda row: row["build"] == compared and row["page"] == "end-to-end.md" and row["operator"] == "ours",
            Series("ours", BLUE, "circle", ""),
        ),
        (
            lambda row: row["build"] == compared and row["page"] == "end-to-end.md" and row["operator"] == GO,
            Series("Go operator v0.4.0 (the same runs)", VERMILLION, "square", "6 3"),
        ),
        (
            lambda row: row["build"] == alone and row["page"] == "scale.md" and row["operator"] == "ours",
            Series("ours, alone, to 100,000 CRs", GREEN, "triangle", "2 3"),
        ),
    ):
        kept = [row for row in rows if keep(row) and row[column]]
        by_crs: dict[int, list[str]] = {}
        for row in kept:
            by_crs.setdefault(int(row["crs"]), []).append(row[column])
        series.points = [(float(crs), by_crs[crs]) for crs in sorted(by_crs)]
        first = kept[0]
        series.run = f"{first['build']}, {first['date']}, {first['machine']}"
        series.commands = list(dict.fromkeys(row["command"] for row in kept))
        out.append(series)
    return out


def runs_text(texts: list[str], unit: str) -> str:
    """The figures of the runs at one size: "37, 38 MiB", or "114 MiB (both runs)"."""
    if len(texts) > 1 and len(set(texts)) == 1:
        return f"{texts[0]} {unit} ({'both' if len(texts) == 2 else len(texts)} runs)"
    return f"{', '.join(texts)} {unit}"


def log_chart(
    svg: Svg,
    series: list[Series],
    x_axis: Axis,
    y_axis: Axis,
    y_ticks: list[float],
    labels: tuple[str, str],
    unit: str,
) -> None:
    top, bottom = y_axis.end, y_axis.start
    left, right = x_axis.start, x_axis.end
    for tick in y_ticks:
        y = y_axis(tick)
        svg.line(left, y, right, y, GRID)
        svg.text(left - 8, y + 4, thousands(tick), anchor="end", fill=GREY, size=12)
    for tick in (1000, 10_000, 100_000):
        x = x_axis(tick)
        svg.line(x, top, x, bottom, GRID)
        svg.text(x, bottom + 18, thousands(tick), anchor="middle", fill=GREY, size=12)
    svg.line(left, bottom, right, bottom, INK)
    svg.line(left, top, left, bottom, INK)
    svg.text((left + right) / 2, bottom + 40, labels[0], anchor="middle")
    svg.text(left - 52, (top + bottom) / 2, labels[1], anchor="middle", rotate=True)
    for item in series:
        vertices = [(x_axis(x), y_axis(median([num(t) for t in texts]))) for x, texts in item.points]
        svg.polyline(vertices, item.color, dash=item.dash)
        for (x, texts), (vx, vy) in zip(item.points, vertices, strict=True):
            for text in texts:
                svg.marker(item.marker, vx, y_axis(num(text)), item.color)
            dx, dy, anchor = item.label_at.get(x, (9, -8, "start"))
            svg.text(vx + dx, vy + dy, runs_text(texts, unit), anchor=anchor, fill=item.color, size=12, weight="bold")
    legend_top = bottom + 64
    for index, item in enumerate(series):
        y = legend_top + index * 50
        svg.line(left, y, left + 34, y, item.color, 2, item.dash)
        svg.marker(item.marker, left + 17, y, item.color)
        svg.text(left + 44, y + 4, item.label, weight="bold")
        svg.text(left + 44, y + 20, item.run, fill=GREY, size=11)
        svg.text(left + 44, y + 34, "; ".join(item.commands), fill=GREY, size=11)


def last_build(rows: list[Row], keep: Callable[[Row], bool]) -> str:
    """The build of the last row `keep` takes (the result files list runs oldest first)."""
    builds = [row["build"] for row in rows if keep(row)]
    if not builds:
        raise SystemExit("scripts/plots.py: no rows to plot")
    return builds[-1]


def compared_build(rows: list[Row]) -> str:
    """The last end-to-end build with both operators at two sizes or more: the plots' ours and Go."""

    def both_at_two_sizes(row: Row) -> bool:
        if row["page"] != "end-to-end.md":
            return False
        kept = [other for other in rows if other["build"] == row["build"] and other["page"] == row["page"]]
        sizes = {operator: {o["crs"] for o in kept if o["operator"] == operator} for operator in ("ours", GO)}
        return all(len(crs) >= 2 for crs in sizes.values())

    return last_build(rows, both_at_two_sizes)


# The e2e plots' size and x axis.
E2E_WIDTH, E2E_HEIGHT = 800, 560
E2E_X = Axis(400, 170_000, 100, 770)
# Where each series' figures go, by number of CRs (above right when not named): ours and ours alone
# sit close at 10,000, so one is above left, the other below right.
OURS_ALONE = {10_000.0: (10, 18, "start"), 100_000.0: (-10, -9, "end")}
MEMORY_LABELS = {
    "ours": {1000.0: (-10, 4, "end"), 10_000.0: (-10, -9, "end")},
    "Go operator v0.4.0 (the same runs)": {1000.0: (10, 18, "start")},
    "ours, alone, to 100,000 CRs": OURS_ALONE,
}
TIME_LABELS = {
    "ours": {1000.0: (-10, 12, "end"), 10_000.0: (10, 20, "start")},
    "Go operator v0.4.0 (the same runs)": {1000.0: (-10, -2, "end")},
    "ours, alone, to 100,000 CRs": OURS_ALONE,
}


def e2e_plot(
    rows: list[Row],
    name: str,
    column: str,
    what: tuple[str, str],
    places: dict[str, dict[float, tuple[float, float, str]]],
) -> Svg:
    """`column` of the e2e result file against the CRs; `what`: its name and unit."""
    series = e2e_series(rows, column)
    figures = [num(text) for item in series for _, texts in item.points for text in texts]
    # Room for the figures' labels above the greatest and below the least.
    ticks = log_ticks([min(figures) / 1.6, max(figures) * 1.6])
    y_axis = Axis(ticks[0], ticks[-1], 340, 50)
    for item in series:
        item.label_at = places.get(item.label, {})
    title = f"{what[0][0].upper()}{what[0][1:]} against the number of CRs: ours beside the Go operator v0.4.0"
    svg = Svg(name, E2E_WIDTH, E2E_HEIGHT, title, describe(series, what[0], what[1]))
    svg.text(E2E_WIDTH / 2, 26, title, anchor="middle", size=15, weight="bold")
    labels = ("Memcached CRs (log scale)", f"{what[0]}, {what[1]} (log scale)")
    log_chart(svg, series, E2E_X, y_axis, ticks, labels, what[1])
    return svg


def memory_plot(rows: list[Row]) -> Svg:
    what = ("peak memory (RSS)", "MiB")
    return e2e_plot(rows, "bench-memory", "peak_rss_mib", what, MEMORY_LABELS)


def time_plot(rows: list[Row]) -> Svg:
    what = ("time to converge", "s")
    return e2e_plot(rows, "bench-converge", "converged_s", what, TIME_LABELS)


def describe(series: list[Series], what: str, unit: str) -> str:
    parts = []
    for item in series:
        points = "; ".join(f"{thousands(x)} CRs: {runs_text(texts, unit)}" for x, texts in item.points)
        parts.append(f"{item.label} ({item.run}; {'; '.join(item.commands)}): {points}.")
    return (
        f"A log-log plot of {what} against the number of CRs, one line per operator through the median of the"
        " runs at each size, a marker per run. " + " ".join(parts)
    )


def swap_plot(rows: list[Row]) -> Svg:
    first = rows[0]
    row_height = 34
    top = 64
    left = 262
    right = 640
    bottom = top + row_height * len(rows)
    ends = [num(row["rename_to_optimized_ms"] or row["rename_to_live_ms"]) for row in rows]
    span = 500 * math.ceil(max(ends) / 500)
    axis = Axis(0, span, left, right, log=False)
    title = "A hot swap's timeline: from renaming the new version over the module file until it serves"
    phases = [
        (SKY, "rename → noticed: the poll, the file settling, loading and compiling the version"),
        (BLUE, "noticed → serving, in the operator: its checks and the dry run of every parent"),
        (ORANGE, "serving on baseline code until the optimized code replaces it (tiered, cold)"),
    ]
    lines = []
    for row in rows:
        live, serving = num(row["rename_to_live_ms"]), num(row["noticed_to_serving_ms"])
        text = f"{swap_label(row)}: live at {row['rename_to_live_ms']} ms"
        text += f" ({fmt(live - serving)} ms to noticed, {row['noticed_to_serving_ms']} ms noticed to serving"
        text += f", a dry run of {row['dry_run_per_parent_us']} µs per parent)"
        if row["rename_to_optimized_ms"]:
            text += f", optimized code in place at {row['rename_to_optimized_ms']} ms"
        lines.append(text)
    desc = (
        f"One bar per swap, {first['parents']} parents, {first['build']}, {first['date']}, {first['machine']}. "
        + "; ".join(lines)
        + "."
    )
    svg = Svg("bench-swap", 800, bottom + 180, title, desc)
    svg.text(400, 26, "A new version live: milliseconds after the rename", anchor="middle", size=15, weight="bold")
    svg.text(
        400,
        46,
        f"{first['parents']} parents, module file polled every {first['poll_ms']} ms",
        anchor="middle",
        fill=GREY,
        size=12,
    )
    for tick in range(0, span + 1, 500):
        x = axis(tick)
        svg.line(x, top - 4, x, bottom, GRID)
        svg.text(x, bottom + 18, f"{tick:,}", anchor="middle", fill=GREY, size=12)
    svg.line(left, bottom, right, bottom, INK)
    svg.text((left + right) / 2, bottom + 40, "ms from the rename", anchor="middle")
    for index, row in enumerate(rows):
        y = top + index * row_height
        if index and row["module"] != rows[index - 1]["module"]:
            svg.line(12, y, right, y, GREY, 1, "4 3")
        label = swap_label(row)
        svg.text(left - 10, y + row_height / 2 + 4, label, anchor="end")
        live, serving = num(row["rename_to_live_ms"]), num(row["noticed_to_serving_ms"])
        bar_top, bar_height = y + 8, row_height - 16
        svg.rect(axis(0), bar_top, axis(live - serving) - axis(0), bar_height, SKY)
        svg.rect(axis(live - serving), bar_top, axis(live) - axis(live - serving), bar_height, BLUE)
        end = live
        if row["rename_to_optimized_ms"]:
            end = num(row["rename_to_optimized_ms"])
            svg.rect(axis(live), bar_top + 3, axis(end) - axis(live), bar_height - 6, ORANGE)
            svg.line(axis(live), bar_top - 2, axis(live), bar_top + bar_height + 2, INK, 2)
        note = f"live {row['rename_to_live_ms']} ms"
        if row["rename_to_optimized_ms"]:
            note += f", optimized {row['rename_to_optimized_ms']} ms"
        # About 6.8 px a character at 12 px: a note that would run off the plot goes on its bar's end.
        if axis(end) + 6 + 6.8 * len(note) > svg.width - 4:
            svg.text(axis(end) - 6, y + row_height / 2 + 4, note, size=12, anchor="end")
        else:
            svg.text(axis(end) + 6, y + row_height / 2 + 4, note, size=12)
    legend_top = bottom + 66
    for index, (color, text) in enumerate(phases):
        y = legend_top + index * 22
        svg.rect(left - 236, y - 10, 26, 12, color)
        svg.text(left - 200, y, text, size=12)
    commands = list(dict.fromkeys(row["command"] for row in rows))
    footer = legend_top + len(phases) * 22 + 6
    svg.text(left - 236, footer, f"{first['build']}, {first['date']}, {first['machine']}", size=11, fill=GREY)
    svg.text(left - 236, footer + 15, " and ".join(commands), size=11, fill=GREY)
    return svg


def swap_label(row: Row) -> str:
    shipped = " (shipped)" if row["compile"] == SHIPPED_STRATEGY else ""
    return f"{row['module']}, {row['compile']}{shipped}, {row['swap']}"


def soak_plot(rows: list[Row]) -> Svg:
    first = rows[0]
    row_height = 28
    top = 60
    left = 370
    right = 770
    kinds = [row for row in rows if not is_aggregate(row)]
    totals = [row for row in rows if is_aggregate(row)]
    gap = 18
    bottom = top + row_height * len(rows) + gap
    axis = Axis(0.005, 50, left, right)
    title = "Soak: time from each change to convergence, p50, p99 and max, by kind of change"
    desc = (
        f"{first['build']}, {first['date']}, {first['machine']}, {first['command']} (60 minutes, 1000 CRs, churn"
        " and faults). A log-scale dot plot, one row per kind of change and per set of changes: "
        + "; ".join(
            f"{row['changes']}: {row['count']} changes, p50 {row['p50_s']} s, p99 {row['p99_s']} s,"
            f" max {row['max_s']} s"
            for row in rows
        )
        + ". The goal is a p99 under 10 s outside the injected partitions."
    )
    svg = Svg("bench-soak-convergence", 800, bottom + 120, title, desc)
    svg.text(400, 26, "Soak: change → converged, by kind of change", anchor="middle", size=15, weight="bold")
    subtitle = "every change of the 60-minute run by kind, faults included; below, sets of them; in brackets, how many"
    svg.text(400, 44, subtitle, anchor="middle", fill=GREY, size=12)
    ticks = [0.01, 0.03, 0.1, 0.3, 1, 3, 10, 30]
    for tick in ticks:
        x = axis(tick)
        svg.line(x, top - 4, x, bottom, GRID)
        svg.text(x, bottom + 18, fmt(tick), anchor="middle", fill=GREY, size=12)
    svg.line(left, bottom, right, bottom, INK)
    svg.text((left + right) / 2, bottom + 40, "seconds from the change to convergence (log scale)", anchor="middle")
    goal = axis(10)
    svg.line(goal, top - 4, goal, bottom, VERMILLION, 1.5, "5 3")
    y = top
    for group in (kinds, totals):
        if group is totals:
            y += gap
            svg.line(12, y - gap / 2, right, y - gap / 2, GREY, 1, "4 3")
        for row in group:
            middle = y + row_height / 2
            svg.text(left - 10, middle + 4, f"{row['changes']} ({int(row['count']):,})", anchor="end", size=12)
            p50, p99, most = num(row["p50_s"]), num(row["p99_s"]), num(row["max_s"])
            svg.line(axis(p50), middle, axis(most), middle, GREY, 1.5)
            svg.marker("circle", axis(p50), middle, BLUE)
            svg.marker("diamond", axis(p99), middle, VERMILLION)
            svg.marker("bar", axis(most), middle, INK)
            y += row_height
    legend_top = bottom + 66
    entries = [("circle", BLUE, "p50"), ("diamond", VERMILLION, "p99"), ("bar", INK, "max")]
    x = 30
    for shape, color, text in entries:
        svg.marker(shape, x, legend_top - 4, color)
        svg.text(x + 12, legend_top, text, size=12)
        x += 70
    svg.line(x, legend_top - 4, x + 26, legend_top - 4, VERMILLION, 1.5, "5 3")
    svg.text(x + 32, legend_top, "10 s: the goal for the p99 outside injected partitions", size=12)
    svg.text(
        30,
        legend_top + 24,
        f"{first['build']}, {first['date']}, {first['machine']}; {first['command']}",
        size=11,
        fill=GREY,
    )
    return svg


def is_aggregate(row: Row) -> bool:
    return row["changes"] == "all" or row["changes"].startswith("outside")


def plots() -> dict[str, str]:
    """Each plot's file name under docs/src/images/ and its text."""
    e2e = read_results("e2e.csv")
    swaps, soak = read_results("swap.csv"), read_results("soak-convergence.csv")
    made = [memory_plot(e2e), time_plot(e2e)]
    made.append(swap_plot([row for row in swaps if row["build"] == last_build(swaps, lambda _: True)]))
    made.append(soak_plot([row for row in soak if row["build"] == last_build(soak, lambda _: True)]))
    return {f"{svg.name}.svg": svg.render() for svg in made}


def figures_off_their_page() -> list[str]:
    """Every figure of a result file that its page's text does not hold."""
    missing = []
    for path in sorted(RESULTS.glob("*.csv")):
        with path.open(newline="", encoding="utf-8") as file:
            rows = list(csv.DictReader(file))
        pages: dict[str, str] = {}
        for line, row in enumerate(rows, start=2):
            page = row["page"]
            if page not in pages:
                # A figure counts where a table holds it, not in prose or an image's text.
                lines = (PAGES / page).read_text(encoding="utf-8").splitlines()
                pages[page] = "\n".join(line for line in lines if line.startswith("|"))
            text = pages[page]
            for column, value in row.items():
                if column in NOT_FIGURES or not re.fullmatch(r"-?\d+(\.\d+)?", value):
                    continue
                if not re.search(rf"(?<![\d.,]){re.escape(value)}(?![\d]|\.\d)", text):
                    missing.append(f"{path.relative_to(ROOT)}:{line}: {column} {value} is in no table of {page}")
    return missing


def table_rows(text: str, header: str) -> list[list[str]]:
    """The cells of each row of the first Markdown table whose header line starts with `header`."""
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if line.startswith(header):
            rows = []
            for body in lines[index + 2 :]:
                if not body.startswith("|"):
                    break
                rows.append([cell.strip() for cell in body.strip().strip("|").split("|")])
            return rows
    raise SystemExit(f"scripts/plots.py: no table whose header starts {header!r}")


def figure_of(cell: str, unit: str) -> str:
    """ "22.5 s" -> "22.5"; a dash (not measured) -> ""."""
    if cell in ("-", "\N{EN DASH}"):
        return ""
    value = cell.removesuffix(f" {unit}")
    if not re.fullmatch(r"-?\d+(\.\d+)?", value):
        raise SystemExit(f"scripts/plots.py: {cell!r} is not a figure in {unit}")
    return value


def e2e_rows(text: str, run: Row) -> list[Row]:
    """The rows of bench-e2e's first table (target/bench-e2e/results.md), with `run`'s columns."""
    machine = re.search(r"; (\d+ cores \([^)]*\), \d+ GiB RAM)", text)
    rows = []
    for cells in table_rows(text, "| operator | CRs | load at start |"):
        rss = cells[13].removesuffix(" MiB").split(", ")
        rows.append(
            {
                **run,
                "machine": run["machine"] or (machine.group(1) if machine else ""),
                "operator": cells[0],
                "crs": cells[1],
                "all_created_s": figure_of(cells[3], "s"),
                "converged_s": figure_of(cells[4], "s"),
                "cpu_to_converge_s": figure_of(cells[14], "s"),
                "rss_start_mib": rss[0],
                "rss_converged_mib": rss[1],
                "peak_rss_mib": rss[2],
                "rss_idle_mib": rss[3],
            }
        )
    return rows


def swap_rows(text: str, run: Row) -> list[Row]:
    """The rows of bench-swap's table (what it prints), with `run`'s columns."""
    head = re.search(r"polled every (\d+)(ms|s) \(wasm-operator, (\w+) module; ([^)]*(?:\([^)]*\))?[^)]*)\)", text)
    if not head:
        raise SystemExit("scripts/plots.py: no line 'swap to live, module file polled every ...'")
    poll = int(head.group(1)) * (1 if head.group(2) == "ms" else 1000)
    rows = []
    for cells in table_rows(text, "| parents | compile | swap |"):
        rows.append(
            {
                **run,
                "machine": run["machine"] or head.group(4),
                "module": head.group(3),
                "compile": cells[1],
                "swap": cells[2],
                "parents": cells[0],
                "poll_ms": str(poll),
                "rename_to_live_ms": figure_of(cells[3], "ms"),
                "rename_to_optimized_ms": figure_of(cells[4], "ms"),
                "noticed_to_serving_ms": figure_of(cells[6], "ms"),
                "dry_run_per_parent_us": figure_of(cells[8], "µs"),
            }
        )
    return rows


def add(kind: str, source: Path, run: Row) -> int:
    """Appends a bench's printed table to its result file, as the newest rows."""
    name, rows = {"e2e": ("e2e.csv", e2e_rows), "swap": ("swap.csv", swap_rows)}[kind]
    path = RESULTS / name
    with path.open(newline="", encoding="utf-8") as file:
        columns = next(csv.reader(file))
    made = rows(source.read_text(encoding="utf-8"), run)
    if kind == "e2e":
        existing = read_results(name)
        for row in made:
            same = [
                o
                for o in existing
                if (o["build"], o["operator"], o["crs"]) == (row["build"], row["operator"], row["crs"])
            ]
            row["run"] = str(1 + max((int(o["run"]) for o in same), default=0))
            existing.append(row)
    with path.open("a", newline="", encoding="utf-8") as file:
        writer = csv.DictWriter(file, columns, lineterminator="\n")
        for row in made:
            writer.writerow({column: row.get(column, "") for column in columns})
    print(f"{path.relative_to(ROOT)}: {len(made)} rows added; put the table on {run['page']}, then `make plots`")
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if a plot is not what the result files make")
    actions = parser.add_subparsers(dest="action")
    adding = actions.add_parser("add", help="append a bench's table to its result file")
    adding.add_argument("kind", choices=["e2e", "swap"], help="bench-e2e's results.md, or what bench-swap printed")
    adding.add_argument("file", type=Path)
    adding.add_argument(
        "--page", required=True, help="the page that shows the table (end-to-end.md, scale.md, swap.md)"
    )
    adding.add_argument("--build", required=True, help='the build, as the page names it ("ship 1a2b3c4")')
    adding.add_argument("--date", required=True, help="the day of the run, YYYY-MM-DD")
    adding.add_argument("--command", required=True, help="the command that ran it")
    adding.add_argument("--machine", default="", help="as the page names it (default: as the bench printed it)")
    args = parser.parse_args(argv)
    if args.action == "add":
        run = {"page": args.page, "build": args.build, "date": args.date, "command": args.command}
        return add(args.kind, args.file, {**run, "machine": args.machine})
    made = plots()
    problems = figures_off_their_page()
    if args.check:
        for name, text in made.items():
            path = IMAGES / name
            if not path.is_file():
                problems.append(f"{path.relative_to(ROOT)} is missing")
            elif path.read_text(encoding="utf-8") != text:
                problems.append(f"{path.relative_to(ROOT)} is not what the result files make now")
        for path in sorted(IMAGES.glob("bench-*.svg")):
            if path.name not in made:
                problems.append(f"{path.relative_to(ROOT)} is made by no plot")
        if problems:
            print("scripts/plots.py --check:", *problems, sep="\n  ", file=sys.stderr)
            print("Write them again with `make plots` (python3 scripts/plots.py).", file=sys.stderr)
            return 1
        return 0
    for name, text in made.items():
        (IMAGES / name).write_text(text, encoding="utf-8")
        print(f"wrote {(IMAGES / name).relative_to(ROOT)}")
    if problems:
        print(*problems, sep="\n", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
