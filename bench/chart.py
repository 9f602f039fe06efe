"""Draws bench/RESULTS.png for suite.py (run by the bench environment's python, which has
matplotlib; the project's environment does not).

Input: a JSON file ``{"out": PATH, "series": [{"title", "reference",
"rows": [[label, rows_per_second_median, [per-run rows/s...]], ...]}]}``: one panel per
series, horizontal bars of the median rows/s (log scale), whiskers from the slowest to
the fastest run, the value and the ratio to the reference at the end of each bar.
"""

from __future__ import annotations

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def color(label: str) -> str:
    low = label.lower()
    if low.startswith("shardfeed") or low.startswith("builtin") or "shardfeed" in low:
        return "#1f77b4"
    if "petastorm" in low:
        return "#d62728"
    if low.startswith("limit") or "limit" in low:
        return "#7f7f7f"
    if "diy" in low or "numpy" in low:
        return "#ff7f0e"
    return "#2ca02c"


def main(path: str) -> int:
    spec = json.loads(open(path).read())
    series = spec["series"]
    heights = [max(1.6, 0.42 * len(s["rows"]) + 0.9) for s in series]
    fig, axes = plt.subplots(
        len(series),
        1,
        figsize=(11, sum(heights)),
        gridspec_kw={"height_ratios": heights},
        squeeze=False,
    )
    for ax, s in zip(axes[:, 0], series, strict=False):
        rows = s["rows"]
        labels = [r[0] for r in rows]
        values = [max(r[1], 1.0) for r in rows]
        lo = [max(r[1] - min(r[2] or [r[1]]), 0) for r in rows]
        hi = [max(max(r[2] or [r[1]]) - r[1], 0) for r in rows]
        ref = s.get("reference_rps")
        y = list(range(len(rows)))[::-1]
        ax.barh(
            y,
            values,
            xerr=[lo, hi],
            color=[color(lab) for lab in labels],
            alpha=0.85,
            error_kw={"elinewidth": 1, "capsize": 3},
        )
        ax.set_yticks(y)
        ax.set_yticklabels(labels, fontsize=9)
        ax.set_xscale("log")
        ax.set_xlim(min(values) / 2, max(values) * 8)
        for yi, v, h in zip(y, values, hi, strict=False):
            txt = f"{v:,.0f}"
            if ref:
                txt += f"  ({v / ref:.2f}x)"
            ax.text((v + h) * 1.1, yi, txt, va="center", fontsize=8)
        ax.set_title(s["title"], fontsize=10, loc="left")
        ax.grid(axis="x", which="both", alpha=0.25)
    axes[-1, 0].set_xlabel("rows per second (median; whiskers: slowest to fastest run; log scale)")
    fig.tight_layout()
    fig.savefig(spec["out"], dpi=110)
    print(f"chart written to {spec['out']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
