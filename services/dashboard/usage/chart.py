"""The usage chart, drawn on the server as SVG: one stacked bar per day, a segment per
repository, user or model (the biggest few; the rest as "others"), the day's runs above its bar,
and a hatched cap on days with calls of unknown cost (their height is the known part only).
No script and no library: it scales with the page and reads in a screen reader through its
title, description and the table under it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from markupsafe import Markup, escape

from services.dashboard.usage.schemas import UsageOut

WIDTH, HEIGHT = 760, 260
LEFT, RIGHT, TOP, BOTTOM = 56, 12, 24, 40
COLOURS = ("#2563eb", "#16a34a", "#d97706", "#9333ea", "#dc2626", "#0891b2")
OTHERS = "#94a3b8"


@dataclass(frozen=True)
class Series:
    label: str
    colour: str
    values: list[float]


def series(report: UsageOut, shown: int = len(COLOURS)) -> list[Series]:
    """The chart's segments: the ``shown`` biggest members, then the rest summed."""
    found = [
        Series(member.label, COLOURS[index], [day.priced_cost_usd for day in member.days])
        for index, member in enumerate(report.members[:shown])
    ]
    rest = report.members[shown:]
    if rest:
        others = [sum(member.days[i].priced_cost_usd for member in rest) for i in range(len(report.days))]
        found.append(Series(f"{len(rest)} others", OTHERS, others))
    return found


def _nice(top: float) -> float:
    """A round axis maximum at or above ``top``."""
    if top <= 0:
        return 1.0
    step = 10 ** len(str(int(top))) / 10 if top >= 1 else 0.01
    while step * 10 < top:
        step *= 10
    for factor in (1, 2, 2.5, 5, 10):
        if step * factor >= top:
            return step * factor
    return step * 10


def _money(amount: float) -> str:
    return f"${amount:,.2f}" if amount >= 0.1 or amount == 0 else f"${amount:.3f}"


def _day(day: date) -> str:
    return day.strftime("%d %b")


def usage_chart(report: UsageOut) -> Markup:
    """The report's spend per day as an SVG image (inline markup)."""
    drawn = series(report)
    count = len(report.days)
    stacks = [sum(s.values[i] for s in drawn) for i in range(count)]
    top = _nice(max(stacks, default=0.0))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = plot_w / max(count, 1)
    bar = max(min(slot * 0.7, 48), 2)
    parts: list[str] = []
    for tick in range(5):
        value = top * tick / 4
        y = TOP + plot_h - plot_h * tick / 4
        parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>')
        parts.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" class="axis">{_money(value)}</text>')
    label_every = max(1, round(count / 10))
    for i, day in enumerate(report.days):
        x = LEFT + slot * i + (slot - bar) / 2
        base: float = TOP + plot_h
        for s in drawn:
            height = plot_h * s.values[i] / top
            if height <= 0:
                continue
            base -= height
            tip = f"{s.label}, {_day(day)}: {_money(s.values[i])}"
            parts.append(
                f'<rect x="{x:.1f}" y="{base:.1f}" width="{bar:.1f}" height="{height:.1f}" fill="{s.colour}">'
                f"<title>{escape(tip)}</title></rect>"
            )
        totals = report.total_days[i]
        if totals.unpriced_calls:
            tip = f"{_day(day)}: {totals.unpriced_calls} calls of unknown cost, not in the bar"
            parts.append(
                f'<rect x="{x:.1f}" y="{base - 8:.1f}" width="{bar:.1f}" height="8" fill="url(#unknown)" '
                'class="unknown">'
                f"<title>{escape(tip)}</title></rect>"
            )
            base -= 8
        if totals.runs:
            parts.append(
                f'<text x="{x + bar / 2:.1f}" y="{base - 4:.1f}" text-anchor="middle" class="runs">{totals.runs}</text>'
            )
        if i % label_every == 0 or i == count - 1:
            parts.append(
                f'<text x="{x + bar / 2:.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle" class="axis">'
                f"{escape(_day(day))}</text>"
            )
    legend_x = LEFT
    for s in drawn:
        parts.append(f'<rect x="{legend_x}" y="{HEIGHT - 14}" width="10" height="10" fill="{s.colour}"/>')
        parts.append(f'<text x="{legend_x + 14}" y="{HEIGHT - 5}" class="legend">{escape(s.label[:28])}</text>')
        legend_x += 22 + 7 * min(len(s.label), 28)
    total = sum(stacks)
    summary = (
        f"Spend per day by {report.by} over {count} days, {_money(total)} of known cost in all; "
        "numbers above the bars are runs; a hatched cap marks calls of unknown cost."
    )
    return Markup(
        f'<svg class="usage-chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-labelledby="chart-title chart-desc" '
        f'xmlns="http://www.w3.org/2000/svg">'
        f'<title id="chart-title">Spend per day by {escape(report.by)}</title>'
        f'<desc id="chart-desc">{escape(summary)}</desc>'
        '<defs><pattern id="unknown" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
        '<rect width="6" height="6" fill="#fde68a"/>'
        '<line x1="0" y1="0" x2="0" y2="6" stroke="#b45309" stroke-width="3"/>'
        "</pattern></defs>" + "".join(parts) + "</svg>"
    )
