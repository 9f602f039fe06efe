"""End-to-end training benchmark (issue 12, item 6): a DLRM-style model trained on the CPU.

Dataset: ``bench_transforms``'s tabular dataset with ids and nulls (``bench/data/tabular_ids_*``,
generated once, then reused): 256 float32 features ``f000..f255`` (the first 16 with 1%
nulls), int64 ``label`` (uniform in [0, 10)), int64 ``user_id`` (2% nulls) and ``item_id``,
string ``category`` (5% nulls); 1.1M rows, 8 files, 16 row groups by default.

Model (``_train.py``): embeddings (dimension 16) of ``user_id`` (100,000 buckets),
``item_id`` (10,000) and ``category`` (1,000 + a null bucket), a bottom MLP over the 256
dense features (256 -> 128 -> 16), the four vectors concatenated into a top MLP (64 -> 64
-> 1); ``BCEWithLogitsLoss`` on ``label % 2``; Adam (lr 1e-3); weights from
``torch.manual_seed(0)``.  ``--steps`` timed steps after ``--warmup`` untimed ones, the same
for every system, each step on a full batch of ``--batch-size`` samples.  The step runs
with ``torch.set_num_threads(--torch-threads)`` (default: half the CPUs, at least 1, so
that the loader has the rest), the same for every system.

Preprocessing, the same values in every system: the dense features' nulls become 0;
integer ids ``splitmix64(id) % n`` with nulls as -1 first; ``category``
``fnv1a64(utf-8 bytes) % 1000`` with nulls in bucket 1000.  Systems, each in its own
process (peak RSS and CPU time its own):

* ``shardfeed_loader``: ``Loader(shuffle=True, seed=0, stack={"x": features},
  fill_null=0, transforms=[FillNull(-1) + HashBucket per integer id, HashBucket +
  FillNull(1000) on category], output="torch")``: all of it in the engine's threads,
  ``set_epoch(e)`` per epoch (the reference);
* ``shardfeed_torch_2w``: ``TorchDataset`` (same arguments) in ``DataLoader(batch_size=None,
  num_workers=2)``, a new DataLoader per epoch;
* ``petastorm_baseline`` / ``petastorm_optimized``: Petastorm 0.13.1 in its own environment
  (``petastorm_worker.py --phase train``): ``make_batch_reader(transform_spec=
  TransformSpec(the preprocessing on each row group's pandas DataFrame))`` +
  ``BatchedDataLoader``; the optimized one adds the local-disk cache,
  ``convert_early_to_numpy`` and a seed; the trainer's ``torch.stack`` of the 256 feature
  columns counts as waiting;
* ``diy_dataloader_2w``: ``bench_core``'s DIY path (``ParquetFile.iter_batches`` ->
  ``np.column_stack`` -> ``torch.from_numpy`` in ``DataLoader(num_workers=2,
  batch_size=None)``, files split among the workers, no shuffling) with the preprocessing in
  NumPy in the workers; a file's last, short batch is skipped.

Measured per system: training samples/s over the timed steps (steps x batch / their wall
time), the data-wait share (time in ``next()`` of the batch iterator, the iterator's
creation at each epoch and any conversion into tensors included / wall time), the median
step time (wait + compute) and compute time, CPU seconds of the process and its workers
during the timed steps, peak RSS.  Results: ``bench/results/train.json`` (``_common``'s
format, reference ``shardfeed_loader``) and a table.  Usage::

    python3 bench/bench_train.py                 # 1.1M rows, 200 steps of 4096
    python3 bench/bench_train.py --quick         # 60k rows, 20 steps: a smoke test
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import _common as common
import _measure as measure
import bench_transforms
from bench_transforms import INT_IDS, STRING_IDS

SYSTEMS = (
    "shardfeed_loader",
    "shardfeed_torch_2w",
    "petastorm_baseline",
    "petastorm_optimized",
    "diy_dataloader_2w",
)
PETASTORM = ("petastorm_baseline", "petastorm_optimized")
REFERENCE = "shardfeed_loader"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _features(n: int) -> list[str]:
    return [f"f{i:03d}" for i in range(n)]


# ======================================================================================
# Children (project environment)
# ======================================================================================


def _shardfeed_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    from shardfeed.transforms import FillNull, HashBucket, Transform

    transforms: list[Transform] = []
    for col, n in INT_IDS.items():
        transforms += [FillNull(col, value=-1), HashBucket(col, num_buckets=n)]
    for col, n in STRING_IDS.items():
        transforms += [HashBucket(col, num_buckets=n), FillNull(col, value=n)]
    return {
        "columns": ["label", *INT_IDS, *STRING_IDS],
        "batch_size": args.batch_size,
        "shuffle": True,
        "seed": 0,
        "stack": {"x": _features(args.features)},
        "fill_null": 0.0,
        "transforms": transforms,
        "output": "torch",
        "num_threads": args.threads,
    }


def _diy_batch(rb: Any, features: list[str]) -> dict[str, Any]:
    """One record batch -> the trainer's tensors, the preprocessing in NumPy."""
    import _train
    import numpy as np
    import pyarrow.compute as pc
    import torch

    def dense(col: Any) -> Any:
        return (pc.fill_null(col, 0.0) if col.null_count else col).to_numpy()

    x = np.column_stack([dense(rb.column(f)) for f in features])
    out = {"x": x, "label": rb.column("label").to_numpy().copy()}
    for col, n in INT_IDS.items():
        out[col] = _train.hash_ints(pc.fill_null(rb.column(col), -1).to_numpy(), n)
    for col, n in STRING_IDS.items():
        c = rb.column(col)
        null = c.is_null().to_numpy(zero_copy_only=False)
        out[col] = _train.hash_strings(c.to_numpy(zero_copy_only=False), null, n)
    return {k: torch.from_numpy(v) for k, v in out.items()}


def _diy_batches(files: list[str], features: list[str], batch_size: int) -> Any:
    """``bench_core``'s DIY path with the columns and the preprocessing of the trainer."""
    import pyarrow.parquet as pq

    columns = [*features, "label", *INT_IDS, *STRING_IDS]
    for path in files:
        for rb in pq.ParquetFile(path).iter_batches(batch_size=batch_size, columns=columns):
            yield _diy_batch(rb, features)


def _make(args: argparse.Namespace, files: list[str]) -> tuple[Any, str]:
    """(make_iter(epoch), notes) of a project-environment system."""
    import torch.utils.data as tud

    workers = args.workers
    if args.child == "shardfeed_loader":
        import shardfeed

        loader = shardfeed.Loader(args.data_path, **_shardfeed_kwargs(args))

        def make_loader(epoch: int) -> Any:
            loader.set_epoch(epoch)
            return loader

        return make_loader, f"Loader, num_threads={args.threads or 'default'}, set_epoch per epoch"
    if args.child == "shardfeed_torch_2w":
        import shardfeed

        ds = shardfeed.TorchDataset(args.data_path, **_shardfeed_kwargs(args))

        def make_torch(epoch: int) -> Any:
            ds.set_epoch(epoch)
            return tud.DataLoader(ds, batch_size=None, num_workers=workers)

        return make_torch, f"TorchDataset in DataLoader(batch_size=None, num_workers={workers})"
    if args.child == "diy_dataloader_2w":
        features, batch_size = _features(args.features), args.batch_size

        class DiyDataset(tud.IterableDataset):  # type: ignore[type-arg]
            """Files split among DataLoader workers: worker k reads files k, k+W, ..."""

            def __iter__(self) -> Any:
                info = tud.get_worker_info()
                mine = files if info is None else files[info.id :: info.num_workers]
                return _diy_batches(mine, features, batch_size)

        def make_diy(epoch: int) -> Any:
            return tud.DataLoader(DiyDataset(), batch_size=None, num_workers=workers)

        notes = (
            f"ParquetFile.iter_batches -> fill/hash in NumPy -> np.column_stack -> "
            f"torch.from_numpy in DataLoader(num_workers={workers}), files split among "
            "workers, no shuffling; a file's short last batch is skipped"
        )
        return make_diy, notes
    raise SystemExit(f"unknown system {args.child!r}")


def run_child(args: argparse.Namespace) -> None:
    """In a child: trains with one system's batches; emits one result line."""
    import _train

    _train.configure_torch(args.torch_threads)
    files = sorted(str(p) for p in Path(args.data_path).glob("*.parquet"))
    base = common.rss_mb()
    make, notes = _make(args, files)
    outcome = _train.train(
        make,
        steps=args.steps,
        warmup=args.warmup,
        batch_size=args.batch_size,
        features=args.features,
    )
    common.emit_child_result(_train.result(args.child, outcome, base, notes))


# ======================================================================================
# The parent
# ======================================================================================


def _child_argv(args: argparse.Namespace, system: str, dataset: dict[str, Any]) -> list[str]:
    if system in PETASTORM:
        argv = [str(common.BENCH_DIR / "petastorm_worker.py"), "--system", system]
        argv += ["--phase", "train"]
    else:
        argv = [str(Path(__file__).resolve()), "--child", system, "--workers", str(args.workers)]
        if args.threads is not None:
            argv += ["--threads", str(args.threads)]
    return [
        *argv,
        "--data-path", dataset["path"],
        "--features", str(args.features),
        "--batch-size", str(args.batch_size),
        "--steps", str(args.steps),
        "--warmup", str(args.warmup),
        "--torch-threads", str(args.torch_threads),
    ]  # fmt: skip


def _petastorm_problem() -> str | None:
    """None when Petastorm's environment is there (built now if needed), else why not."""
    import petastorm_env

    try:
        petastorm_env.ensure()
    except (SystemExit, OSError, subprocess.CalledProcessError) as e:
        return f"skipped: no Petastorm environment ({e})"
    return None


def _run_system(
    args: argparse.Namespace, system: str, argv: list[str], files: list[str]
) -> dict[str, Any] | str:
    """The system's result, or why there is none; a disturbed run is run again."""
    res: dict[str, Any] | str = "skipped: not run"
    for attempt in range(1 + args.retries):
        measure.warm_files(files)
        if args.quiet_window > 0:
            measure.wait_quiet(window=3.0, threshold=0.10, max_wait=20.0)
        t0 = time.perf_counter()
        try:
            res = common.run_child(argv, timeout=args.timeout)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            log(f"  {system}: FAILED ({e})")
            return f"failed: {e}"
        share = res.get("background", {}).get("other_cpu_share", 0.0)
        res["attempts"] = attempt + 1
        log(
            f"  {system:<20} {res['rows_per_second_median']:>10,.0f} samples/s  "
            f"data wait {res['extra']['data_wait_share']:6.1%}  "
            f"{time.perf_counter() - t0:5.1f} s  other load {share:.0%}"
        )
        if share <= args.busy_threshold:
            break
    return res


def format_table(doc: dict[str, Any], skipped: dict[str, str]) -> str:
    """A table of the training results (and the systems without one)."""
    header = (
        f"{'system':<20} {'samples/s':>10} {'x ref':>6} {'data wait':>9} {'w/ warm-up':>10} "
        f"{'step ms':>8} {'compute ms':>10} {'CPU s':>7} {'cores':>5} {'peak RSS MB':>11} "
        f"{'other load':>10}"
    )
    by_name = {r["system"]: r for r in doc["results"]}
    ref = by_name.get(doc.get("reference") or "", {}).get("rows_per_second_median")
    lines = [header, "-" * len(header)]
    for r in doc["results"]:
        e, sps = r["extra"], r["rows_per_second_median"]
        rel = f"{sps / ref:.2f}" if ref else "-"
        share = r.get("background", {}).get("other_cpu_share")
        lines.append(
            f"{r['system']:<20} {sps:>10,.0f} {rel:>6} {e['data_wait_share']:>9.1%} "
            f"{e['data_wait_share_with_warmup']:>10.1%} {e['step_ms_median']:>8.1f} "
            f"{e['compute_ms_median']:>10.1f} {e['cpu_seconds']:>7.1f} {e['cpu_cores_busy']:>5.2f} "
            f"{r['peak_rss_mb']:>11.0f} {'-' if share is None else f'{share:.0%}':>10}"
        )
    lines += [f"{name:<20} {reason}" for name, reason in skipped.items()]
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rows", type=int, default=1_100_000)
    p.add_argument("--files", type=int, default=8)
    p.add_argument("--row-group-rows", type=int, default=68_750)
    p.add_argument("--features", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=4096)
    p.add_argument("--steps", type=int, default=200, help="timed training steps per system")
    p.add_argument("--warmup", type=int, default=10, help="untimed steps before them")
    p.add_argument(
        "--torch-threads",
        type=int,
        default=max(1, (os.cpu_count() or 2) // 2),
        help="torch.set_num_threads of the training step (default: half the CPUs)",
    )
    p.add_argument("--threads", type=int, default=None, help="shardfeed num_threads")
    p.add_argument("--workers", type=int, default=2, help="DataLoader workers")
    p.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated subset")
    p.add_argument("--quick", action="store_true", help="60k rows, 3 + 20 steps: a smoke test")
    p.add_argument("--busy-threshold", type=float, default=0.10)
    p.add_argument("--retries", type=int, default=1, help="reruns of a disturbed system")
    p.add_argument(
        "--quiet-window",
        type=float,
        default=20.0,
        help="seconds of idle CPUs to wait for before measuring (0: don't)",
    )
    p.add_argument("--quiet-max-wait", type=float, default=900.0)
    p.add_argument("--output", type=Path, default=common.RESULTS_DIR / "train.json")
    p.add_argument("--timeout", type=float, default=900, help="seconds per system")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--data-path", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:
        args.rows, args.steps, args.warmup = 60_000, 20, 3
        args.quiet_window, args.retries = 0, 0
    return args


def _systems(args: argparse.Namespace) -> list[str]:
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = [s for s in systems if s not in SYSTEMS]
    if unknown:
        raise SystemExit(f"unknown systems {unknown}; choose from {','.join(SYSTEMS)}")
    return systems


def _wait_quiet(args: argparse.Namespace) -> dict[str, Any] | None:
    if args.quiet_window <= 0:
        return None
    log(f"waiting for {args.quiet_window:.0f} s of idle CPUs ...")
    quiet = measure.wait_quiet(args.quiet_window, 0.05, args.quiet_max_wait, log=log)
    quiet["window"] = args.quiet_window
    log(f"  {quiet}")
    return quiet


def _config(args: argparse.Namespace, quiet: dict[str, Any] | None) -> dict[str, Any]:
    import _train

    return {
        "workload": "train",
        "model": _train.describe_model(args.features),
        "steps": args.steps,
        "warmup_steps": args.warmup,
        "batch_size": args.batch_size,
        "torch_threads": args.torch_threads,
        "shardfeed_threads": args.threads,
        "dataloader_workers": args.workers,
        "preprocessing": {
            "dense_nulls": 0.0,
            "int_ids": {c: f"splitmix64(null -> -1) % {n}" for c, n in INT_IDS.items()},
            "string_ids": {c: f"fnv1a64(utf-8) % {n}, nulls {n}" for c, n in STRING_IDS.items()},
        },
        "page_cache": "warm",
        "quiet": quiet,
        "shardfeed_build": measure.shardfeed_build(),
        "load_average_end": common.load_average(),
    }


NOTES = [
    "rows_per_second_median: training samples/s of the timed steps (after the warm-up); "
    "rows_per_second_first: the same over every step, warm-up and start-up included.",
    "extra.data_wait_share: time getting the next batch (iterator creation per epoch and any "
    "conversion into tensors included) / wall time of the timed steps.",
    "Every step trains on a full batch; short batches (end of a file for the DIY path, end of "
    "an epoch for Petastorm) are skipped and their time counts as waiting.",
    "Only shardfeed shuffles deterministically; Petastorm shuffles row groups, DIY reads in order.",
    "petastorm_*: TransformSpec (pandas: fillna, splitmix64/fnv1a64 in NumPy) in the reader's "
    "thread pool of 10; x = torch.stack(256 columns) in the trainer, counted as waiting.",
    "An epoch without a full batch (Petastorm 0.13.1 now and then ends one early, even empty) "
    "is passed over; extra.epochs_without_full_batch counts them.",
]


def _barren_notes(results: list[dict[str, Any]]) -> list[str]:
    """A note per system that met epochs without a full batch."""
    return [
        f"{r['system']}: {r['extra']['epochs_without_full_batch']} epoch(s) without a full "
        f"batch (rows per finished epoch: {r['extra']['rows_per_finished_epoch']})"
        for r in results
        if r["extra"].get("epochs_without_full_batch")
    ]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        run_child(args)
        return 0
    systems = _systems(args)
    spec = common.TabularSpec(
        rows=args.rows, files=args.files, row_group_rows=args.row_group_rows, features=args.features
    )
    dataset = bench_transforms.ensure_dataset(spec)
    files = common.dataset_files(dataset)
    log(f"train: {dataset['description']}")
    log(f"  {args.warmup} + {args.steps} steps of {args.batch_size}, torch {args.torch_threads} th")
    quiet = _wait_quiet(args)
    results: list[dict[str, Any]] = []
    skipped: dict[str, str] = {}
    petastorm_problem: str | None = None
    if any(s in PETASTORM for s in systems):
        petastorm_problem = _petastorm_problem()
    for system in systems:
        if system in PETASTORM and petastorm_problem:
            skipped[system] = petastorm_problem
            continue
        res = _run_system(args, system, _child_argv(args, system, dataset), files)
        if isinstance(res, str):
            skipped[system] = res
        else:
            results.append(res)
    reference = REFERENCE if any(r["system"] == REFERENCE for r in results) else None
    config = {**_config(args, quiet), "skipped": skipped}
    notes = [*NOTES, *(f"{name}: {reason}" for name, reason in skipped.items())]
    notes += _barren_notes(results)
    out, doc = common.write_results(
        "train", dataset, config, results, reference, notes=notes, path=args.output
    )
    print(
        f"train benchmark: {dataset['rows']:,} rows, {args.warmup} + {args.steps} steps of "
        f"{args.batch_size}, torch threads {args.torch_threads}, {doc['machine']['cpus']} CPUs"
    )
    print(format_table(doc, skipped))
    for note in _barren_notes(results):
        print(f"note: {note}")
    print(f"written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
