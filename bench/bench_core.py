"""End-to-end benchmark: Parquet -> [batch, 256] float32 torch batches.

Compares, on one synthetic tabular dataset (256 float32 features ``f000..f255`` + an
int64 ``label``), in one run:

* ``shardfeed``: ``shardfeed.Loader`` with ``shuffle=True``, ``stack={"x": features}``,
  ``output="torch"`` (the system under test, and the reference of all ratios);
* ``shardfeed_noshuffle``: the same with ``shuffle=False`` (extra: the cost of shuffling);
* ``diy_main``: ``ParquetFile.iter_batches`` -> ``numpy.column_stack`` ->
  ``torch.from_numpy`` in the main process (no shuffling);
* ``diy_dataloader_2w``: the same inside a ``torch.utils.data.DataLoader`` with 2 workers,
  files split among the workers;
* ``read_table_limit``: ``pyarrow.parquet.read_table(file, columns=..., use_threads=True)``
  over every file: decode only, no batching, no shuffling -- the limit.

Two more, on request:

* ``shardfeed_crc`` (added with ``--page-checksums``): ``shardfeed`` with
  ``verify_page_checksums=True``, on a dataset written with a CRC32 per page:
  ``shardfeed_crc/shardfeed`` is what verifying costs;
* ``shardfeed_baseline`` (added with ``--baseline DIR``): ``shardfeed`` run from another
  build of the package in DIR (``pip install --no-deps --no-build-isolation --target DIR
  <checkout>``): ``shardfeed/shardfeed_baseline`` compares two versions in one run.

Each system runs in its own subprocess (so peak RSS is its own) for ``--repeats`` passes
over the dataset; the page cache is warmed first.  Results go to
``bench/results/core.json`` (see ``_common`` for the format) and a table is printed.

Usage::

    PYTHONPATH=python python3 bench/bench_core.py                 # >= 1 GB dataset
    PYTHONPATH=python python3 bench/bench_core.py --rows 50000 --repeats 2   # quick
    python3 bench/bench_core.py --page-checksums --systems shardfeed,shardfeed_crc
    python3 bench/bench_core.py --baseline /tmp/old --systems shardfeed,shardfeed_baseline
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import _common as common

SYSTEMS = ("shardfeed", "shardfeed_noshuffle", "diy_main", "diy_dataloader_2w", "read_table_limit")
# Variants of the reference, each in its own process with its own environment.
OPTIONAL = ("shardfeed_crc", "shardfeed_baseline")
REFERENCE = "shardfeed"
# The aims: >= 3x the DIY path, >= 0.8x the decode-only limit (with shuffling).
TARGETS = {"shardfeed/diy_main": 3.0, "shardfeed/read_table_limit": 0.8}


# --------------------------------------------------------------------------------------
# The systems (each runs in a child process)
# --------------------------------------------------------------------------------------


def _shardfeed(
    args: argparse.Namespace, files: list[str], shuffle: bool, name: str
) -> dict[str, Any]:
    import shardfeed
    import torch  # noqa: F401  (Loader imports it on the first batch; count it in the baseline)

    features = _features(args)
    base = common.rss_mb()
    # (Only when set: a baseline build may predate the setting.)
    verify = {"verify_page_checksums": True} if name == "shardfeed_crc" else {}
    loader = shardfeed.Loader(
        args.data_path,
        columns=["label"],
        batch_size=args.batch_size,
        shuffle=shuffle,
        seed=0,
        stack={"x": features},
        output="torch",
        num_threads=args.threads,
        **verify,
    )
    runs = []
    for epoch in range(args.repeats):
        loader.set_epoch(epoch)

        def one_pass() -> tuple[int, float]:
            rows, acc = 0, 0.0
            for batch in loader:
                x, y = batch["x"], batch["label"]
                rows += x.shape[0]
                acc += float(x[-1, -1]) + float(y[0])  # touch every batch
            return rows, acc

        run = common.timed(one_pass)
        stats = loader.stats()
        run.extra = {
            k: round(v, 4) if isinstance(v, float) else v
            for k, v in stats.items()
            if k != "decoded_row_groups"
        }
        runs.append(run)
    notes = (
        f"Loader(shuffle={shuffle}, shuffle_window=4, prefetch=2, "
        f"num_threads={args.threads or 'default'}), stack x=[B,{len(features)}] "
        "float32 assembled in C++, drop_last=True"
    )
    return common.summarize(
        name, runs, base, notes,
        extra={"batches_per_epoch": len(loader), "package": str(Path(shardfeed.__file__).parent)},
    )  # fmt: skip


def _diy_batches(files: list[str], features: list[str], batch_size: int) -> Any:
    """The do-it-yourself path: iter_batches -> column_stack -> torch.from_numpy."""
    import numpy as np
    import pyarrow.parquet as pq
    import torch

    columns = [*features, "label"]
    n = len(features)
    for path in files:
        pf = pq.ParquetFile(path)
        for rb in pf.iter_batches(batch_size=batch_size, columns=columns):
            x = np.column_stack([rb.column(i).to_numpy() for i in range(n)])
            y = rb.column(n).to_numpy().copy()  # Arrow's buffer is read-only: torch warns
            yield {"x": torch.from_numpy(x), "label": torch.from_numpy(y)}


def _diy_main(args: argparse.Namespace, files: list[str]) -> dict[str, Any]:
    import torch  # noqa: F401  (same imports as the other systems before the baseline)

    features = _features(args)
    base = common.rss_mb()
    runs = []
    for _ in range(args.repeats):

        def one_pass() -> tuple[int, float]:
            rows, acc = 0, 0.0
            for batch in _diy_batches(files, features, args.batch_size):
                x, y = batch["x"], batch["label"]
                rows += x.shape[0]
                acc += float(x[-1, -1]) + float(y[0])
            return rows, acc

        runs.append(common.timed(one_pass))
    notes = (
        "pq.ParquetFile.iter_batches(batch_size) -> np.column_stack -> torch.from_numpy, "
        "main process, files in order, no shuffling"
    )
    return common.summarize("diy_main", runs, base, notes)


def _diy_dataloader(args: argparse.Namespace, files: list[str]) -> dict[str, Any]:
    import torch.utils.data as tud

    features = _features(args)
    batch_size = args.batch_size

    class DiyDataset(tud.IterableDataset):  # type: ignore[type-arg]
        """Files split among DataLoader workers: worker k reads files k, k+W, ..."""

        def __iter__(self) -> Any:
            info = tud.get_worker_info()
            mine = files if info is None else files[info.id :: info.num_workers]
            return _diy_batches(mine, features, batch_size)

    base = common.rss_mb()
    workers = args.workers
    runs = []
    for _ in range(args.repeats):
        loader = tud.DataLoader(DiyDataset(), batch_size=None, num_workers=workers)

        def one_pass(loader: tud.DataLoader = loader) -> tuple[int, float]:  # type: ignore[type-arg]
            rows, acc = 0, 0.0
            for batch in loader:
                x, y = batch["x"], batch["label"]
                rows += x.shape[0]
                acc += float(x[-1, -1]) + float(y[0])
            return rows, acc

        runs.append(common.timed(one_pass))
        del loader
    notes = (
        f"the diy_main path in a torch DataLoader(num_workers={workers}, batch_size=None), "
        "files split among workers (fork), batches pass through shared memory; "
        "worker start-up included in each pass; peak RSS = main + largest worker"
    )
    return common.summarize(f"diy_dataloader_{workers}w", runs, base, notes)


def _read_table(args: argparse.Namespace, files: list[str]) -> dict[str, Any]:
    import pyarrow.parquet as pq
    import torch  # noqa: F401  (same imports as the other systems before the baseline)

    columns = [*_features(args), "label"]
    base = common.rss_mb()
    runs = []
    for _ in range(args.repeats):

        def one_pass() -> tuple[int, float]:
            rows, acc = 0, 0.0
            for path in files:
                table = pq.read_table(path, columns=columns, use_threads=True)
                rows += table.num_rows
                acc += float(table.column(len(columns) - 2).chunk(0)[0].as_py())
                del table
            return rows, acc

        runs.append(common.timed(one_pass))
    notes = (
        "pq.read_table(file, columns=all, use_threads=True) file by file: decode only, "
        "no batching, no stacking, no shuffling"
    )
    return common.summarize("read_table_limit", runs, base, notes)


def _features(args: argparse.Namespace) -> list[str]:
    return [f"f{i:03d}" for i in range(args.features)]


def run_system(args: argparse.Namespace) -> None:
    files = sorted(str(p) for p in Path(args.data_path).glob("*.parquet"))
    name = args.run_system
    if name in ("shardfeed", *OPTIONAL):
        result = _shardfeed(args, files, shuffle=True, name=name)
    elif name == "shardfeed_noshuffle":
        result = _shardfeed(args, files, shuffle=False, name=name)
    elif name == "diy_main":
        result = _diy_main(args, files)
    elif name.startswith("diy_dataloader"):
        result = _diy_dataloader(args, files)
    elif name == "read_table_limit":
        result = _read_table(args, files)
    else:
        raise SystemExit(f"unknown system {name!r}")
    common.emit_child_result(result)


# --------------------------------------------------------------------------------------
# The parent
# --------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rows", type=int, default=1_100_000, help="dataset rows (default 1.1M)")
    p.add_argument("--files", type=int, default=8, help="Parquet files (default 8)")
    p.add_argument("--row-group-rows", type=int, default=68_750, help="rows per row group")
    p.add_argument("--features", type=int, default=256, help="float32 feature columns")
    p.add_argument("--batch-size", type=int, default=4096)
    p.add_argument("--repeats", type=int, default=3, help="timed passes per system")
    p.add_argument(
        "--page-checksums",
        action="store_true",
        help="write the dataset with a CRC32 per page (the reader verifies them)",
    )
    p.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="a folder with another build of the shardfeed package: adds shardfeed_baseline",
    )
    p.add_argument("--threads", type=int, default=None, help="shardfeed num_threads")
    p.add_argument("--workers", type=int, default=2, help="DataLoader workers (DIY path)")
    p.add_argument(
        "--systems",
        default=None,
        help=f"comma-separated subset of {','.join(SYSTEMS + OPTIONAL)} (default: all that apply)",
    )
    p.add_argument("--output", type=Path, default=common.RESULTS_DIR / "core.json")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per system")
    # Internal: run one system in this process and emit its result.
    p.add_argument("--run-system", help=argparse.SUPPRESS)
    p.add_argument("--data-path", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.run_system:
        run_system(args)
        return 0

    if args.systems is None:
        systems = list(SYSTEMS)
        systems += ["shardfeed_crc"] if args.page_checksums else []
        systems += ["shardfeed_baseline"] if args.baseline else []
    else:
        systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = [s for s in systems if s not in SYSTEMS + OPTIONAL]
    if unknown:
        raise SystemExit(f"unknown systems {unknown}; choose from {SYSTEMS + OPTIONAL}")
    if "shardfeed_baseline" in systems and not (args.baseline and args.baseline.is_dir()):
        raise SystemExit("shardfeed_baseline needs --baseline DIR (a folder with the package)")
    envs: dict[str, dict[str, str]] = {}
    if args.baseline:
        path = [str(args.baseline.resolve()), os.environ.get("PYTHONPATH", "")]
        envs["shardfeed_baseline"] = {"PYTHONPATH": os.pathsep.join(p for p in path if p)}
    spec = common.TabularSpec(
        rows=args.rows,
        files=args.files,
        row_group_rows=args.row_group_rows,
        features=args.features,
        page_checksums=args.page_checksums,
    )
    print(f"dataset {spec.name} ...", file=sys.stderr, flush=True)
    dataset = common.ensure_tabular_dataset(spec)
    files = common.dataset_files(dataset)
    warm = common.warm_page_cache(files)
    print(
        f"dataset: {dataset['rows']:,} rows, {dataset['bytes_on_disk'] / 1e9:.2f} GB, "
        f"{dataset['files']} files, {dataset['row_groups']} row groups "
        f"(page cache warmed in {warm:.1f} s)",
        file=sys.stderr,
        flush=True,
    )

    load_start = common.load_average()
    if load_start[0] > 0.5:
        print(
            f"warning: the machine is busy (load average {load_start[0]:.2f}); "
            "other work on the CPUs distorts the numbers",
            file=sys.stderr,
            flush=True,
        )
    results = []
    script = str(Path(__file__).resolve())
    for system in systems:
        child = [
            script,
            "--run-system", system,
            "--data-path", dataset["path"],
            "--features", str(args.features),
            "--batch-size", str(args.batch_size),
            "--repeats", str(args.repeats),
            "--workers", str(args.workers),
        ]  # fmt: skip
        if args.threads is not None:
            child += ["--threads", str(args.threads)]
        t0 = time.perf_counter()
        result = common.run_child(child, timeout=args.timeout, env=envs.get(system))
        if system.startswith("diy_dataloader"):
            result["system"] = system  # the name the user asked for
        results.append(result)
        print(
            f"  {system:<22} {result['rows_per_second_median']:>12,.0f} rows/s "
            f"(runs {[round(r['rows_per_second']) for r in result['runs']]}, "
            f"peak RSS {result['peak_rss_mb']:.0f} MB, {time.perf_counter() - t0:.1f} s, "
            f"other load {result.get('background', {}).get('other_cpu_share', float('nan')):.0%})",
            file=sys.stderr,
            flush=True,
        )

    reference = REFERENCE if REFERENCE in systems else None
    targets = {k: v for k, v in TARGETS.items() if all(s in systems for s in k.split("/"))}
    config = {
        "batch_size": args.batch_size,
        "output": "torch [batch, features] float32 + label int64",
        "repeats": args.repeats,
        "shardfeed_threads": args.threads,
        "page_checksums": args.page_checksums,
        "baseline": str(args.baseline) if args.baseline else None,
        "dataloader_workers": args.workers,
        "shuffle": {"shardfeed": True, "others": False},
        "page_cache": f"warm (all files read once before the first system, {warm:.1f} s)",
        "process_per_system": True,
        "load_average_start": load_start,
        "load_average_end": common.load_average(),
    }
    notes = [
        "Page cache warm: this measures decode + batching, not storage.",
        "Only shardfeed shuffles; the DIY path and the limit read files in order.",
        "rows/s counts rows delivered; shardfeed drops the last partial batch (drop_last).",
        "peak_rss_mb = ru_maxrss(self) + ru_maxrss(children) (largest reaped child); "
        "baseline_rss_mb = RSS after imports, before the first pass.",
    ]
    out, doc = common.write_results(
        "core", dataset, config, results, reference, targets, notes, path=args.output
    )
    print()
    print(
        f"core benchmark: {dataset['rows']:,} rows x {args.features} float32 "
        f"({dataset['bytes_on_disk'] / 1e9:.2f} GB on disk, {dataset['files']} files, "
        f"{dataset['row_groups']} row groups), batch {args.batch_size}, "
        f"{doc['machine']['cpus']} CPUs, median of {args.repeats}, warm page cache"
    )
    print(common.format_table(doc))
    print(f"\nratios: {json.dumps(doc['ratios'])}")
    print(f"written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
