"""A breakdown report's marginals as HTML: each two-way marginal a heatmap (rows the first
attribute's labels, columns the second's; the shade is the cell's consistent share of the
largest cell, ten steps, so that no inline style is needed), each one-way marginal a table;
every cell shows its unbiased estimate and its interval."""

from __future__ import annotations

from html import escape

from ldptel.aggregator.csv_export import ATTRIBUTE_JOIN
from ldptel.aggregator.model import BreakdownCell, BreakdownMarginal, Report
from ldptel.aggregator.table import count_text

SHADES = 10


def breakdown_html(report: Report) -> str:
    section = report["breakdown"]
    confidence = f"{report['confidence']:.0%}"
    parts = [
        f'<p class="note">Each cell: the estimated number of users, and its {confidence} '
        "confidence interval. Shade: the consistent count (post-processed; biased) as a "
        "share of the largest cell.</p>"
    ]
    for marginal in section["marginals"]:
        if len(marginal["attributes"]) == 2:
            parts.append(heatmap_html(marginal, section["attributes"]))
        else:
            parts.append(one_way_html(marginal))
    parts.append(f'<p class="note">{escape(section["consistency"])}.</p>')
    return "\n".join(parts)


def _cell_text(cell: BreakdownCell) -> str:
    return (
        f'{count_text(cell["estimate"])}<br><span class="ci">[{count_text(cell["ci_low"])}, '
        f"{count_text(cell['ci_high'])}]</span>"
    )


def _shade(cell: BreakdownCell, largest: float) -> int:
    return 0 if largest <= 0 else min(SHADES - 1, int(SHADES * cell["consistent"] / largest))


def heatmap_html(marginal: BreakdownMarginal, attributes: dict[str, list[str]]) -> str:
    first, second = marginal["attributes"]
    columns = attributes[second]
    largest = max(cell["consistent"] for cell in marginal["cells"])
    head = f"<tr><th>{escape(first)} \\ {escape(second)}</th>" + "".join(
        f"<th>{escape(label)}</th>" for label in columns
    )
    rows = []
    for r, label in enumerate(attributes[first]):
        cells = marginal["cells"][r * len(columns) : (r + 1) * len(columns)]
        rows.append(
            f"<tr><th>{escape(label)}</th>"
            + "".join(
                f'<td class="heat-{_shade(cell, largest)}">{_cell_text(cell)}</td>'
                for cell in cells
            )
            + "</tr>"
        )
    name = escape(ATTRIBUTE_JOIN.join(marginal["attributes"]))
    return (
        f'<h3>{name}</h3><div class="scroll"><table class="breakdown-heatmap" '
        f'data-marginal="{name}"><thead>{head}</tr></thead><tbody>{"".join(rows)}</tbody>'
        "</table></div>"
    )


def one_way_html(marginal: BreakdownMarginal) -> str:
    [name] = marginal["attributes"]
    rows = "".join(
        f"<tr><td>{escape(cell['values'][0])}</td><td>{_cell_text(cell)}</td>"
        f"<td>{count_text(cell['stderr'])}</td></tr>"
        for cell in marginal["cells"]
    )
    return (
        f'<h3>{escape(name)}</h3><table class="breakdown-marginal" data-marginal="{escape(name)}">'
        f"<thead><tr><th>{escape(name)}</th><th>estimate</th><th>stderr</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )
