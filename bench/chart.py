"""Draws bench/RESULTS.png for suite.py (run by the bench environment's python, which has
matplotlib; the project's environment does not).

Input: a JSON file ``{"out": PATH, "series": [{"title", "reference",
"rows": [[label, rows_per_second_median, [per-run rows/s...]], ...]}]}``: one panel per
series, horizontal bars of the median rows/s (log scale), whiskers from the slowest to
the fastest run, the value and the ratio to the reference at the end of each bar.

A series with ``"kind": "memory"`` (``bench_memory.py``) is drawn as two panels side by
side, for the same bars: rows/s (log scale) on the left, peak RSS above the RSS after
imports (MB, linear) on the right; its rows are ``[label, rows_per_second_median, [per-run
rows/s...], rss_mb, [per-run rss_mb...], reference rows/s, reference rss_mb, hatched]``
(the reference: shardfeed at the same row-group size; ``hatched``: the large row groups).
"""

from __future__ import annotations

import json
import sys
from typing import Any

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


def _bars(
    ax: Any,
    labels: list[str],
    values: list[float],
    runs: list[list[float]],
    refs: list[float | None],
    log: bool,
    hatches: list[bool] | None = None,
    unit: str = "",
) -> None:
    """Horizontal bars with whiskers from the smallest to the largest run, each bar's
    value and its ratio to its reference at its end."""
    lo = [max(v - min(r or [v]), 0) for v, r in zip(values, runs, strict=False)]
    hi = [max(max(r or [v]) - v, 0) for v, r in zip(values, runs, strict=False)]
    y = list(range(len(values)))[::-1]
    bars = ax.barh(
        y,
        values,
        xerr=[lo, hi],
        color=[color(lab) for lab in labels],
        alpha=0.85,
        error_kw={"elinewidth": 1, "capsize": 3},
    )
    for bar, hatched in zip(bars, hatches or [], strict=False):
        if hatched:
            bar.set_hatch("//")
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=9)
    if log:
        ax.set_xscale("log")
        ax.set_xlim(min(values) / 2, max(values) * 8)
    else:
        ax.set_xlim(0, max(values) * 1.45)
    for yi, v, h, ref in zip(y, values, hi, refs, strict=False):
        txt = f"{v:,.0f}{unit}"
        if ref:
            txt += f"  ({v / ref:.2f}x)"
        ax.text(
            (v + h) * 1.1 if log else v + h + max(values) * 0.02, yi, txt, va="center", fontsize=8
        )
    ax.grid(axis="x", which="both", alpha=0.25)


def main(path: str) -> int:
    spec = json.loads(open(path).read())
    series = spec["series"]
    heights = [max(1.6, 0.42 * len(s["rows"]) + 0.9) for s in series]
    fig = plt.figure(
        figsize=(11 if all(s.get("kind") != "memory" for s in series) else 13, sum(heights))
    )
    grid = fig.add_gridspec(len(series), 2, height_ratios=heights, width_ratios=[1.25, 1])
    plain = [i for i, s in enumerate(series) if s.get("kind") != "memory"]
    for i, s in enumerate(series):
        rows = s["rows"]
        labels = [r[0] for r in rows]
        values = [max(r[1], 1.0) for r in rows]
        if s.get("kind") == "memory":
            ax = fig.add_subplot(grid[i, 0])
            _bars(
                ax,
                labels,
                values,
                [r[2] for r in rows],
                [r[5] for r in rows],
                log=True,
                hatches=[bool(r[7]) for r in rows],
            )
            ax.set_title(s["title"], fontsize=9, loc="left")
            ax.set_xlabel("rows per second (median; whiskers: slowest to fastest run; log)")
            ax2 = fig.add_subplot(grid[i, 1], sharey=ax)
            _bars(
                ax2,
                labels,
                [max(r[3], 0.0) for r in rows],
                [r[4] for r in rows],
                [r[6] for r in rows],
                log=False,
                hatches=[bool(r[7]) for r in rows],
                unit=" MB",
            )
            ax2.tick_params(labelleft=False)
            ax2.set_title("peak RSS above the RSS after imports", fontsize=9, loc="left")
            ax2.set_xlabel("MB (median; whiskers: smallest to largest run)")
            continue
        ax = fig.add_subplot(grid[i, :])
        _bars(
            ax, labels, values, [r[2] for r in rows], [s.get("reference_rps")] * len(rows), log=True
        )
        ax.set_title(s["title"], fontsize=10, loc="left")
        if i == plain[-1]:
            ax.set_xlabel("rows per second (median; whiskers: slowest to fastest run; log scale)")
    fig.tight_layout()
    fig.savefig(spec["out"], dpi=110)
    print(f"chart written to {spec['out']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
