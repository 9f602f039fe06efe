"""The benchmark suite (issue 5): shardfeed against Petastorm, the DIY path and the limits.

One command regenerates ``bench/RESULTS.md`` (tables) and ``bench/RESULTS.png`` (a chart)
from the JSON results in ``_common``'s format::

    python3 bench/suite.py                  # everything, ~15-25 min on 2 CPUs
    python3 bench/suite.py --report-only    # RESULTS.md + chart from bench/results/*.json
    python3 bench/suite.py --quick          # a small dataset, 2 measured epochs: a smoke test

Workloads: the tabular dataset (``_common``: 1.1M rows x 256 float32 + int64 label, 1.13
GB, 8 files, 16 row groups) read locally with a warm page cache and with a cold one
(dropped before every epoch: ``/proc/sys/vm/drop_caches`` as root, else
``posix_fadvise(DONTNEED)``; ``mincore`` checks that it worked); the remote workload of
issue 3 (``bench_remote.py``, included from ``bench/results/remote.json`` when that file
exists, run with ``--run-remote``); the transform benchmark of issue 4
(``bench_transforms.py``, run unless ``--skip-transforms``); memory against throughput at
two row-group sizes and the shuffle's effective window of issue 11 (``bench_memory.py``,
run unless ``--skip-memory``).

Systems, each in its own process (peak RSS its own), ``--epochs`` passes (1 + 3: the
first pass is shown apart, the median and spread come from the others):

* ``shardfeed_loader``: ``shardfeed.Loader(shuffle=True, stack={"x": features},
  columns=["label"], output="torch")`` (the reference);
* ``shardfeed_tier_warm`` (warm only): the same Loader with ``cache_decoded=True`` in a fresh
  ``cache_dir``: the first pass decodes and fills the decoded tier, the measured ones map it
  (the stack's row-major matrix is stored there: a gather, no decode);
* ``shardfeed_tier_global`` (warm only): the same with ``shuffle="global"`` (a uniform
  permutation of every row, gathered from the mapped tier);
* ``shardfeed_torch_2w``: ``shardfeed.TorchDataset`` (same arguments) in a
  ``DataLoader(batch_size=None, num_workers=2)`` (worker 0 runs the one engine and deals
  worker 1 its batches; batches reach the main process through shared slabs);
* ``shardfeed_torch_2w_persistent``: the same ``DataLoader`` made once with
  ``persistent_workers=True`` and iterated every pass (``set_epoch`` in between): the
  workers, their engine's memory and the next pass started early outlive a pass;
* ``shardfeed_torch_2w_tier`` (warm only): the same with ``cache_decoded=True`` in a fresh
  ``cache_dir``: pass 1 decodes each row group once and fills the tier, passes 2+ map it;
  each pass's ``cpu_seconds`` counts the workers' CPU time too;
* ``petastorm_baseline`` / ``petastorm_optimized``: see ``petastorm_worker.py`` (own
  virtual environment, ``petastorm_env.py``);
* ``diy_dataloader_2w``: ``ParquetFile.iter_batches`` -> ``numpy.column_stack`` in a torch
  DataLoader with 2 workers (``bench_core``'s DIY path);
* ``read_table_limit``: ``pyarrow.parquet.read_table`` of the same columns, file by file
  (decode only);
* ``file_read_limit``: the files' bytes read into a buffer (warm: a copy out of the page
  cache; cold: the disk);
* ``memcpy_limit`` (warm only): one memory copy of the bytes every batch holds (256 x 4 +
  8 bytes per row), in batch-sized chunks.

Measures: rows/s per epoch (median, run-to-run spread = (max - min) / median), ratios to
every other system, peak RSS, the consumer's wait fraction under a simulated training
step (a sleep per batch; steps derived from shardfeed's own per-batch time), and whether
the sample order (a hash of the label sequence) was the same across runs and across
worker counts.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import _common as common
import _measure as measure

SUITE_SYSTEMS = (
    "shardfeed_loader",
    "shardfeed_tier_warm",
    "shardfeed_tier_global",
    "shardfeed_torch_2w",
    "shardfeed_torch_2w_persistent",
    "shardfeed_torch_2w_tier",
    "petastorm_baseline",
    "petastorm_optimized",
    "diy_dataloader_2w",
    "read_table_limit",
    "file_read_limit",
    "memcpy_limit",
)
PETASTORM = ("petastorm_baseline", "petastorm_optimized")
LIMITS = ("read_table_limit", "file_read_limit", "memcpy_limit")
WARM_ONLY = (
    "memcpy_limit",
    "shardfeed_tier_warm",
    "shardfeed_tier_global",
    "shardfeed_torch_2w_tier",
)
# Systems whose wait under a simulated step and sample order are measured.
LOADERS = (
    "shardfeed_loader",
    "shardfeed_torch_2w",
    "shardfeed_torch_2w_persistent",
    "petastorm_baseline",
    "petastorm_optimized",
    "diy_dataloader_2w",
)
REFERENCE = "shardfeed_loader"
RATIO_AIMS = {
    "shardfeed_loader/petastorm_baseline": 10.0,
    "shardfeed_loader/petastorm_optimized": 4.0,
}
WAIT_AIM = 0.02
SPREAD_AIM = 0.05
RESULTS_MD = common.BENCH_DIR / "RESULTS.md"
RESULTS_PNG = common.BENCH_DIR / "RESULTS.png"

LABELS = {
    "shardfeed_loader": "shardfeed Loader",
    "shardfeed_tier_warm": "shardfeed Loader, decoded tier (epochs 2+)",
    "shardfeed_tier_global": "shardfeed Loader, shuffle='global', decoded tier (epochs 2+)",
    "shardfeed_torch_2w": "shardfeed TorchDataset, 2 workers",
    "shardfeed_torch_2w_persistent": "shardfeed TorchDataset, 2 persistent workers",
    "shardfeed_torch_2w_tier": "shardfeed TorchDataset, 2 workers, decoded tier",
    "petastorm_baseline": "Petastorm 0.13.1 baseline",
    "petastorm_optimized": "Petastorm 0.13.1 optimized",
    "diy_dataloader_2w": "DIY iter_batches, DataLoader 2 workers",
    "read_table_limit": "limit: read_table (decode only)",
    "file_read_limit": "limit: file bytes read",
    "memcpy_limit": "limit: memory copy",
}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _features(n: int) -> list[str]:
    return [f"f{i:03d}" for i in range(n)]


# ======================================================================================
# Children (project environment)
# ======================================================================================


def _shardfeed_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "columns": ["label"],
        "batch_size": args.batch_size,
        "shuffle": True,
        "seed": 0,
        "stack": {"x": _features(args.features)},
        "output": "torch",
    }


def _fresh_cache() -> str:
    """An empty cache folder for this child, removed when it exits."""
    import atexit
    import shutil
    import tempfile

    cache = tempfile.mkdtemp(prefix="shardfeed-bench-tier-")
    atexit.register(shutil.rmtree, cache, True)
    return cache


def _make_iter(args: argparse.Namespace, system: str, files: list[str]) -> Any:
    """Returns (setup, make_iter(epoch), notes) for a project-environment system."""
    import numpy as np
    import torch.utils.data as tud

    feats = _features(args.features)
    workers = args.workers
    if system in ("shardfeed_loader", "shardfeed_tier_warm", "shardfeed_tier_global"):
        import shardfeed

        kwargs = _shardfeed_kwargs(args)
        notes = (
            f"Loader(shuffle=True, seed=0, shuffle_window=4, prefetch=2, num_threads="
            f"{args.threads or 'default'}), stack x=[B,{len(feats)}] float32, drop_last"
        )
        if system != "shardfeed_loader":
            cache = _fresh_cache()
            kwargs.update(cache_dir=cache, cache_decoded=True)
            if system == "shardfeed_tier_global":
                kwargs["shuffle"] = "global"
            notes = (
                f"shardfeed_loader's Loader (shuffle={kwargs['shuffle']!r}) + cache_dir (fresh, "
                f"{cache}) + cache_decoded=True: pass 1 fills the decoded tier, passes 2+ map it"
            )
        loader = shardfeed.Loader(args.data_path, num_threads=args.threads, **kwargs)

        def make(epoch: int) -> Any:
            loader.set_epoch(epoch)
            return loader

        return make, notes, loader
    if system in ("shardfeed_torch_2w", "shardfeed_torch_2w_tier", "shardfeed_torch_2w_persistent"):
        import shardfeed

        kwargs = _shardfeed_kwargs(args)
        if system == "shardfeed_torch_2w_tier":
            kwargs.update(cache_dir=_fresh_cache(), cache_decoded=True)
        ds = shardfeed.TorchDataset(args.data_path, num_threads=args.threads, **kwargs)

        persistent = system == "shardfeed_torch_2w_persistent" and workers > 0
        kept = (
            tud.DataLoader(ds, batch_size=None, num_workers=workers, persistent_workers=True)
            if persistent
            else None
        )

        def make(epoch: int) -> Any:
            ds.set_epoch(epoch)
            if kept is not None:
                return kept
            return tud.DataLoader(ds, batch_size=None, num_workers=workers)

        started = (
            "persistent workers started once (their start in the first pass)"
            if persistent
            else "workers started per epoch (included)"
        )
        notes = (
            f"TorchDataset (Loader's arguments) in DataLoader(batch_size=None, "
            f"num_workers={workers}); {started}; worker 0 "
            "runs the one engine, batches travel through shared slabs"
        )
        return make, notes, None
    if system == "diy_dataloader_2w":
        import bench_core

        batch_size = args.batch_size

        class DiyDataset(tud.IterableDataset):  # type: ignore[type-arg]
            def __iter__(self) -> Any:
                info = tud.get_worker_info()
                mine = files if info is None else files[info.id :: info.num_workers]
                return bench_core._diy_batches(mine, feats, batch_size)

        def make(epoch: int) -> Any:
            return tud.DataLoader(DiyDataset(), batch_size=None, num_workers=workers)

        notes = (
            f"ParquetFile.iter_batches -> np.column_stack -> torch.from_numpy in "
            f"DataLoader(num_workers={workers}), files split among workers, no shuffling"
        )
        return make, notes, None
    if system == "read_table_limit":
        import pyarrow.parquet as pq

        columns = [*feats, "label"]

        def tables() -> Any:
            for path in files:
                table = pq.read_table(path, columns=columns, use_threads=True)
                # A stand-in batch: first feature column and the label (no stacking).
                yield {
                    "x": table.column(0).chunk(0).to_numpy()[:, None],
                    "label": table.column(len(columns) - 1).to_numpy(),
                }
                del table

        notes = "pq.read_table(file, columns=features+label, use_threads=True): decode only"
        return (lambda epoch: tables()), notes, None
    if system == "file_read_limit":
        chunk = 16 << 20
        buf = bytearray(chunk)
        rows_total = args.rows_total
        total_bytes = sum(os.path.getsize(f) for f in files)

        def reads() -> Any:
            got = 0
            for path in files:
                with open(path, "rb", buffering=0) as f:
                    while n := f.readinto(buf):
                        got += n
            rows = rows_total  # the bytes of every row were read
            yield {"x": np.zeros((1, 1), np.float32), "label": np.zeros(rows, np.int64)}
            assert got == total_bytes

        notes = "every file read with readinto into a 16 MB buffer (page cache or disk)"
        return (lambda epoch: reads()), notes, None
    if system == "memcpy_limit":
        row_bytes = args.features * 4 + 8
        rows_total = args.rows_total
        src = np.random.default_rng(0).integers(0, 255, size=512 << 20, dtype=np.uint8)
        dst = np.empty(args.batch_size * row_bytes, np.uint8)
        chunk = dst.size
        per_src = src.size // chunk

        def copies() -> Any:
            done = 0
            i = 0
            while done < rows_total:
                n = min(args.batch_size, rows_total - done)
                off = (i % per_src) * chunk
                np.copyto(dst[: n * row_bytes], src[off : off + n * row_bytes])
                done += n
                i += 1
            yield {"x": dst[:4].view(np.float32)[None, :], "label": np.zeros(done, np.int64)}

        notes = (
            f"np.copyto of {row_bytes} bytes per row in {args.batch_size}-row chunks from "
            "a 512 MB source (one thread)"
        )
        return (lambda epoch: copies()), notes, None
    raise SystemExit(f"unknown system {system!r}")


def run_child_system(args: argparse.Namespace) -> None:
    """In a child: one system, one phase; emits one result line."""
    import torch  # noqa: F401  (imported before the baseline RSS for every system)

    system = args.child
    files = sorted(str(p) for p in Path(args.data_path).glob("*.parquet"))
    args.rows_total = args.rows_total or 0
    base = common.rss_mb()
    passes: list[measure.Pass] = []
    drops: list[dict[str, Any]] = []
    extra: dict[str, Any] = {"phase": args.phase, "mode": args.mode}
    if args.phase == "order":
        # The same stream with other worker/thread counts: epoch 0, one pass each.
        results: dict[str, str] = {}
        for variant in _order_variants(system):
            vargs = argparse.Namespace(**vars(args))
            vargs.threads, vargs.workers = variant.get("threads"), variant.get("workers", 2)
            make, _, _ = _make_iter(vargs, system, files)
            q = measure.consume(lambda make=make: make(0))
            results[json.dumps(variant, sort_keys=True)] = q.order_hash
            log(f"    {system} order {variant}: {q.order_hash} ({q.rows_per_second:,.0f} rows/s)")
        extra["order_variants"] = results
        runs = [common.Run(rows=q.rows, seconds=q.seconds, checksum=q.checksum)]
        common.emit_child_result(common.summarize(system, runs, base, "", extra=extra))
        return
    make, notes, loader = _make_iter(args, system, files)
    if args.phase == "step":
        # One pass without a step first (fresh memory, caches), then one per step, each on
        # its own epoch, at most --step-batches batches (an epoch at most).
        passes.append(measure.consume(lambda: make(0)))
        steps = {}
        for i, (step_ms, batches) in enumerate(_step_plan(args)):
            q = measure.consume(
                lambda i=i: make(i + 1), step_seconds=step_ms / 1000, max_batches=batches
            )
            if loader is not None:
                stats = loader.stats()
                q.extra["engine_consumer_wait_seconds"] = round(stats["consumer_wait_seconds"], 4)
                q.extra["engine_worker_wait_seconds"] = round(stats["worker_wait_seconds"], 4)
            q.extra["step_ms"] = step_ms
            steps[f"{step_ms:g}"] = q.as_dict()
            log(
                f"    {system} step {step_ms:g} ms: wait {q.wait_fraction_steady:.1%} "
                f"(with start-up {q.wait_fraction:.1%}), {q.batches} batches"
            )
        extra["steps"] = steps
    else:
        for epoch in range(args.epochs):
            if args.mode == "cold":
                drops.append(measure.drop_page_cache(files))
            q = measure.consume(lambda epoch=epoch: make(epoch))
            if loader is not None:
                stats = loader.stats()
                q.extra["stages"] = {k: round(v["seconds"], 4) for k, v in stats["stages"].items()}
                q.extra["threads"] = stats["threads"]
                q.extra["consumer_wait_seconds"] = round(stats["consumer_wait_seconds"], 4)
            passes.append(q)
            log(f"    {system} {args.mode} epoch {epoch}: {q.rows_per_second:,.0f} rows/s")
    first, measured = passes[0], passes[1:] if len(passes) > 1 else passes
    runs = [
        common.Run(rows=q.rows, seconds=q.seconds, checksum=q.checksum, extra=q.as_dict())
        for q in measured
    ]
    result = common.summarize(system, runs, base, notes)
    result["rows_per_second_first"] = first.rows_per_second
    extra.update({"epochs": [q.as_dict() for q in passes], "page_cache_drops": drops})
    result["extra"] = extra
    common.emit_child_result(result)


def _step_plan(args: argparse.Namespace) -> list[tuple[float, int]]:
    """(step ms, batches) for each ``--step-ms`` entry."""
    return [
        (float(a), int(b)) for a, b in (x.split(":") for x in args.step_ms.split(",") if x.strip())
    ]


def _order_variants(system: str) -> list[dict[str, int]]:
    if system == "shardfeed_loader":
        return [{"threads": 1}, {"threads": 3}]
    if system in ("shardfeed_torch_2w", "shardfeed_torch_2w_persistent"):
        return [{"workers": 0}, {"workers": 1}, {"workers": 3}]
    if system == "diy_dataloader_2w":
        return [{"workers": 1}]
    return []


# ======================================================================================
# The parent
# ======================================================================================


class Runner:
    """Runs children, retrying a run that other processes disturbed."""

    def __init__(self, args: argparse.Namespace, dataset: dict[str, Any]) -> None:
        self.args = args
        self.dataset = dataset
        self.files = common.dataset_files(dataset)
        self.script = str(Path(__file__).resolve())
        self.petastorm_script = str(common.BENCH_DIR / "petastorm_worker.py")

    def argv(self, system: str, phase: str, mode: str, **kw: Any) -> list[str]:
        a = self.args
        if system in PETASTORM:
            argv = [
                self.petastorm_script,
                "--system",
                system,
                "--epochs",
                str(a.petastorm_epochs),
                "--files",
                str(a.petastorm_files),
            ]
            if kw.get("workers_count") is not None:
                argv += ["--workers-count", str(kw["workers_count"])]
        else:
            argv = [
                self.script,
                "--child",
                system,
                "--epochs",
                str(a.epochs),
                "--workers",
                str(a.workers),
                "--rows-total",
                str(self.dataset["rows"]),
            ]
            if a.threads is not None:
                argv += ["--threads", str(a.threads)]
        argv += [
            "--phase",
            phase,
            "--mode",
            mode,
            "--data-path",
            self.dataset["path"],
            "--features",
            str(a.features),
            "--batch-size",
            str(a.batch_size),
        ]
        if phase == "step":
            argv += ["--step-ms", ",".join(f"{ms:g}:{n}" for ms, n in kw["plan"])]
        return argv

    def run(self, system: str, phase: str, mode: str, **kw: Any) -> dict[str, Any] | None:
        argv = self.argv(system, phase, mode, **kw)
        for attempt in range(1 + self.args.retries):
            if mode == "warm":
                measure.warm_files(self.files)
            if self.args.quiet_gap > 0:
                measure.wait_quiet(
                    window=self.args.quiet_gap, threshold=0.10, max_wait=self.args.quiet_gap * 6
                )
            t0 = time.perf_counter()
            try:
                result = common.run_child(argv, timeout=self.args.timeout)
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                log(f"  {system} {phase} {mode}: FAILED ({e})")
                return None
            share = result.get("background", {}).get("other_cpu_share", 0.0)
            result["attempts"] = attempt + 1
            log(
                f"  {system:<20} {phase:<10} {mode:<4} "
                f"{result['rows_per_second_median']:>12,.0f} rows/s  "
                f"peak RSS {result['peak_rss_mb']:>6.0f} MB  "
                f"{time.perf_counter() - t0:5.1f} s  other load {share:.0%}"
            )
            if share <= self.args.busy_threshold or attempt == self.args.retries:
                return result
            log(f"  {system}: other processes used {share:.0%} of the CPUs: running it again")
        return None


def _spread(result: dict[str, Any]) -> float:
    rps = [r["rows_per_second"] for r in result["runs"]]
    med = statistics.median(rps)
    return (max(rps) - min(rps)) / med if med else float("nan")


def _epoch_hashes(result: dict[str, Any] | None) -> list[str]:
    if not result:
        return []
    return [e["order_hash"] for e in result.get("extra", {}).get("epochs", [])]


def _order_summary(
    system: str,
    warm: dict[str, Any] | None,
    cold: dict[str, Any] | None,
    order: dict[str, Any] | None,
) -> dict[str, Any]:
    """Same order across runs (the warm and the cold process, epoch by epoch; for
    Petastorm also the epochs of one process, each a new reader with the same
    settings) and across worker counts (epoch 0)."""
    hw, hc = _epoch_hashes(warm), _epoch_hashes(cold)
    pairs = list(zip(hw, hc, strict=False))
    out: dict[str, Any] = {"warm_epoch_hashes": hw, "cold_epoch_hashes": hc}
    across_runs = bool(pairs) and all(a == b for a, b in pairs)
    compared = len(pairs)
    if system in PETASTORM:
        # Every epoch is a new reader with identical arguments: each one is a run.
        all_h = hw + hc
        across_runs = bool(all_h) and len(set(all_h)) == 1
        compared = len(all_h)
        out["distinct_orders"] = len(set(all_h))
    out["same_across_runs"] = across_runs if compared >= 2 else None
    out["runs_compared"] = compared
    variants = (order or {}).get("extra", {}).get("order_variants", {})
    if variants and hw:
        ref = hw[0]
        out["worker_variants"] = {k: v == ref for k, v in variants.items()}
        out["same_across_worker_counts"] = all(v == ref for v in variants.values())
    else:
        out["same_across_worker_counts"] = None
    return out


def measure_local(args: argparse.Namespace, dataset: dict[str, Any]) -> list[Path]:
    runner = Runner(args, dataset)
    systems = [s for s in args.systems if not (s in PETASTORM and args.skip_petastorm)]
    results: dict[str, dict[str, dict[str, Any]]] = {"warm": {}, "cold": {}}
    modes = [m for m in ("warm", "cold") if m in args.modes]
    for mode in modes:
        log(f"local, page cache {mode}:")
        for system in systems:
            if mode == "cold" and system in WARM_ONLY:
                continue
            r = runner.run(system, "throughput", mode)
            if r is not None:
                results[mode][system] = r

    # Simulated steps, derived from shardfeed's per-batch time (warm).
    ref = results["warm"].get(REFERENCE) or results["cold"].get(REFERENCE)
    steps: list[float] = []
    per_batch_ms = None
    if ref is not None:
        per_batch_ms = args.batch_size / ref["rows_per_second_median"] * 1000
        steps = sorted({round(per_batch_ms * f, 1) for f in args.step_factors})
    step_results: dict[str, dict[str, dict[str, Any]]] = {}
    if steps and "warm" in modes:
        log(f"simulated steps {steps} ms (shardfeed Loader: {per_batch_ms:.2f} ms per batch):")
        for system in [s for s in systems if s in LOADERS]:
            plan = []
            for step in steps:
                batches = max(60, int(args.step_seconds / (step / 1000)))
                if system in PETASTORM:
                    batches = min(batches, args.petastorm_step_batches)
                plan.append((step, batches))
            r = runner.run(system, "step", "warm", plan=plan)
            if r is not None:
                step_results[system] = r["extra"]["steps"]

    # Sample order across worker counts.
    order_results: dict[str, dict[str, Any]] = {}
    if not args.skip_order:
        log("sample order across worker counts (epoch 0):")
        for system in [s for s in systems if s in LOADERS]:
            if system in PETASTORM:
                r = runner.run(system, "order", "warm", workers_count=1)
                if r is not None:
                    h = _epoch_hashes(r)
                    r.setdefault("extra", {})["order_variants"] = {'{"workers_count": 1}': h[0]}
            else:
                r = runner.run(system, "order", "warm")
            if r is not None:
                order_results[system] = r

    written = []
    for mode in modes:
        res = results[mode]
        if REFERENCE not in res:
            log(f"no {REFERENCE} result for {mode}: skipped")
            continue
        for system, r in res.items():
            r["spread"] = round(_spread(r), 4)
            r["label"] = LABELS.get(system, system)
            r["order"] = _order_summary(
                system,
                results["warm"].get(system),
                results["cold"].get(system),
                order_results.get(system),
            )
            if mode == "warm" and system in step_results:
                r["steps"] = step_results[system]
            if system in PETASTORM and args.petastorm_files:
                r["notes"] += f"; first {args.petastorm_files} files only"
        ordered = [res[s] for s in systems if s in res]
        config = {
            "workload": f"local_{mode}",
            "batch_size": args.batch_size,
            "epochs_per_system": args.epochs,
            "petastorm_epochs": args.petastorm_epochs,
            "petastorm_files": args.petastorm_files or "all",
            "measured_runs": "epochs 2.. of each process (the first is rows_per_second_first)",
            "page_cache": mode,
            "shardfeed_threads": args.threads,
            "dataloader_workers": args.workers,
            "simulated_steps_ms": steps,
            "shardfeed_per_batch_ms": per_batch_ms,
            "quiet": args.quiet_info,
            "shardfeed_build": measure.shardfeed_build(),
            "load_average_end": common.load_average(),
        }
        drops = [d for r in ordered for d in r.get("extra", {}).get("page_cache_drops", [])]
        notes = [
            "rows/s counts delivered rows; shardfeed drops the last partial batch (drop_last), "
            "Petastorm and the DIY path deliver it.",
            "shuffling: shardfeed permutes rows within windows of 4 row groups and the row-group "
            "order; Petastorm shuffles the row-group order only; DIY and limits read in order.",
        ]
        if mode == "cold":
            methods = sorted({d["method"] for d in drops})
            after = [d["resident_after"] for d in drops if d["resident_after"] is not None]
            notes.append(
                f"page cache dropped before every epoch ({', '.join(methods) or 'n/a'}); "
                f"dataset pages resident after the drop: max {max(after, default=float('nan')):.1%}"
            )
            config["page_cache_drop"] = {
                "methods": methods,
                "max_resident_after": max(after, default=None),
                "drops": len(drops),
            }
        targets = {k: v for k, v in RATIO_AIMS.items() if all(s in res for s in k.split("/"))}
        out, doc = common.write_results(
            f"suite_local_{mode}", dataset, config, ordered, REFERENCE, targets, notes
        )
        doc["targets"] = [dict(t, compare=">=") for t in doc["targets"]] + _extra_aims(doc, mode)
        out.write_text(json.dumps(doc, indent=2) + "\n")
        written.append(out)
        log(f"written {out}")
    return written


def _extra_aims(doc: dict[str, Any], mode: str) -> list[dict[str, Any]]:
    aims = []
    for r in doc["results"]:
        if r["system"].startswith("shardfeed"):
            aims.append(
                {
                    "ratio": f"{r['system']} spread (max-min)/median",
                    "target": SPREAD_AIM,
                    "compare": "<=",
                    "value": r["spread"],
                    "met": bool(r["spread"] <= SPREAD_AIM),
                }
            )
    if mode == "warm":
        per_batch = doc["config"].get("shardfeed_per_batch_ms") or 0
        for r in doc["results"]:
            if not r["system"].startswith("shardfeed"):
                continue
            own = doc["config"]["batch_size"] / r["rows_per_second_median"] * 1000
            for step, s in sorted(r.get("steps", {}).items(), key=lambda kv: float(kv[0])):
                if float(step) <= max(per_batch, own):
                    continue  # the aim holds only for steps longer than the per-batch time
                value = s["wait_fraction_steady"]
                aims.append(
                    {
                        "ratio": f"{r['system']} consumer wait @ {step} ms step (steady)",
                        "target": WAIT_AIM,
                        "compare": "<=",
                        "value": value,
                        "met": bool(value <= WAIT_AIM),
                    }
                )
    return aims


# ======================================================================================
# Report
# ======================================================================================


def _load(name: str) -> dict[str, Any] | None:
    path = common.RESULTS_DIR / f"{name}.json"
    if not path.is_file():
        return None
    try:
        return dict(json.loads(path.read_text()))
    except ValueError:
        return None


def _fmt_rps(v: float | None) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:,.0f}"


def _fmt_pct(v: float | None, digits: int = 1) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v * 100:.{digits}f}%"


def _yes(v: bool | None) -> str:
    return "-" if v is None else ("yes" if v else "**no**")


def _aims_md(doc: dict[str, Any]) -> list[str]:
    lines = []
    for t in doc.get("targets", []):
        cmp = t.get("compare", ">=")
        v = t.get("value")
        shown = "n/a" if v is None else (f"{v:.3f}" if abs(v) < 10 else f"{v:.1f}")
        lines.append(
            f"- `{t['ratio']}` {cmp} {t['target']}: **{shown}** — "
            f"{'met' if t['met'] else 'NOT met'}"
        )
    return lines


def _local_table(doc: dict[str, Any]) -> list[str]:
    ref = doc["reference"]
    by = {r["system"]: r for r in doc["results"]}
    ref_rps = by[ref]["rows_per_second_median"]
    steps = doc["config"].get("simulated_steps_ms") or []
    warm = doc["config"]["page_cache"] == "warm"
    head = [
        "system",
        "rows/s (median)",
        "runs (rows/s)",
        "spread",
        "1st epoch rows/s",
        "÷ shardfeed Loader",
        "shardfeed Loader x",
        "peak RSS MB (after imports)",
    ]
    if warm:
        head += [f"wait @ {s:g} ms step" for s in steps]
        head += ["same order across runs", "across worker counts"]
    head.append("other load")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in doc["results"]:
        rps = r["rows_per_second_median"]
        runs = ", ".join(f"{x['rows_per_second'] / 1e3:,.0f}k" for x in r["runs"])
        cells = [
            LABELS.get(r["system"], r["system"]) + f" (`{r['system']}`)",
            _fmt_rps(rps),
            runs,
            _fmt_pct(r.get("spread")),
            _fmt_rps(r.get("rows_per_second_first")),
            f"{rps / ref_rps:.2f}",
            f"{ref_rps / rps:.2f}" if rps else "-",
            f"{r['peak_rss_mb']:,.0f} ({r.get('baseline_rss_mb', 0):,.0f})",
        ]
        if warm:
            for s in steps:
                st = r.get("steps", {}).get(f"{s:g}")
                cells.append(
                    "-"
                    if st is None
                    else f"{_fmt_pct(st['wait_fraction_steady'])} "
                    f"({_fmt_pct(st['wait_fraction'])} w/ start)"
                )
            o = r.get("order") or {}
            if r["system"] in LIMITS:
                cells += ["-", "-"]
            else:
                runs_txt = _yes(o.get("same_across_runs"))
                if o.get("distinct_orders") is not None:
                    runs_txt += f" ({o['distinct_orders']} orders in {o['runs_compared']} runs)"
                cells += [runs_txt, _yes(o.get("same_across_worker_counts"))]
        cells.append(_fmt_pct(r.get("background", {}).get("other_cpu_share"), 0))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _ratio_matrix(doc: dict[str, Any]) -> list[str]:
    names = [r["system"] for r in doc["results"]]
    rps = {r["system"]: r["rows_per_second_median"] for r in doc["results"]}
    lines = [
        "| row ÷ column | " + " | ".join(f"`{n}`" for n in names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for a in names:
        cells = [f"{rps[a] / rps[b]:.2f}" if a != b else "1" for b in names]
        lines.append(f"| `{a}` | " + " | ".join(cells) + " |")
    return lines


def _engine_md(doc: dict[str, Any]) -> list[str]:
    """The engine's own counters for shardfeed Loader: where its threads spent the epoch,
    and, under the longest simulated step, how long workers sat idle ahead of the consumer while the
    consumer still waited."""
    r = next((x for x in doc["results"] if x["system"] == REFERENCE), None)
    if r is None:
        return []
    epochs = [e for e in r.get("extra", {}).get("epochs", [])[1:] if e.get("stages")]
    if not epochs:
        return []
    e = sorted(epochs, key=lambda x: x["seconds"])[len(epochs) // 2]
    busy = ", ".join(f"{k} {v:.2f} s" for k, v in e["stages"].items() if v >= 0.005)
    threads = e.get("threads", "?")
    out = [
        f"shardfeed Loader's engine counters (median epoch, {e['seconds']:.2f} s wall, "
        f"{threads} threads): busy {busy} (summed over threads); the consumer waited "
        f"{e.get('consumer_wait_seconds', float('nan')):.2f} s."
    ]
    steps = r.get("steps") or {}
    if steps:
        step, st = max(steps.items(), key=lambda kv: float(kv[0]))
        if st.get("engine_worker_wait_seconds") is not None:
            out[0] += (
                f" Under the {step} ms step the workers sat idle ahead of the consumer for "
                f"{st['engine_worker_wait_seconds']:.2f} s (summed over threads) while the "
                f"consumer waited {st['engine_consumer_wait_seconds']:.2f} s of "
                f"{st['seconds']:.2f} s."
            )
    return [*out, ""]


def _order_md(doc: dict[str, Any]) -> list[str]:
    lines = []
    for r in doc["results"]:
        o = r.get("order")
        if not o or r["system"] in LIMITS:
            continue
        hw = o.get("warm_epoch_hashes", [])
        hc = o.get("cold_epoch_hashes", [])
        txt = f"- `{r['system']}`: epochs warm {', '.join(h[:8] for h in hw)}"
        if hc:
            txt += f"; cold {', '.join(h[:8] for h in hc)}"
        if o.get("worker_variants"):
            txt += "; epoch 0 with " + ", ".join(
                f"{json.loads(k)} {'same' if v else 'DIFFERENT'}"
                for k, v in o["worker_variants"].items()
            )
        lines.append(txt)
    return lines


def _generic_table(doc: dict[str, Any]) -> list[str]:
    ref = doc.get("reference")
    by = {r["system"]: r for r in doc["results"]}
    ref_rps = by[ref]["rows_per_second_median"] if ref in by else None
    head = [
        "system",
        "rows/s (median)",
        "runs (rows/s)",
        "spread",
        "1st epoch rows/s",
        f"÷ {ref}" if ref else "ratio",
        f"{ref} x" if ref else "ratio",
        "peak RSS MB",
        "other load",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in doc["results"]:
        rps = r["rows_per_second_median"]
        vals = [x["rows_per_second"] for x in r["runs"]]
        med = statistics.median(vals) if vals else 0
        spread = (max(vals) - min(vals)) / med if len(vals) > 1 and med else None
        lines.append(
            "| "
            + " | ".join(
                [
                    f"`{r['system']}`",
                    _fmt_rps(rps),
                    ", ".join(f"{v / 1e3:,.0f}k" for v in vals),
                    _fmt_pct(spread),
                    _fmt_rps(r.get("rows_per_second_first")),
                    f"{rps / ref_rps:.2f}" if ref_rps else "-",
                    f"{ref_rps / rps:.2f}" if ref_rps and rps else "-",
                    f"{r['peak_rss_mb']:,.0f}",
                    _fmt_pct(r.get("background", {}).get("other_cpu_share"), 0),
                ]
            )
            + " |"
        )
    described = [r for r in doc["results"] if r.get("notes")]
    if described:
        lines += ["", "Systems:", ""]
        lines += [f"- `{r['system']}`: {r['notes']}" for r in described]
    return lines


def _fmt_multiple(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _stalls_md(after: dict[str, Any], before: dict[str, Any] | None) -> list[str]:
    """The wait-against-step curve (``bench_stalls.py``), with the earlier engine's beside it."""
    cfg = after.get("config", {})
    lines = [
        "## Stalls under a training step (issue 12, `bench_stalls.py`)",
        "",
        f"{_dataset_line(after['dataset'])}; {after['timestamp']}. The Loader's own time per "
        f"batch T = {cfg.get('per_batch_ms', 0):.2f} ms (start-up included; after it "
        f"{cfg.get('steady_per_batch_ms', 0):.2f} ms, steady T); each step length m x T ran "
        f"{cfg.get('repeats')} times, each run a fresh process reading {cfg.get('batches')} "
        "batches under a sleeping step. Wait: the consumer's steady-state share of wall time "
        "in `next()` (after one batch per worker thread).",
        "",
    ]
    prior = {r["extra"]["multiple"]: r["extra"] for r in (before or {}).get("results", [])}
    head = "| step | ms | x steady T | wait median | wait max | runs |"
    if prior:
        head += " before: median | before: max |"
    lines += [head, "|" + "---|" * (head.count("|") - 1)]
    for r in after["results"]:
        e = r["extra"]
        runs = ", ".join(f"{x['extra']['consumer_wait_fraction']:.1%}" for x in r["runs"])
        row = (
            f"| {e['multiple']:g} x T | {e['step_ms']:.2f} | "
            f"{_fmt_multiple(e.get('multiple_of_steady'))} | {e['wait_median']:.2%} | "
            f"{e['wait_max']:.2%} | {runs} |"
        )
        if prior:
            b = prior.get(e["multiple"])
            row += f" {b['wait_median']:.2%} | {b['wait_max']:.2%} |" if b else " - | - |"
        lines.append(row)
    if before:
        lines += [
            "",
            f"Before: the engine of per-worker queues (T = "
            f"{before.get('config', {}).get('per_batch_ms', 0):.2f} ms), {before['timestamp']}.",
        ]
    return [*lines, ""]


def _gpu_md(docs: list[dict[str, Any]]) -> list[str]:
    """``bench_gpu.py``: the four ways of feeding a GPU, one table per model size."""
    lines = ["## Feeding a GPU (issue 12, `bench_gpu.py`)", ""]
    for doc in docs:
        cfg = doc.get("config", {})
        m = doc.get("machine", {})
        lines += [
            f"{_dataset_line(doc['dataset'])}; MLP 256 -> {cfg.get('hidden')} -> "
            f"{cfg.get('hidden')} -> 1 (fp32), {cfg.get('steps')} steps of "
            f"{cfg.get('batch_size')}; {m.get('cpus')} CPUs, torch {m.get('torch')}; "
            f"Loader settings: memory_limit {cfg.get('memory_limit') or 'default'}, "
            f"num_threads {cfg.get('threads') or 'default'}; {doc['timestamp']}.",
            "",
            "| system | samples/s | ÷ device | GPU busy | wait share | step ms | "
            "H2D GB/s (1 batch) | host batch pinned |",
            "|---|---|---|---|---|---|---|---|",
        ]
        by = {r["system"]: r["rows_per_second_median"] for r in doc["results"]}
        ref = by.get("device")
        for r in doc["results"]:
            e = r["extra"]
            ratio = f"{r['rows_per_second_median'] / ref:.2f}" if ref else "-"
            lines.append(
                f"| `{r['system']}` | {_fmt_rps(r['rows_per_second_median'])} | {ratio} | "
                f"{_fmt_pct(e.get('gpu_busy_share'))} | {_fmt_pct(e.get('wait_share'))} | "
                f"{e.get('step_ms')} | {e.get('h2d_gbps') or '-'} | "
                f"{_yes(e.get('host_batch_pinned'))} |"
            )
        lines += [""] + [f"- {n}" for n in doc.get("notes", [])] + [""]
    return lines


def _train_md(doc: dict[str, Any]) -> list[str]:
    """``bench_train.py``: training samples/s and the share of time waiting for data."""
    cfg, ref = doc.get("config", {}), doc.get("reference")
    by = {r["system"]: r["rows_per_second_median"] for r in doc["results"]}
    lines = [
        "## Training on the CPU (issue 12, `bench_train.py`)",
        "",
        f"A DLRM-style model (embeddings of 3 hashed ids + an MLP over 256 dense features), "
        f"{cfg.get('warmup_steps')} + {cfg.get('steps')} steps of {cfg.get('batch_size')}, each "
        f"system in its own process; {doc['timestamp']}.",
        "",
        f"| system | samples/s | ÷ {ref} | data wait | step ms (median) | compute ms | "
        "CPU s | peak RSS MB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in doc["results"]:
        e = r.get("extra", {})
        ratio = f"{r['rows_per_second_median'] / by[ref]:.2f}" if ref in by else "-"
        lines.append(
            f"| `{r['system']}` | {_fmt_rps(r['rows_per_second_median'])} | {ratio} | "
            f"{_fmt_pct(e.get('data_wait_share'))} | {e.get('step_ms_median', 0):.1f} | "
            f"{e.get('compute_ms_median', 0):.1f} | {e.get('cpu_seconds', 0):.1f} | "
            f"{r['peak_rss_mb']:,.0f} |"
        )
    return [*lines, "", *[f"- {n}" for n in doc.get("notes", [])], ""]


def _epochs_md(doc: dict[str, Any]) -> list[str]:
    """``bench_epochs.py``: the wait per epoch with the next pass started early and without."""
    cfg = doc.get("config", {})
    by = {r["system"]: r for r in doc["results"]}
    data = cfg.get(
        "data",
        "150,000 rows x 256 float32 in 30 row groups (a window of 28 at the default limit), "
        "`[1024, 256]` batches",
    )
    lines = [
        _epochs_heading("epochs" if cfg.get("dataset", "small") == "small" else "epochs_large"),
        "",
        f"{data}, {cfg.get('epochs')} epochs per fresh process, "
        f"{cfg.get('repeats')} processes per system, runs alternating; after each batch a "
        f"{cfg.get('step_ms')} ms step that sleeps (an accelerator's) or keeps one core busy. "
        f"Figures over the epochs after the first; {doc['timestamp']}. `torch_2w_*`: "
        "`TorchDataset` in a DataLoader with 2 persistent workers; a worker starts the next "
        "pass early from its second pass on (so never the second epoch), which the main "
        "process cannot count (-); its RSS is the largest worker's or the main process's.",
        "",
        "| system | wait per epoch (median) | max | first batch (median) | rows/s | "
        "÷ plain | started early | peak RSS MB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in doc["results"]:
        e = r.get("extra", {})
        reader = e.get("reader", "loader")
        prefix = "" if reader == "loader" else f"{reader}_"
        plain = by.get(f"{prefix}plain_{e.get('step')}")
        ratio = (
            f"{r['rows_per_second_median'] / plain['rows_per_second_median']:.2f}" if plain else "-"
        )
        lines.append(
            f"| `{r['system']}` | {_fmt_pct(e.get('wait_median'))} | "
            f"{_fmt_pct(e.get('wait_max'))} | {e.get('first_batch_ms_median', 0):.1f} ms | "
            f"{_fmt_rps(r['rows_per_second_median'])} | {ratio} | "
            f"{_early_count(e)} | {r['peak_rss_mb']:,.0f} |"
        )
    return [*lines, ""]


def _epochs_heading(name: str) -> str:
    large = " on the suite's 70 MB row groups" if name == "epochs_large" else ""
    return f"## Epoch boundaries{large} (`bench_epochs.py`)"


def _early_count(extra: dict[str, Any]) -> str:
    started = extra.get("passes_started_early")
    return "-" if started is None else f"{started}/{extra.get('passes')}"


def _memory_md(doc: dict[str, Any]) -> list[str]:
    """``bench_memory.py``: rows/s and peak RSS per system and row-group size, W_eff."""
    cfg, rat = doc.get("config", {}), doc.get("ratios", {})
    small, large = cfg.get("small_rg"), cfg.get("large_rg")
    sets = doc["dataset"].get("datasets", {})
    ds_s, ds_l = sets.get(f"rg{small}", {}), sets.get(f"rg{large}", {})
    srt, weff = sets.get("sorted"), cfg.get("weff") or {}
    ref = doc.get("reference", "shardfeed")
    lines = [
        "## Memory against throughput (issue 11, `bench_memory.py`)",
        "",
        f"{doc['dataset']['rows']:,} rows x {doc['dataset'].get('features', '?')} float32 "
        f"features + int64 label, written twice: row groups of {small:,} rows "
        f"({ds_s.get('files')} files, {ds_s.get('row_groups')} row groups, "
        f"{ds_s.get('bytes_on_disk', 0) / 1e9:.2f} GB) and of {large:,} rows "
        f"({ds_l.get('files')} files, {ds_l.get('row_groups')} row groups). Batch "
        f"{cfg.get('batch_size')}, {cfg.get('epochs_per_process')} epochs per process, each "
        f"system and row-group size in {cfg.get('repeats')} processes (medians; page cache "
        f"warm); {doc['timestamp']}. rows/s: over every epoch, opening included. RSS: peak "
        "(`ru_maxrss`, + largest reaped child) and the peak above the RSS after imports.",
        "",
    ]
    if srt:
        lines += [
            f"W_eff = 1 / mean over batches of the probability that two distinct rows of a "
            f"batch come from the same row group, on a dataset written in order "
            f"({srt['row_groups']} row groups of {srt['row_group_rows']:,} rows, "
            f"{srt['files']} files), batches of {weff.get('batch_size')}: 1 = one row group "
            f"at a time, about {srt['row_groups']} = a full shuffle.",
            "",
        ]
    head = [
        "system",
        "row group rows",
        "rows/s (median)",
        f"÷ {ref}",
        "peak RSS MB",
        "after imports MB",
        "above MB",
        f"above ÷ {ref}",
        f"above {large:,} ÷ {small:,}",
        "W_eff",
        "other load",
    ]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in doc["results"]:
        e = r["extra"]
        name, rg = e["base_system"], e["row_group_rows"]
        key = f"{name}@rg{rg}/{ref}@rg{rg}"
        lg = rat.get(f"rss {name}@rg{large}/{name}@rg{small}") if rg == large else None
        w = e.get("w_eff")
        lines.append(
            "| "
            + " | ".join(
                [
                    f"{r.get('label', name)} (`{name}`)",
                    f"{rg:,}",
                    _fmt_rps(r["rows_per_second_median"]),
                    "1" if name == ref else f"{rat.get(key, float('nan')):.2f}",
                    f"{r['peak_rss_mb']:,.0f}",
                    f"{r['baseline_rss_mb']:,.0f}",
                    f"{e['rss_above_baseline_mb']:,.0f}",
                    "1" if name == ref else f"{rat.get('rss ' + key, float('nan')):.2f}",
                    "-" if lg is None else f"{lg:.2f}",
                    "-" if w is None else f"{w:.2f}",
                    _fmt_pct(r.get("background", {}).get("other_cpu_share"), 0),
                ]
            )
            + " |"
        )
    lines += ["", *[f"- {n}" for n in doc.get("notes", [])], "", "Systems:", ""]
    seen: set[str] = set()
    for r in doc["results"]:
        name = r["extra"]["base_system"]
        if name not in seen:
            seen.add(name)
            lines.append(f"- `{name}`: {r['notes']}")
    return [*lines, ""]


def _dataset_line(ds: dict[str, Any]) -> str:
    return (
        f"{ds['rows']:,} rows x {ds.get('features', '?')} float32 features + int64 label, "
        f"{ds['bytes_on_disk'] / 1e9:.2f} GB on disk, {ds['files']} files, "
        f"{ds['row_groups']} row groups ({ds.get('compression', '?')})"
    )


def _quiet_text(q: dict[str, Any] | None) -> str | None:
    if not q:
        return None
    if q.get("quiet"):
        return (
            f"waited {q['waited_seconds']} s for {q.get('window', 20):g} s in a row with the "
            f"CPUs at most 5% busy (mean {_fmt_pct(q['last_window_busy_share'])})"
        )
    return (
        f"NOT quiet: gave up after {q['waited_seconds']} s "
        f"(CPUs {_fmt_pct(q['last_window_busy_share'])} busy)"
    )


def write_report(meta: dict[str, Any] | None = None) -> Path:
    """RESULTS.md and RESULTS.png from the JSON files in bench/results/."""
    warm, cold = _load("suite_local_warm"), _load("suite_local_cold")
    remote, transforms = _load("remote"), _load("transforms")
    meta = meta or {}
    lines = ["# shardfeed benchmark results", ""]
    any_doc = warm or cold or transforms or remote
    if any_doc:
        m = any_doc["machine"]
        lines += [
            f"Generated by `python3 bench/suite.py` (see `bench/README.md`); results from "
            f"`bench/results/*.json`, {any_doc['timestamp']}. Machine: {m.get('cpus')} CPUs "
            f"({m.get('processor')}), {m.get('memory_gb')} GB; Python {m.get('python')}, "
            f"torch {m.get('torch')}, pyarrow {m.get('pyarrow')}, numpy {m.get('numpy')}; "
            f"commit `{m.get('git_commit')}`.",
            "",
        ]
        build = (warm or cold or transforms or {}).get("config", {}).get("shardfeed_build")
        if build:
            lines += [
                f"shardfeed extension measured: `{Path(build['path']).name}`, md5 "
                f"`{build['md5']}` ({build['bytes']:,} bytes).",
                "",
            ]
    q = meta.get("quiet") or _quiet_text((warm or cold or {}).get("config", {}).get("quiet"))
    if q:
        lines += [f"Quiet machine before measuring: {q}.", ""]
    lines += ["![rows per second](RESULTS.png)", ""]
    aims_docs = [d for d in (warm, cold) if d]
    if aims_docs:
        lines += ["## Aims (issue 5)", ""]
        for d in aims_docs:
            lines.append(f"{d['config']['workload']}:")
            lines += _aims_md(d)
            lines.append("")
    for doc, title in ((warm, "warm page cache"), (cold, "cold page cache")):
        if not doc:
            continue
        lines += [f"## Local tabular dataset, {title}", "", _dataset_line(doc["dataset"]) + ".", ""]
        cfg = doc["config"]
        lines.append(
            f"Batch {cfg['batch_size']}; each system in its own process, "
            f"{cfg['epochs_per_system']} epochs (Petastorm {cfg['petastorm_epochs']}, "
            f"files: {cfg['petastorm_files']}); "
            "the first epoch is shown apart, the median and the spread ((max - min) / median) "
            "come from the others."
        )
        if doc is warm and cfg.get("simulated_steps_ms"):
            lines.append(
                f"Wait = time the training loop spent getting the next batch ÷ wall time, with a "
                f"sleep of the step per batch; shardfeed Loader's own per-batch time is "
                f"{cfg['shardfeed_per_batch_ms']:.2f} ms. Shown after the first batch "
                "(start-up left out), and with it in brackets."
            )
        if cfg.get("page_cache_drop"):
            pc = cfg["page_cache_drop"]
            lines.append(
                f"Page cache dropped before every epoch with `{', '.join(pc['methods'])}` "
                f"({pc['drops']} drops); dataset pages still resident after a drop: at most "
                f"{_fmt_pct(pc['max_resident_after'])} (`mincore`)."
            )
        lines += ["", *_local_table(doc), ""]
        lines += _engine_md(doc)
        if doc is warm:
            lines += ["Ratios of rows/s (row ÷ column), warm:", "", *_ratio_matrix(doc), ""]
            lines += [
                "Sample order (hash of the label sequence per epoch):",
                "",
                *_order_md(doc),
                "",
            ]
        lines += [f"- {n}" for n in doc.get("notes", [])] + [""]
        lines += ["Systems:", ""] + [f"- `{r['system']}`: {r['notes']}" for r in doc["results"]]
        lines.append("")
    old = _previous_sections()
    if cold is None:
        lines += _kept(old, "## Local tabular dataset, cold page cache", "suite_local_cold")
    if remote:
        lines += [
            "## Remote dataset (issue 3, `bench_remote.py`)",
            "",
            _dataset_line(remote["dataset"]) + f"; {remote['timestamp']}.",
            "",
            *_generic_table(remote),
            "",
            "Aims (issue 3):",
            "",
            *_aims_md(remote),
            "",
        ]
        lines += [f"- {n}" for n in remote.get("notes", [])] + [""]
    elif not (kept := _kept(old, "## Remote dataset", "remote")):
        lines += [
            "## Remote dataset (issue 3)",
            "",
            "No `bench/results/remote.json` yet: run `python3 bench/suite.py --run-remote` "
            "(needs root) or `bench/bench_remote.py`.",
            "",
        ]
    else:
        lines += kept
    if transforms:
        desc = transforms["dataset"].get("description", _dataset_line(transforms["dataset"]))
        lines += ["## Transforms (issue 4, `bench_transforms.py`)", ""]
        lines += [f"{desc}; {transforms['timestamp']}.", ""]
        q = _quiet_text(transforms.get("config", {}).get("quiet"))
        if q:
            lines += [f"Quiet machine before measuring: {q}.", ""]
        lines += [*_generic_table(transforms), ""]
        if transforms.get("targets"):
            lines += ["Aims:", "", *_aims_md(transforms), ""]
        lines += [f"- {n}" for n in transforms.get("notes", [])] + [""]
    else:
        lines += _kept(old, "## Transforms", "transforms")
    stalls = _load("stalls")
    if stalls:
        lines += _stalls_md(stalls, _load("stalls_before"))
    else:
        lines += _kept(old, "## Stalls under a training step", "stalls")
    gpu = [d for d in (_load("gpu"), _load("gpu_h4096")) if d]
    if gpu:
        lines += _gpu_md(gpu)
    else:
        lines += _kept(old, "## Feeding a GPU", "gpu")
    train = _load("train")
    if train:
        lines += _train_md(train)
    else:
        lines += _kept(old, "## Training on the CPU", "train")
    for name in ("epochs", "epochs_large"):
        epochs = _load(name)
        if epochs:
            lines += _epochs_md(epochs)
        else:
            lines += _kept(old, _epochs_heading(name), name)
    memory = _load("bench_memory")
    if memory:
        lines += _memory_md(memory)
    else:
        lines += _kept(old, "## Memory against throughput", "bench_memory")
    RESULTS_MD.write_text("\n".join(lines).rstrip() + "\n")
    draw_chart([d for d in (warm, cold, transforms, remote, memory) if d], RESULTS_PNG)
    return RESULTS_MD


def _previous_sections() -> dict[str, list[str]]:
    """The ``## `` sections of the RESULTS.md there is now, by heading."""
    if not RESULTS_MD.is_file():
        return {}
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in RESULTS_MD.read_text().splitlines():
        if line.startswith("## "):
            current = sections.setdefault(line, [])
        if current is not None:
            current.append(line)
    return sections


KEPT_NOTE = "*Kept from the previous RESULTS.md: this run has no `bench/results/{}.json`.*"


def _kept(old: dict[str, list[str]], heading: str, name: str) -> list[str]:
    """A section of the previous RESULTS.md whose results this run did not measure, kept
    as it was (its own lines say when and on what it ran), marked as kept; [] if none."""
    for title, body in old.items():
        if title.startswith(heading):
            note = KEPT_NOTE.format(name)
            rest = [line for line in body[1:] if line != note]
            while rest and not rest[0].strip():
                rest = rest[1:]
            while rest and not rest[-1].strip():  # or each regeneration adds a blank line
                rest = rest[:-1]
            return [title, "", note, "", *rest, ""] if rest else []
    return []


def _memory_series(doc: dict[str, Any]) -> dict[str, Any]:
    """``bench_memory``'s panel for ``chart.py``: rows/s next to the peak RSS above the RSS
    after imports, per system and row-group size (the reference: shardfeed at that size)."""
    ref = doc.get("reference", "shardfeed")
    large = doc["config"].get("large_rg")
    by = {(r["extra"]["base_system"], r["extra"]["row_group_rows"]): r for r in doc["results"]}
    rows = []
    for r in doc["results"]:
        e = r["extra"]
        base = by.get((ref, e["row_group_rows"]))
        rows.append(
            [
                f"{r.get('label', e['base_system'])}, row groups of {e['row_group_rows']:,}",
                r["rows_per_second_median"],
                [x["rows_per_second"] for x in r["runs"]],
                e["rss_above_baseline_mb"],
                e.get("rss_above_baseline_mb_runs", []),
                base["rows_per_second_median"] if base else None,
                base["extra"]["rss_above_baseline_mb"] if base else None,
                e["row_group_rows"] == large,
            ]
        )
    return {
        "kind": "memory",
        "title": f"memory (issue 11): rows/s, ratios to {ref} at the same row-group size",
        "rows": rows,
    }


def draw_chart(docs: list[dict[str, Any]], path: Path) -> bool:
    """The chart, drawn by matplotlib in the Petastorm environment (the project's has none)."""
    import petastorm_env

    python = petastorm_env.venv_python()
    if not python.exists():
        log("no bench environment with matplotlib (python3 bench/petastorm_env.py): no chart")
        return False
    series: list[dict[str, Any]] = []
    for d in docs:
        if d.get("benchmark") == "memory":
            series.append(_memory_series(d))
            continue
        rows = [
            (
                LABELS.get(r["system"], r["system"]),
                r["rows_per_second_median"],
                [x["rows_per_second"] for x in r["runs"]],
            )
            for r in d["results"]
        ]
        by = {r["system"]: r["rows_per_second_median"] for r in d["results"]}
        ref = d.get("reference")
        title = {
            "local_warm": "local tabular dataset, warm page cache",
            "local_cold": "local tabular dataset, cold page cache",
            "transforms": "transform recipe (issue 4)",
            "remote": "remote dataset (issue 3)",
        }.get(d["config"].get("workload", d["benchmark"]), d["benchmark"])
        if ref:
            title += f"; ratios to {LABELS.get(ref, ref)}"
        series.append({"title": title, "rows": rows, "reference_rps": by.get(ref)})
    spec = common.RESULTS_DIR / "chart-input.json"
    spec.parent.mkdir(parents=True, exist_ok=True)
    spec.write_text(json.dumps({"series": series, "out": str(path)}))
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    proc = subprocess.run(
        [str(python), str(common.BENCH_DIR / "chart.py"), str(spec)], env=env, check=False
    )
    spec.unlink(missing_ok=True)
    return proc.returncode == 0


# ======================================================================================
# main
# ======================================================================================


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rows", type=int, default=1_100_000, help="dataset rows (>= 1 GB: 1.1M)")
    p.add_argument("--files", type=int, default=8)
    p.add_argument("--row-group-rows", type=int, default=68_750)
    p.add_argument("--features", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=4096)
    p.add_argument("--epochs", type=int, default=4, help="passes per system (1st shown apart)")
    p.add_argument("--petastorm-epochs", type=int, default=4)
    p.add_argument("--petastorm-files", type=int, default=0, help="Petastorm: first N files")
    p.add_argument("--petastorm-step-batches", type=int, default=120)
    p.add_argument("--threads", type=int, default=None, help="shardfeed num_threads")
    p.add_argument("--workers", type=int, default=2, help="DataLoader workers")
    p.add_argument("--systems", default=",".join(SUITE_SYSTEMS))
    p.add_argument("--modes", default="warm,cold")
    p.add_argument(
        "--step-factors",
        default="0.5,1.25,2.5,5",
        help="simulated steps as multiples of shardfeed's per-batch time",
    )
    p.add_argument("--step-seconds", type=float, default=3.0, help="length of a step run")
    p.add_argument("--skip-petastorm", action="store_true")
    p.add_argument("--skip-order", action="store_true")
    p.add_argument("--skip-transforms", action="store_true")
    p.add_argument("--skip-memory", action="store_true", help="don't run bench_memory.py")
    p.add_argument("--run-remote", action="store_true", help="also run bench_remote.py")
    p.add_argument("--report-only", action="store_true")
    p.add_argument("--quick", action="store_true", help="small dataset, few epochs (smoke test)")
    p.add_argument(
        "--quiet-window",
        type=float,
        default=20.0,
        help="seconds of idle CPUs to wait for before measuring (0: don't)",
    )
    p.add_argument("--quiet-max-wait", type=float, default=900.0)
    p.add_argument(
        "--quiet-gap",
        type=float,
        default=2.0,
        help="seconds of idle CPUs before each child (0: don't)",
    )
    p.add_argument(
        "--busy-threshold",
        type=float,
        default=0.10,
        help="rerun a child when other processes used more of the CPUs",
    )
    p.add_argument("--retries", type=int, default=1)
    p.add_argument("--timeout", type=float, default=900)
    # Internal: one system in this process.
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--phase", default="throughput", help=argparse.SUPPRESS)
    p.add_argument("--mode", default="warm", help=argparse.SUPPRESS)
    p.add_argument("--data-path", help=argparse.SUPPRESS)
    p.add_argument("--rows-total", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--step-ms", default="", help=argparse.SUPPRESS)  # "ms:batches,..."
    args = p.parse_args(argv)
    if not args.child:
        if args.quick:
            args.rows, args.epochs, args.petastorm_epochs = 60_000, 3, 3
            args.quiet_window, args.quiet_gap, args.step_seconds = 0, 0, 1.0
            args.petastorm_step_batches = 20
        args.systems = [s.strip() for s in args.systems.split(",") if s.strip()]
        unknown = [s for s in args.systems if s not in SUITE_SYSTEMS]
        if unknown:
            p.error(f"unknown systems {unknown}; choose from {SUITE_SYSTEMS}")
        args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
        args.step_factors = [float(x) for x in args.step_factors.split(",") if x.strip()]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        run_child_system(args)
        return 0
    t_start = time.perf_counter()
    if args.report_only:
        log(f"written {write_report()}")
        return 0

    import petastorm_env

    if not args.skip_petastorm:
        log("Petastorm environment (bench/.venv/petastorm) ...")
        petastorm_env.ensure()
        log(f"  {json.dumps(petastorm_env.versions())}")
    spec = common.TabularSpec(
        rows=args.rows, files=args.files, row_group_rows=args.row_group_rows, features=args.features
    )
    log(f"dataset {spec.name} ...")
    dataset = common.ensure_tabular_dataset(spec)
    args.quiet_info = None
    if args.quiet_window > 0:
        log(f"waiting for {args.quiet_window:.0f} s of idle CPUs ...")
        args.quiet_info = measure.wait_quiet(
            args.quiet_window, threshold=0.05, max_wait=args.quiet_max_wait, log=log
        )
        args.quiet_info["window"] = args.quiet_window
        log(f"  {args.quiet_info}")
    measure_local(args, dataset)
    if not args.skip_transforms:
        log("transforms benchmark (bench_transforms.py) ...")
        argv = [str(common.BENCH_DIR / "bench_transforms.py")]
        if args.quick:
            argv += ["--quick"]
        if args.skip_petastorm:
            argv += ["--skip-petastorm"]
        subprocess.run([sys.executable, *argv], check=False)
    if not args.skip_memory:
        log("memory benchmark (bench_memory.py) ...")
        argv = [str(common.BENCH_DIR / "bench_memory.py")]
        if args.quick:
            argv += ["--quick"]
        if args.skip_petastorm:
            argv += ["--skip-petastorm"]
        subprocess.run([sys.executable, *argv], check=False)
    if args.run_remote:
        log("remote benchmark (bench_remote.py) ...")
        argv = [str(common.BENCH_DIR / "bench_remote.py")]
        if args.quick:
            argv += ["--rows", "48000", "--files", "4", "--epochs", "2"]
        subprocess.run([sys.executable, *argv], check=False)
    log(f"written {write_report()} ({time.perf_counter() - t_start:.0f} s in all)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
