"""Memory against throughput (issue 11, item 7): peak RSS and rows/s of shardfeed and
Petastorm (baseline and optimized) in one run, at two row-group sizes, and the effective
shuffle window W_eff of every system.

Datasets (generated once, reused while their marker file matches):

* the tabular dataset of ``_common`` (default 1,048,576 rows x 256 float32 + int64
  ``label``, snappy) written twice: with row groups of ``--small-rg`` (32,768) rows and of
  ``--large-rg`` (262,144) rows.  ``_common`` gives every file at least two row groups, so
  each dataset has ``min(--files, rows // (2 x row-group rows))`` files: 8 files of 4 x
  32,768 rows and 2 files of 2 x 262,144 rows by default (every row group full size);
* a "sorted" dataset for the shuffle quality: ``--sorted-row-groups`` (64) row groups of
  ``--sorted-rg-rows`` (4,096) rows in ``--sorted-files`` (4) files, written in order; an
  int64 column ``rg`` holds each row's global row-group index, beside ``--sorted-features``
  (16) float32 features ``f000..`` and an int64 ``label``.

Systems, each pass in its own process (so its peak RSS is its own), ``--epochs`` (2)
epochs of ``--batch-size`` (4096) rows, ``x = [B, 256]`` float32 + ``label``:

* ``shardfeed``: ``Loader(path, batch_size=4096, shuffle=True, stack={"x": features},
  columns=["label"], output="torch")``, everything else at its default (the reference);
* ``shardfeed_mem_<limit>`` for each of ``--memory-limits`` (256MiB, 1GiB): the same with
  ``memory_limit=<bytes>``, when this build's ``Loader`` has that keyword (else skipped,
  and the notes say so);
* ``petastorm_baseline`` / ``petastorm_optimized``: ``petastorm_worker.py``'s (the suite's)
  Petastorm 0.13.1 configurations, in Petastorm's own environment (``petastorm_env.py``).

Per system and row-group size: rows/s over both epochs (the Loader's construction
included; Petastorm opens a reader per epoch, also included), peak RSS (``ru_maxrss`` of
the process + its largest reaped child, as in ``_common``), the RSS after imports and the
peak above it; for shardfeed also ``Loader.stats()``'s memory fields.  Per system, on the
sorted dataset with batches of ``--weff-batch-size`` (1024):

    W_eff = 1 / mean over full batches of p,   p = sum_g n_g (n_g - 1) / (B (B - 1))

(n_g: rows of row group g in the batch): the probability that two distinct rows of a
batch come from the same row group, inverted.  Reading row group after row group scores
1, a uniform shuffle of the whole dataset ~ the number of row groups (64).

``--repeats`` (3) rounds, each running every system on both datasets and on the sorted
one (``--reverse`` swaps the order of the systems); medians reported.  The page cache is
warmed (the dataset's files read once) before every process.  Result:
``bench/results/bench_memory.json`` (``_common``'s format: one result per system and
row-group size, named ``<system>@rg<rows>``) and a table with ratios to ``shardfeed``.

Usage::

    PYTHONPATH=python python3 bench/bench_memory.py                      # ~8 min on 2 CPUs
    PYTHONPATH=python python3 bench/bench_memory.py --rows 60000 --small-rg 8192 \\
        --large-rg 30000 --repeats 1 --quiet-window 0                     # smoke test
    python3 bench/bench_memory.py --quick                                 # the same

This module imports only the standard library at import time: ``petastorm_worker.py``
imports it in Petastorm's environment for the W_eff helpers.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

import _common as common
import _measure as measure

REFERENCE = "shardfeed"
PETASTORM = ("petastorm_baseline", "petastorm_optimized")
MEM_PREFIX = "shardfeed_mem_"
LABELS = {
    "shardfeed": "shardfeed Loader (defaults)",
    "petastorm_baseline": "Petastorm 0.13.1 baseline",
    "petastorm_optimized": "Petastorm 0.13.1 optimized",
}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def label(system: str) -> str:
    if system.startswith(MEM_PREFIX):
        return f"shardfeed Loader, memory_limit={system[len(MEM_PREFIX) :]}"
    return LABELS.get(system, system)


# --------------------------------------------------------------------------------------
# Memory limits
# --------------------------------------------------------------------------------------

_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "kib": 1 << 10,
    "mib": 1 << 20,
    "gib": 1 << 30,
}


def parse_bytes(text: str) -> int:
    """``"256MiB"`` -> 268435456; also ``KiB``/``GiB``, ``KB``/``MB``/``GB`` and plain bytes."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", text)
    if m is None or m.group(2).lower() not in _UNITS:
        raise ValueError(f"not a size: {text!r} (e.g. 536870912, 512MiB, 1GiB)")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def mem_system(limit: str) -> str:
    return MEM_PREFIX + limit.strip()


def loader_has_memory_limit() -> tuple[bool, str]:
    """Whether this environment's ``shardfeed.Loader`` takes ``memory_limit``; and where
    that package is."""
    import shardfeed

    version = getattr(shardfeed, "__version__", "?")
    where = f"shardfeed {version} at {Path(shardfeed.__file__).parent}"
    return "memory_limit" in inspect.signature(shardfeed.Loader).parameters, where


# --------------------------------------------------------------------------------------
# W_eff (also imported by petastorm_worker.py: numpy only inside the functions)
# --------------------------------------------------------------------------------------


def batch_collision(groups: Any) -> tuple[float, int]:
    """For one batch's row-group indices: p = sum_g n_g (n_g - 1) / (B (B - 1)), the
    probability that two distinct rows come from the same row group, and the number of
    distinct row groups."""
    import numpy as np

    g = np.asarray(groups).astype(np.int64, copy=False).ravel()
    b = g.size
    _, counts = np.unique(g, return_counts=True)
    c = counts.astype(np.float64)
    return float((c * (c - 1)).sum() / (b * (b - 1))), int(counts.size)


def weff_pass(
    make_iter: Callable[[], Iterable[dict[str, Any]]], batch_size: int, key: str = "rg"
) -> dict[str, Any]:
    """One epoch: p of every full batch (a shorter last batch is counted apart, not
    scored), the epoch's W_eff, and rows/s.  ``x`` is touched as in the throughput loop."""
    t0 = time.perf_counter()
    ps: list[float] = []
    distinct: list[int] = []
    rows = partial = 0
    acc = 0.0
    for batch in make_iter():
        groups = batch[key]
        n = len(groups)
        rows += n
        acc += float(batch["x"][-1, -1])
        if n != batch_size or n < 2:
            partial += 1
            continue
        p, d = batch_collision(groups)
        ps.append(p)
        distinct.append(d)
    seconds = time.perf_counter() - t0
    p_mean = statistics.fmean(ps) if ps else float("nan")
    return {
        "rows": rows,
        "seconds": round(seconds, 4),
        "rows_per_second": round(rows / seconds, 1) if seconds > 0 else float("nan"),
        "checksum": acc,
        "batches": len(ps),
        "partial_batches": partial,
        "p_mean": round(p_mean, 6),
        "w_eff": round(1 / p_mean, 3) if ps and p_mean > 0 else float("inf"),
        "distinct_groups_mean": round(statistics.fmean(distinct), 3) if distinct else 0.0,
        "_p": ps,
    }


def weff_result(
    name: str, passes: list[dict[str, Any]], base_rss: float, notes: str
) -> dict[str, Any]:
    """A child's result for the W_eff phase (``_common``'s format, W_eff in ``extra``)."""
    all_p = [p for q in passes for p in q.pop("_p")]
    p_mean = statistics.fmean(all_p) if all_p else float("nan")
    runs = [
        common.Run(rows=q["rows"], seconds=q["seconds"], checksum=q["checksum"], extra=q)
        for q in passes
    ]
    return common.summarize(
        name,
        runs,
        base_rss,
        notes,
        extra={
            "phase": "weff",
            "w_eff": round(1 / p_mean, 3) if all_p and p_mean > 0 else float("inf"),
            "p_mean": round(p_mean, 6),
            "batches": len(all_p),
            "w_eff_epochs": [q["w_eff"] for q in passes],
            "distinct_groups_mean": [q["distinct_groups_mean"] for q in passes],
        },
    )


# --------------------------------------------------------------------------------------
# Datasets
# --------------------------------------------------------------------------------------


def tabular_spec(args: argparse.Namespace, rg_rows: int) -> common.TabularSpec:
    """``_common``'s tabular dataset with row groups of ``rg_rows``: as many files (at most
    ``--files``) as leave every file two full row groups (``_common`` halves the row group
    of a file with fewer rows than two)."""
    files = max(1, min(args.files, args.rows // (2 * rg_rows)))
    return common.TabularSpec(
        rows=args.rows, files=files, row_group_rows=rg_rows, features=args.features
    )


@dataclass(frozen=True)
class SortedSpec:
    """Row groups written in order; column ``rg`` = the row's global row-group index."""

    row_groups: int = 64
    group_rows: int = 4096
    files: int = 4
    features: int = 16
    seed: int = 0
    compression: str = "snappy"

    @property
    def name(self) -> str:
        return (
            f"sorted_g{self.row_groups}x{self.group_rows}_n{self.files}_f{self.features}"
            f"_s{self.seed}_{self.compression}"
        )

    def groups_per_file(self) -> list[int]:
        base, extra = divmod(self.row_groups, self.files)
        return [base + (1 if i < extra else 0) for i in range(self.files)]


def ensure_sorted_dataset(spec: SortedSpec, root: Path = common.DATA_DIR) -> dict[str, Any]:
    """Generates the sorted dataset under ``root/spec.name`` unless a matching copy is
    there (``_common.generated_dataset``: marker file, rename into place)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = root / spec.name
    fingerprint = {"generator": "bench.bench_memory.sorted/1", **asdict(spec)}
    names = [f"f{i:03d}" for i in range(spec.features)]
    schema = pa.schema(
        [("rg", pa.int64()), *(pa.field(n, pa.float32()) for n in names), ("label", pa.int64())]
    )

    def write(tmp: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        files = []
        g = 0
        for fi, n_groups in enumerate(spec.groups_per_file()):
            fname = f"part-{fi:05d}.parquet"
            with pq.ParquetWriter(
                tmp / fname, schema, compression=spec.compression, use_dictionary=["rg", "label"]
            ) as writer:
                for _ in range(n_groups):
                    rng = np.random.default_rng([spec.seed, g])
                    x = rng.standard_normal((spec.features, spec.group_rows), dtype=np.float32)
                    arrays = [
                        pa.array(np.full(spec.group_rows, g, dtype=np.int64)),
                        *(pa.array(x[j]) for j in range(spec.features)),
                        pa.array(rng.integers(0, 10, size=spec.group_rows, dtype=np.int64)),
                    ]
                    writer.write_table(
                        pa.Table.from_arrays(arrays, schema=schema), row_group_size=spec.group_rows
                    )
                    g += 1
            files.append(
                {
                    "name": fname,
                    "rows": n_groups * spec.group_rows,
                    "bytes": (tmp / fname).stat().st_size,
                }
            )
        return files, {"row_groups": g}

    meta = common.generated_dataset(root, spec.name, fingerprint, write)
    files = meta["files"]
    return {
        "name": spec.name,
        "path": str(path),
        "rows": sum(f["rows"] for f in files),
        "bytes_on_disk": sum(f["bytes"] for f in files),
        "files": len(files),
        "row_groups": meta["row_groups"],
        "features": spec.features,
        "feature_dtype": "float32",
        "row_group_rows": spec.group_rows,
        "order": "row groups in order; int64 column rg = global row-group index",
        "compression": spec.compression,
        "seed": spec.seed,
    }


# --------------------------------------------------------------------------------------
# Children (project environment): the shardfeed systems
# --------------------------------------------------------------------------------------


def _loader_defaults() -> str:
    import shardfeed

    params = inspect.signature(shardfeed.Loader).parameters
    shown = ("seed", "shuffle_window", "prefetch", "prefetch_bytes", "num_threads")
    return ", ".join(f"{k}={params[k].default!r}" for k in shown if k in params)


def _memory_stats(stats: dict[str, Any]) -> dict[str, Any]:
    """``Loader.stats()``'s memory fields (any key with "memory"), and the row groups live
    at once."""
    keep = {k: v for k, v in stats.items() if "memory" in k.lower()}
    if "peak_live_row_groups" in stats:
        keep["peak_live_row_groups"] = stats["peak_live_row_groups"]
    return keep


def run_child(args: argparse.Namespace) -> None:
    import shardfeed
    import torch  # noqa: F401  (the Loader imports it for output="torch": in the baseline)

    system = args.child
    feats = [f"f{i:03d}" for i in range(args.features)]
    kw: dict[str, Any] = {}
    if args.memory_limit is not None:
        kw["memory_limit"] = args.memory_limit
    weff = args.phase == "weff"
    base = common.rss_mb()
    t0 = time.perf_counter()
    loader = shardfeed.Loader(
        args.data_path,
        batch_size=args.batch_size,
        shuffle=True,
        stack={"x": feats},
        columns=["rg"] if weff else ["label"],
        output="numpy" if weff else "torch",
        **kw,
    )
    open_seconds = time.perf_counter() - t0
    notes = (
        f"Loader(batch_size={args.batch_size}, shuffle=True, stack x=[B,{len(feats)}] float32, "
        f"columns={['rg'] if weff else ['label']}, output={'numpy' if weff else 'torch'!r}"
        + (f", memory_limit={args.memory_limit}" if args.memory_limit is not None else "")
        + f"), defaults otherwise ({_loader_defaults()}), drop_last; set_epoch(e) per epoch"
    )

    def epoch_iter(epoch: int) -> Any:
        loader.set_epoch(epoch)
        return loader

    memory: list[dict[str, Any]] = []
    if weff:
        passes = [weff_pass(partial(epoch_iter, e), args.batch_size) for e in range(args.epochs)]
        for w in passes:
            log(f"    {system} W_eff epoch: {w['w_eff']:.2f} ({w['batches']} batches)")
        result = weff_result(system, passes, base, notes)
        result["extra"]["engine_memory"] = _memory_stats(loader.stats())
        common.emit_child_result(result)
        return
    epochs: list[measure.Pass] = []
    for e in range(args.epochs):
        q = measure.consume(partial(epoch_iter, e))
        memory.append(_memory_stats(loader.stats()))
        epochs.append(q)
        log(f"    {system} epoch {e}: {q.rows_per_second:,.0f} rows/s")
    runs = [
        common.Run(rows=q.rows, seconds=q.seconds, checksum=q.checksum, extra=q.as_dict())
        for q in epochs
    ]
    result = common.summarize(system, runs, base, notes)
    result["extra"] = {
        "phase": "throughput",
        "open_seconds": round(open_seconds, 4),
        "epochs": [q.as_dict() for q in epochs],
        "engine_memory": memory,
        "memory_limit_bytes": args.memory_limit,
        "package": str(Path(shardfeed.__file__).parent),
    }
    common.emit_child_result(result)


# --------------------------------------------------------------------------------------
# The parent
# --------------------------------------------------------------------------------------


def _child_argv(
    args: argparse.Namespace, system: str, phase: str, dataset: dict[str, Any]
) -> list[str]:
    weff = phase == "weff"
    features = args.sorted_features if weff else args.features
    batch = args.weff_batch_size if weff else args.batch_size
    if system in PETASTORM:
        argv = [str(common.BENCH_DIR / "petastorm_worker.py"), "--system", system]
        argv += ["--name", system]
    else:
        argv = [str(Path(__file__).resolve()), "--child", system]
        if system.startswith(MEM_PREFIX):
            argv += ["--memory-limit", str(parse_bytes(system[len(MEM_PREFIX) :]))]
    return [
        *argv,
        "--phase", phase,
        "--data-path", dataset["path"],
        "--features", str(features),
        "--batch-size", str(batch),
        "--epochs", str(args.epochs),
    ]  # fmt: skip


_FAILURE_REASONS: list[str] = []  # why each failed child failed, in order (for the notes)


def _run_one(
    args: argparse.Namespace, system: str, phase: str, dataset: dict[str, Any], tag: str
) -> dict[str, Any] | None:
    measure.warm_files(common.dataset_files(dataset))
    t0 = time.perf_counter()
    try:
        result = common.run_child(_child_argv(args, system, phase, dataset), timeout=args.timeout)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        log(f"  {system:<24} {tag:<10} FAILED ({e})")
        _FAILURE_REASONS.append(
            f"timed out after {args.timeout:g} s"
            if isinstance(e, subprocess.TimeoutExpired)
            else str(e).rpartition(" failed with ")[2]
        )
        return None
    share = result.get("background", {}).get("other_cpu_share", float("nan"))
    if phase == "weff":
        what = f"W_eff {result['extra']['w_eff']:>6.2f}"
    else:
        rows, seconds = _totals(result)
        what = (
            f"{rows / seconds:>12,.0f} rows/s  peak RSS {result['peak_rss_mb']:>6.0f} MB "
            f"(+{result['peak_rss_mb'] - result['baseline_rss_mb']:.0f})"
        )
    log(
        f"  {system:<24} {tag:<10} {what}  {time.perf_counter() - t0:5.1f} s  "
        f"other load {share:.0%}"
    )
    return result


def _totals(result: dict[str, Any]) -> tuple[int, float]:
    """Rows and seconds over every epoch of a throughput child (the Loader's construction
    included; Petastorm's reader creation is inside each epoch)."""
    epochs = result["extra"]["epochs"]
    rows = sum(int(e["rows"]) for e in epochs)
    seconds = sum(float(e["seconds"]) for e in epochs) + float(
        result["extra"].get("open_seconds", 0.0)
    )
    return rows, seconds


def _background(children: list[dict[str, Any]]) -> dict[str, Any]:
    bgs = [c["background"] for c in children if c.get("background")]
    if not bgs:
        return {}
    wall = sum(b["wall_seconds"] for b in bgs)
    other = sum(b["other_cpu_seconds"] for b in bgs)
    return {
        "wall_seconds": round(wall, 2),
        "own_cpu_seconds": round(sum(b["own_cpu_seconds"] for b in bgs), 2),
        "other_cpu_seconds": round(other, 2),
        "other_cpu_share": round(other / (wall * (os.cpu_count() or 1)), 3) if wall else 0.0,
    }


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def aggregate(
    system: str,
    rg_rows: int,
    children: list[dict[str, Any]],
    weffs: list[dict[str, Any]],
    expected_rows: int,
) -> dict[str, Any]:
    """One result (``_common``'s format) of a system at one row-group size, from its
    repeats: each child is one run (every epoch of it)."""
    runs: list[dict[str, Any]] = []
    for c in children:
        rows, seconds = _totals(c)
        runs.append(
            {
                "rows": rows,
                "seconds": round(seconds, 4),
                "rows_per_second": round(rows / seconds, 1) if seconds > 0 else float("nan"),
                "checksum": sum(float(r.get("checksum", 0.0)) for r in c["runs"]),
                "extra": {
                    "peak_rss_mb": c["peak_rss_mb"],
                    "peak_rss_self_mb": c["peak_rss_self_mb"],
                    "peak_rss_children_max_mb": c["peak_rss_children_max_mb"],
                    "baseline_rss_mb": c["baseline_rss_mb"],
                    "rss_above_baseline_mb": round(c["peak_rss_mb"] - c["baseline_rss_mb"], 1),
                    "epochs_rows_per_second": [e["rows_per_second"] for e in c["extra"]["epochs"]],
                    "open_seconds": c["extra"].get("open_seconds"),
                    "engine_memory": c["extra"].get("engine_memory"),
                    "background": c.get("background"),
                },
            }
        )
    notes = children[0]["notes"] if children else ""
    short = [r["rows"] for r in runs if r["rows"] < expected_rows]
    if system in PETASTORM and short:
        notes += (
            f"; WARNING: {len(short)} run(s) delivered fewer rows than {expected_rows:,} "
            f"({short}): an epoch ended early"
        )
    w = [float(x["extra"]["w_eff"]) for x in weffs]
    above = [r["extra"]["rss_above_baseline_mb"] for r in runs]
    first = [c["extra"]["epochs"][0]["rows_per_second"] for c in children]
    extra: dict[str, Any] = {
        "base_system": system,
        "row_group_rows": rg_rows,
        "rss_above_baseline_mb": round(_median(above), 1),
        "rss_above_baseline_mb_runs": above,
        "w_eff": round(_median(w), 3) if w else None,
        "w_eff_runs": w,
        "w_eff_batches": [x["extra"]["batches"] for x in weffs],
    }
    if system.startswith(MEM_PREFIX):
        extra["memory_limit"] = system[len(MEM_PREFIX) :]
        extra["memory_limit_bytes"] = parse_bytes(system[len(MEM_PREFIX) :])
    if children and children[-1]["extra"].get("engine_memory"):
        extra["engine_memory"] = children[-1]["extra"]["engine_memory"]
    if weffs and weffs[-1]["extra"].get("engine_memory"):
        extra["engine_memory_weff"] = weffs[-1]["extra"]["engine_memory"]
    return {
        "system": f"{system}@rg{rg_rows}",
        "rows_per_second_median": _median([r["rows_per_second"] for r in runs]),
        "seconds_median": _median([r["seconds"] for r in runs]),
        # Every run is a fresh process: its first epoch pays for fresh memory.
        "rows_per_second_first": _median(first),
        "rows_per_run": runs[0]["rows"] if runs else 0,
        "runs": runs,
        "peak_rss_mb": round(_median([c["peak_rss_mb"] for c in children]), 1),
        "peak_rss_self_mb": round(_median([c["peak_rss_self_mb"] for c in children]), 1),
        "peak_rss_children_max_mb": round(
            _median([c["peak_rss_children_max_mb"] for c in children]), 1
        ),
        "baseline_rss_mb": round(_median([c["baseline_rss_mb"] for c in children]), 1),
        "notes": notes,
        "extra": extra,
        "background": _background(children),
    }


def memory_ratios(results: list[dict[str, Any]], small: int, large: int) -> dict[str, float]:
    """rows/s and RSS above baseline of each system against ``shardfeed`` at the same
    row-group size, and each system's large/small RSS."""
    by = {(r["extra"]["base_system"], r["extra"]["row_group_rows"]): r for r in results}
    out: dict[str, float] = {}

    def ratio(a: float, b: float) -> float:
        return round(a / b, 3) if b else float("nan")

    for (system, rg), r in by.items():
        ref = by.get((REFERENCE, rg))
        if ref is not None and system != REFERENCE:
            a, b = f"{system}@rg{rg}", f"{REFERENCE}@rg{rg}"
            out[f"{a}/{b}"] = ratio(r["rows_per_second_median"], ref["rows_per_second_median"])
            out[f"rss {a}/{b}"] = ratio(
                r["extra"]["rss_above_baseline_mb"], ref["extra"]["rss_above_baseline_mb"]
            )
        if rg == large and (system, small) in by:
            s = by[(system, small)]
            out[f"rss {system}@rg{large}/{system}@rg{small}"] = ratio(
                r["extra"]["rss_above_baseline_mb"], s["extra"]["rss_above_baseline_mb"]
            )
    return out


def format_table(doc: dict[str, Any]) -> str:
    """rows/s, RSS and W_eff per system and row-group size, with ratios to shardfeed."""
    cfg = doc["config"]
    small, large = cfg["small_rg"], cfg["large_rg"]
    rat = doc["ratios"]
    head = (
        f"{'system':<26} {'rg rows':>8} {'rows/s':>11} {'÷ sf':>6} {'peak RSS':>9} "
        f"{'base':>6} {'+RSS MB':>8} {'÷ sf':>6} {'lg/sm':>6} {'W_eff':>6} {'load':>5}"
    )
    lines = [head, "-" * len(head)]
    for r in doc["results"]:
        e = r["extra"]
        name, rg = e["base_system"], e["row_group_rows"]
        key = f"{name}@rg{rg}/{REFERENCE}@rg{rg}"
        rps_ratio = "1" if name == REFERENCE else f"{rat.get(key, float('nan')):.2f}"
        rss_ratio = "1" if name == REFERENCE else f"{rat.get('rss ' + key, float('nan')):.2f}"
        lg = rat.get(f"rss {name}@rg{large}/{name}@rg{small}") if rg == large else None
        w = e.get("w_eff")
        share = r.get("background", {}).get("other_cpu_share")
        lines.append(
            f"{name:<26} {rg:>8} {r['rows_per_second_median']:>11,.0f} {rps_ratio:>6} "
            f"{r['peak_rss_mb']:>9,.0f} {r['baseline_rss_mb']:>6,.0f} "
            f"{e['rss_above_baseline_mb']:>8,.0f} {rss_ratio:>6} "
            f"{'' if lg is None else f'{lg:.2f}':>6} {'-' if w is None else f'{w:.2f}':>6} "
            f"{'-' if share is None else f'{share:.0%}':>5}"
        )
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rows", type=int, default=1 << 20, help="tabular rows (default 1,048,576)")
    p.add_argument("--files", type=int, default=8, help="at most this many files per dataset")
    p.add_argument("--features", type=int, default=256, help="float32 feature columns")
    p.add_argument("--small-rg", type=int, default=32_768, help="rows per row group, small")
    p.add_argument("--large-rg", type=int, default=262_144, help="rows per row group, large")
    p.add_argument("--batch-size", type=int, default=4096)
    p.add_argument("--epochs", type=int, default=2, help="epochs per process")
    p.add_argument("--repeats", type=int, default=3, help="processes per system and dataset")
    p.add_argument("--reverse", action="store_true", help="run the systems in reverse order")
    p.add_argument(
        "--memory-limits",
        default="256MiB,1GiB",
        help="Loader(memory_limit=...) values, one shardfeed_mem_<value> system each ('': none)",
    )
    p.add_argument(
        "--systems",
        default=None,
        help="comma-separated subset (default: shardfeed, shardfeed_mem_*, petastorm_*)",
    )
    p.add_argument("--skip-petastorm", action="store_true")
    p.add_argument("--skip-weff", action="store_true", help="no W_eff measurement")
    p.add_argument("--sorted-row-groups", type=int, default=64)
    p.add_argument("--sorted-rg-rows", type=int, default=4096)
    p.add_argument("--sorted-files", type=int, default=4)
    p.add_argument("--sorted-features", type=int, default=16)
    p.add_argument("--weff-batch-size", type=int, default=1024)
    p.add_argument(
        "--quiet-window",
        type=float,
        default=20.0,
        help="seconds of idle CPUs to wait for before measuring (0: don't)",
    )
    p.add_argument("--quiet-max-wait", type=float, default=600.0)
    p.add_argument("--quick", action="store_true", help="60k rows, 1 repeat: a smoke test")
    p.add_argument(
        "--dataset-rows",
        help="comma-separated row counts (e.g. 262144,1048576,8388608 = 0.25/1/8 GB): "
        "instead of the comparison, RSS of shardfeed by dataset size at --small-rg row groups",
    )
    p.add_argument("--timeout", type=float, default=900, help="seconds per process")
    p.add_argument("--output", type=Path, default=common.RESULTS_DIR / "bench_memory.json")
    # Internal: one shardfeed system in this process.
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--phase", default="throughput", help=argparse.SUPPRESS)
    p.add_argument("--data-path", help=argparse.SUPPRESS)
    p.add_argument("--memory-limit", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick and not args.child:
        args.rows, args.small_rg, args.large_rg, args.repeats = 60_000, 8192, 30_000, 1
        args.quiet_window = 0
    return args


def run_sizes(args: argparse.Namespace, sizes: list[int]) -> int:
    """``--dataset-rows``: the reference (or ``--systems``) on datasets of each size, row
    groups of ``--small-rg``: peak RSS must not follow the dataset's size (issue 11)."""
    t_start = time.perf_counter()
    systems = [s.strip() for s in (args.systems or REFERENCE).split(",") if s.strip()]
    bad = [s for s in systems if s != REFERENCE and not s.startswith(MEM_PREFIX)]
    if bad:
        raise SystemExit(f"--dataset-rows runs shardfeed systems only, not {bad}")
    datasets: dict[int, dict[str, Any]] = {}
    for n in sizes:
        spec = tabular_spec(argparse.Namespace(**{**vars(args), "rows": n}), args.small_rg)
        log(f"dataset {spec.name} ...")
        datasets[n] = common.ensure_tabular_dataset(spec)
        log(f"  {n:,} rows, {datasets[n]['bytes_on_disk'] / 1e9:.2f} GB")
    quiet = None
    if args.quiet_window > 0:
        log(f"waiting for {args.quiet_window:.0f} s of idle CPUs ...")
        quiet = measure.wait_quiet(
            args.quiet_window, threshold=0.05, max_wait=args.quiet_max_wait, log=log
        )
    runs: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for rep in range(args.repeats):
        log(f"round {rep + 1} of {args.repeats}:")
        for n in sizes:
            for system in systems:
                r = _run_one(args, system, "throughput", datasets[n], f"{n:,} rows")
                if r is not None:
                    runs.setdefault((system, n), []).append(r)
    results = []
    for n in sizes:
        for system in systems:
            if (system, n) not in runs:
                continue
            r = aggregate(system, args.small_rg, runs[(system, n)], [], args.epochs * n)
            r["system"] = f"{system}@rows{n}"
            r["label"] = label(system)
            r["extra"]["dataset_rows"] = n
            r["extra"]["dataset_bytes_on_disk"] = datasets[n]["bytes_on_disk"]
            results.append(r)
    if not results:
        raise SystemExit("every process failed")
    ratios: dict[str, float] = {}
    for system in systems:
        above = {
            r["extra"]["dataset_rows"]: r["extra"]["rss_above_baseline_mb"]
            for r in results
            if r["extra"]["base_system"] == system
        }
        if len(above) > 1 and min(above.values()) > 0:
            ratios[f"rss {system} max/min over sizes"] = round(
                max(above.values()) / min(above.values()), 3
            )
    first = datasets[sizes[0]]
    dataset = {
        **{k: first[k] for k in ("features", "compression", "feature_dtype")},
        "name": "memory by dataset size: " + " + ".join(d["name"] for d in datasets.values()),
        "rows": sizes,
        "path": str(common.DATA_DIR),
        "datasets": {f"rows{n}": d for n, d in datasets.items()},
    }
    config = {
        "workload": "memory_by_dataset_size",
        "batch_size": args.batch_size,
        "epochs_per_process": args.epochs,
        "repeats": args.repeats,
        "row_group_rows": args.small_rg,
        "dataset_rows": sizes,
        "systems": systems,
        "page_cache": "warm (the dataset's files read once before every process)",
        "process_per_system": True,
        "quiet": quiet,
        "shardfeed_build": measure.shardfeed_build(),
    }
    notes = [
        "peak_rss_mb = ru_maxrss(self) + ru_maxrss(largest reaped child) per process; "
        "extra.rss_above_baseline_mb = peak RSS above the RSS after imports (median).",
        "ratios: 'rss <system> max/min over sizes' = largest / smallest RSS above imports.",
    ]
    out, doc = common.write_results(
        "memory_sizes", dataset, config, results, None, None, notes, path=args.output
    )
    doc["reference"] = REFERENCE
    doc["ratios"] = ratios
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print()
    print(
        f"memory by dataset size: {args.features} float32, row groups of {args.small_rg:,}, "
        f"batch {args.batch_size}, {args.epochs} epochs per process, median of {args.repeats}"
    )
    head = f"{'system':<24} {'rows':>11} {'GB':>6} {'rows/s':>11} {'+RSS MB':>8}"
    print(head)
    print("-" * len(head))
    for r in results:
        e = r["extra"]
        print(
            f"{e['base_system']:<24} {e['dataset_rows']:>11,} "
            f"{e['dataset_bytes_on_disk'] / 1e9:>6.2f} {r['rows_per_second_median']:>11,.0f} "
            f"{e['rss_above_baseline_mb']:>8,.0f}"
        )
    print(f"ratios: {json.dumps(ratios)}")
    print(f"written to {out} ({time.perf_counter() - t_start:.0f} s in all)")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        run_child(args)
        return 0
    if args.dataset_rows:
        sizes = [int(x) for x in args.dataset_rows.split(",") if x.strip()]
        if args.output == common.RESULTS_DIR / "bench_memory.json":
            args.output = common.RESULTS_DIR / "bench_memory_sizes.json"
        return run_sizes(args, sizes)
    t_start = time.perf_counter()
    notes: list[str] = []
    skipped: dict[str, str] = {}

    limits = [x.strip() for x in args.memory_limits.split(",") if x.strip()]
    for x in limits:
        parse_bytes(x)  # fail early on a typo
    has_limit, where = loader_has_memory_limit()
    mem_systems = [mem_system(x) for x in limits]
    all_systems = [REFERENCE, *mem_systems, *PETASTORM]
    if args.systems is None:
        systems = list(all_systems)
    else:
        systems = [s.strip() for s in args.systems.split(",") if s.strip()]
        unknown = [s for s in systems if s not in all_systems]
        if unknown:
            raise SystemExit(f"unknown systems {unknown}; choose from {all_systems}")
    if not has_limit:
        for s in [s for s in systems if s.startswith(MEM_PREFIX)]:
            skipped[s] = "Loader has no memory_limit keyword"
        if mem_systems:
            notes.append(
                f"{', '.join(mem_systems)} skipped: this build's Loader has no memory_limit "
                f"keyword ({where})."
            )
    if args.skip_petastorm:
        for s in [s for s in systems if s in PETASTORM]:
            skipped[s] = "--skip-petastorm"
    elif any(s in PETASTORM for s in systems):
        import petastorm_env

        log("Petastorm environment (bench/.venv/petastorm) ...")
        try:
            petastorm_env.ensure()
            log(f"  {json.dumps(petastorm_env.versions())}")
        except (SystemExit, OSError, subprocess.CalledProcessError) as e:
            for s in [s for s in systems if s in PETASTORM]:
                skipped[s] = f"no Petastorm environment: {e}"
    systems = [s for s in systems if s not in skipped]
    for s, why in skipped.items():
        log(f"skipped {s}: {why}")
    if not systems:
        raise SystemExit("no system left to run")
    if args.reverse:
        systems.reverse()

    rg_sizes = [args.small_rg, args.large_rg]
    datasets: dict[int, dict[str, Any]] = {}
    for rg in rg_sizes:
        spec = tabular_spec(args, rg)
        log(f"dataset {spec.name} ...")
        datasets[rg] = common.ensure_tabular_dataset(spec)
    sorted_spec = SortedSpec(
        row_groups=args.sorted_row_groups,
        group_rows=args.sorted_rg_rows,
        files=args.sorted_files,
        features=args.sorted_features,
    )
    sorted_ds: dict[str, Any] | None = None
    if not args.skip_weff:
        log(f"dataset {sorted_spec.name} ...")
        sorted_ds = ensure_sorted_dataset(sorted_spec)
    for rg, ds in datasets.items():
        log(
            f"  rg {rg:,}: {ds['rows']:,} rows, {ds['bytes_on_disk'] / 1e9:.2f} GB, "
            f"{ds['files']} files, {ds['row_groups']} row groups"
        )
        if ds["rows"] < 2 * rg:
            notes.append(
                f"the rg {rg} dataset has fewer rows than two such row groups: _common wrote "
                "smaller row groups (see dataset.datasets)"
            )

    quiet = None
    if args.quiet_window > 0:
        log(f"waiting for {args.quiet_window:.0f} s of idle CPUs ...")
        quiet = measure.wait_quiet(
            args.quiet_window, threshold=0.05, max_wait=args.quiet_max_wait, log=log
        )
        log(f"  {quiet}")
    load_start = common.load_average()
    if load_start and load_start[0] > 0.5:
        log(
            f"warning: the machine is busy (load average {load_start[0]:.2f}); other work on "
            "the CPUs distorts the numbers"
        )

    through: dict[tuple[str, int], list[dict[str, Any]]] = {}
    weff: dict[str, list[dict[str, Any]]] = {}
    failures: list[str] = []
    for rep in range(args.repeats):
        log(f"round {rep + 1} of {args.repeats}:")
        for rg in rg_sizes:
            for system in systems:
                r = _run_one(args, system, "throughput", datasets[rg], f"rg {rg}")
                if r is None:
                    failures.append(f"{system} rg {rg} round {rep + 1} ({_FAILURE_REASONS[-1]})")
                else:
                    through.setdefault((system, rg), []).append(r)
        if sorted_ds is not None:
            for system in systems:
                r = _run_one(args, system, "weff", sorted_ds, "W_eff")
                if r is None:
                    failures.append(f"{system} W_eff round {rep + 1} ({_FAILURE_REASONS[-1]})")
                else:
                    weff.setdefault(system, []).append(r)
    if failures:
        notes.append(f"failed processes (left out): {'; '.join(failures)}")

    results = []
    for rg in rg_sizes:
        # Petastorm delivers the last partial batch: every row, every epoch.
        expected = args.epochs * datasets[rg]["rows"]
        for system in systems if not args.reverse else systems[::-1]:
            if (system, rg) in through:
                results.append(
                    aggregate(system, rg, through[(system, rg)], weff.get(system, []), expected)
                )
                results[-1]["label"] = label(system)
    if not results:
        raise SystemExit("every process failed")

    small, large = datasets[args.small_rg], datasets[args.large_rg]
    dataset = {
        **{k: small[k] for k in ("rows", "features", "compression", "feature_dtype")},
        "name": f"memory: {small['name']} + {large['name']}"
        + (f" + {sorted_ds['name']}" if sorted_ds else ""),
        "path": str(common.DATA_DIR),
        "bytes_on_disk": small["bytes_on_disk"],
        "files": small["files"],
        "row_groups": small["row_groups"],
        "label_dtype": "int64",
        "datasets": {
            f"rg{args.small_rg}": small,
            f"rg{args.large_rg}": large,
            **({"sorted": sorted_ds} if sorted_ds else {}),
        },
    }
    config = {
        "workload": "memory",
        "batch_size": args.batch_size,
        "epochs_per_process": args.epochs,
        "repeats": args.repeats,
        "small_rg": args.small_rg,
        "large_rg": args.large_rg,
        "systems_order": systems,
        "reverse": args.reverse,
        "memory_limits": limits,
        "loader_memory_limit_supported": has_limit,
        "skipped": skipped,
        "weff": None
        if sorted_ds is None
        else {
            "batch_size": args.weff_batch_size,
            "epochs": args.epochs,
            "dataset": sorted_spec.name,
            "row_groups": sorted_ds["row_groups"],
            "definition": "1 / mean over full batches of sum_g n_g(n_g-1) / (B(B-1))",
        },
        "page_cache": "warm (the dataset's files read once before every process)",
        "process_per_system": True,
        "rows_per_second": "rows over all epochs / (their seconds + shardfeed's Loader "
        "construction); Petastorm creates a reader per epoch (inside the epoch)",
        "quiet": quiet,
        "shardfeed_build": measure.shardfeed_build(),
        "load_average_start": load_start,
        "load_average_end": common.load_average(),
    }
    run_notes = list(notes)
    notes += [
        "Page cache warm: this measures decode, batching and the memory they hold, not storage.",
        "peak_rss_mb = ru_maxrss(self) + ru_maxrss(largest reaped child) per process; "
        "baseline_rss_mb = RSS after imports; extra.rss_above_baseline_mb = their "
        "difference (median over the repeats; each repeat a fresh process).",
        "Ratios (doc.ratios): '<system>@rgN/shardfeed@rgN' = rows/s; 'rss ...' = RSS above "
        "baseline; 'rss <system>@rgL/<system>@rgS' = large/small row groups.",
        "W_eff (extra.w_eff, per system, the same in both row-group entries): on the sorted "
        "dataset; 1 = batches from one row group at a time, ~ row groups = a full shuffle.",
        "shardfeed drops the last partial batch of an epoch (drop_last); Petastorm delivers it.",
    ]
    out, doc = common.write_results(
        "memory", dataset, config, results, None, None, notes, path=args.output
    )
    doc["reference"] = REFERENCE
    doc["ratios"] = memory_ratios(results, args.small_rg, args.large_rg)
    out.write_text(json.dumps(doc, indent=2) + "\n")

    print()
    print(
        f"memory benchmark: {args.rows:,} rows x {args.features} float32, row groups of "
        f"{args.small_rg:,} ({small['files']} files) and {args.large_rg:,} ({large['files']} "
        f"files), batch {args.batch_size}, {args.epochs} epochs per process, median of "
        f"{args.repeats}, {doc['machine']['cpus']} CPUs, warm page cache"
    )
    print(format_table(doc))
    print(
        "÷ sf: against shardfeed at the same row-group size; +RSS MB: peak RSS above the RSS "
        f"after imports; lg/sm: +RSS at {args.large_rg:,} ÷ at {args.small_rg:,} rows; "
        f"W_eff on {sorted_spec.row_groups} row groups of {sorted_spec.group_rows:,} "
        f"(batch {args.weff_batch_size}); load: other processes' CPU share"
    )
    for n in run_notes:
        print(f"note: {n}")
    print(f"written to {out} ({time.perf_counter() - t_start:.0f} s in all)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
