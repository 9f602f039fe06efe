"""Filters (issue 9 item 10): a date-partitioned dataset, a filter that keeps 10% of the dates.

Systems, each in its own subprocess:

* ``shardfeed_filter``: ``Loader(filter=[("date", "in", <3 of 30 dates>)])``;
* ``shardfeed_all``: the same Loader without a filter (reads everything);
* ``pyarrow_dataset_filter``: ``pyarrow.dataset.dataset(..., partitioning="hive")
  .to_batches(filter=...)`` with the same filter.

Per system: rows/s over the passing rows, seconds to the first batch (opening
included: for shardfeed that is cataloguing + filter pruning), and bytes read
(from /proc/self/io read_bytes, page cache included, so only comparable between
runs here; plus the engine's compressed bytes for shardfeed).

    PYTHONPATH=python python3 bench/bench_filter.py [--dates 30] [--rows-per-file 200000]

Results: ``bench/results/filter.json`` (``_common``'s format, reference
``shardfeed_filter``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import _common as common

BENCH = "filter"
KEEP = 0.1


def make_dataset(root: Path, dates: int, rows: int) -> dict[str, Any]:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    marker = root / common.MARKER
    spec = {"dates": dates, "rows_per_file": rows, "version": 1}
    if marker.exists() and json.loads(marker.read_text()) == spec:
        pass
    else:
        rng = np.random.default_rng(0)
        for d in range(dates):
            folder = root / f"date=2024-{1 + d // 28:02d}-{1 + d % 28:02d}"
            folder.mkdir(parents=True, exist_ok=True)
            cols = {f"f{i}": rng.standard_normal(rows).astype(np.float32) for i in range(16)}
            cols["label"] = rng.integers(0, 10, rows)
            pq.write_table(pa.table(cols), folder / "part-0.parquet", row_group_size=50_000)
        marker.write_text(json.dumps(spec))
    files = sorted(root.rglob("*.parquet"))
    return {
        "name": f"filter_{dates}d",
        "path": str(root),
        "files": len(files),
        "rows": dates * rows,
        "bytes_on_disk": sum(f.stat().st_size for f in files),
    }


def date_filter(root: Path) -> list[tuple[str, str, list[str]]]:
    dates = sorted(p.name.split("=", 1)[1] for p in root.iterdir() if p.name.startswith("date="))
    step = round(1 / KEEP)
    return [("date", "in", dates[::step])]


def _read_bytes() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("read_bytes:"):
            return int(line.split()[1])
    return 0


def child(system: str, root: Path, runs: int, threads: int) -> None:
    import numpy as np

    baseline = common.rss_mb()
    columns = [f"f{i}" for i in range(16)]
    filt = None if system == "shardfeed_all" else date_filter(root)
    results: list[common.Run] = []
    extra: dict[str, Any] = {}
    # Imports (torch with shardfeed) are not part of the time to the first batch.
    if system.startswith("shardfeed"):
        import shardfeed
    else:
        import pyarrow.dataset  # noqa: F401
    for _ in range(runs):
        io0, t0 = _read_bytes(), time.perf_counter()
        first = None
        rows, checksum = 0, 0.0
        if system.startswith("shardfeed"):
            import shardfeed

            ld = shardfeed.Loader(
                str(root), columns=columns, batch_size=4096, shuffle=False, output="numpy",
                drop_last=False, num_threads=threads, filter=filt,
            )  # fmt: skip
            for batch in ld:
                if first is None:
                    first = time.perf_counter() - t0
                rows += len(batch["f0"])
                checksum += float(batch["f0"][0])
            stats = ld.stats()
            extra = {"engine_bytes_decoded": int(stats.get("bytes_decoded", 0))}
            if "filter" in stats:
                extra["filter"] = stats["filter"]
        else:
            import pyarrow.dataset as pads
            import pyarrow.parquet as pq

            ds = pads.dataset(str(root), partitioning="hive")
            expr = pq.filters_to_expression(filt) if filt else None
            for rb in ds.to_batches(columns=columns, filter=expr, batch_size=4096):
                if first is None:
                    first = time.perf_counter() - t0
                arr = rb.column(0).to_numpy()
                rows += len(arr)
                checksum += float(np.float32(arr[0])) if len(arr) else 0.0
        seconds = time.perf_counter() - t0
        run = common.Run(rows=rows, seconds=seconds, checksum=round(checksum, 3))
        run.extra = {"first_batch_seconds": round(first or seconds, 4),
                     "read_bytes": _read_bytes() - io0, **extra}  # fmt: skip
        results.append(run)
    common.emit_child_result(common.summarize_first_batch(system, results, baseline))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--dates", type=int, default=30)
    p.add_argument("--rows-per-file", type=int, default=200_000)
    common.add_system_arguments(p, runs=3)
    args = p.parse_args()
    if args.child:
        child(args.child, Path(args.root), args.runs, args.threads)
        return 0
    root = common.DATA_DIR / f"filter_{args.dates}d_{args.rows_per_file}"
    dataset = make_dataset(root, args.dates, args.rows_per_file)
    systems = ("shardfeed_filter", "shardfeed_all", "pyarrow_dataset_filter")
    results = common.run_systems(__file__, systems, root, args.runs, args.threads)
    firsts = {r["system"]: r["extra"]["first_batch_seconds_median"] for r in results}
    notes = [
        f"filter keeps {KEEP:.0%} of the dates: {date_filter(root)}",
        "rows/s counts delivered (passing) rows; shardfeed_all delivers every row",
        "first batch seconds (median): " + json.dumps(firsts),
    ]
    out, doc = common.write_results(
        BENCH, dataset, {"threads": args.threads, "runs": args.runs, "batch_size": 4096},
        results, reference="shardfeed_filter", notes=notes,
    )  # fmt: skip
    print(common.format_table(doc))
    print(json.dumps(doc["ratios"], indent=2))
    print("\n".join(notes))
    print(f"-> {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
