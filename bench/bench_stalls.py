"""Stall benchmark (issue 12, item 1): the consumer's wait against the training step's length.

The Loader's own per-batch time T is measured first: ``shardfeed profile`` with no step,
its wall time over the batches it delivered (start-up included: the first batches wait
for a whole window's decode), the median of ``--repeats`` runs; also reported, the stricter
steady T (after the start-up batches) and each step as a multiple of it. Then, for each multiple
m of ``--multiples``, ``shardfeed profile --step-ms m*T`` runs ``--repeats`` times. Each
run is a fresh process reading ``--batches`` batches of ``[4096, 256]`` from the core
benchmark's dataset, with a sleeping step so the cores are free for the engine. Reported
per m: the steady-state consumer wait of every run (``profile``'s: after the start-up
batches, one per thread), their median and their maximum. The aim: at most 2% in every
run at m >= 1.25, and at most 5% at m = 1.1.

Results: ``bench/results/stalls.json`` (``_common``'s format: one "system" per multiple,
whose rows/s is the delivered rate) and a table.

Usage::

    python3 bench/bench_stalls.py [--repeats 5] [--batches 260] [--multiples 0.8,1,1.1,1.25,1.5,2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import _common as common


def profile(path: str, args: argparse.Namespace, step_ms: float) -> dict[str, Any]:
    code = "import sys; from shardfeed.cli import main; sys.exit(main())"
    cmd = [sys.executable, "-c", code, "profile", path, "--stack", "x=f*", "--columns", "label",
           "--batch-size", str(args.batch_size), "--batches", str(args.batches),
           "--step-ms", f"{step_ms:.3f}", "--json"]  # fmt: skip
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=args.timeout)
    return dict(json.loads(out.stdout))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rows", type=int, default=1_100_000)
    p.add_argument("--batch-size", type=int, default=4096)
    p.add_argument("--batches", type=int, default=260)  # an epoch has 268
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--multiples", default="0.8,1,1.1,1.25,1.5,2")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--output", type=Path, default=common.RESULTS_DIR / "stalls.json")
    args = p.parse_args(argv)
    spec = common.TabularSpec(rows=args.rows)
    dataset = common.ensure_tabular_dataset(spec)
    common.warm_page_cache(common.dataset_files(dataset))
    path = dataset["path"]
    alone = [profile(path, args, 0.0) for _ in range(args.repeats)]
    # The whole pass (start-up included) over the batches: the start-up batches
    # wait for a whole window's decode, so leaving them out would flatter T.
    per_batch_ms = 1e3 * statistics.median(r["wall_seconds"] / r["batches"] for r in alone)
    # The strict reading: after the start-up batches only (steady state).
    steady_ms = 1e3 * statistics.median(
        (r["wall_seconds"] - r["startup_seconds"]) / max(1, r["batches"] - r["startup_batches"])
        for r in alone
    )
    print(
        f"the loader alone: {per_batch_ms:.2f} ms per batch, {steady_ms:.2f} after the start-up "
        f"(medians of {args.repeats})"
    )
    results = []
    for m in [float(v) for v in args.multiples.split(",")]:
        step = m * per_batch_ms
        runs = [profile(path, args, step) for _ in range(args.repeats)]
        waits = [r["consumer_wait_fraction"] for r in runs]
        print(
            f"step {m:4.2f}x = {step:6.2f} ms: wait median {statistics.median(waits):6.2%}  "
            f"max {max(waits):6.2%}  runs " + " ".join(f"{w:.1%}" for w in waits),
            flush=True,
        )
        results.append(
            {
                "system": f"step_{m:g}x",
                "rows_per_second_median": statistics.median(r["rows_per_second"] for r in runs),
                "seconds_median": statistics.median(r["wall_seconds"] for r in runs),
                "rows_per_run": runs[0]["rows"],
                "runs": [
                    {
                        "rows": r["rows"],
                        "seconds": r["wall_seconds"],
                        "rows_per_second": r["rows_per_second"],
                        "extra": {
                            "consumer_wait_fraction": r["consumer_wait_fraction"],
                            "startup_seconds": r["startup_seconds"],
                        },
                    }
                    for r in runs
                ],
                "extra": {
                    "multiple": m,
                    "multiple_of_steady": step / steady_ms,
                    "step_ms": step,
                    "wait_median": statistics.median(waits),
                    "wait_max": max(waits),
                },
            }
        )
    config = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    config["per_batch_ms"] = per_batch_ms
    config["steady_per_batch_ms"] = steady_ms
    out, _ = common.write_results("stalls", dataset, config, results, path=args.output)
    print(f"written to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
