"""Transform benchmark (issue 4): a realistic preprocessing recipe, three ways.

Dataset: a variant of the tabular dataset with id columns and nulls, generated here into
``bench/data/`` (reused while its marker matches): 256 float32 features ``f000..f255``
(feature j drawn from N(mean_j, std_j), the first 16 with 1% nulls), an int64 ``label``,
int64 ``user_id`` (2% nulls) and ``item_id``, and a string ``category`` (5,000 values,
5% nulls); 1.1M rows, 8 files, 16 row groups by default.

The recipe: fill the features' nulls with 0, standardize every feature with its given
mean and std, hash-bucket the ids (``user_id`` -> 100,000 buckets after filling nulls
with -1, ``item_id`` -> 10,000, ``category`` -> 1,000 with nulls in their own bucket),
Gaussian noise (std 0.05) on every standardized feature; features stacked into
``x = [B, 256]`` float32.

Systems, each in its own process, ``--epochs`` passes (the first shown apart):

* ``builtin_loader``: ``Loader(transforms=[FillNull("x"), Standardize("x", mean=<256>,
  std=<256>), GaussianNoise("x"), <ids>])``: the recipe on the stack, in the engine's
  C++ threads (the reference);
* ``builtin_columns_loader``: the same recipe spelled per column (``FillNull``,
  ``Standardize`` and ``GaussianNoise`` once per feature: 533 transforms), as before
  stacks took transforms;
* ``builtin_torch_2w``: the same in ``TorchDataset`` + ``DataLoader(num_workers=2)``;
* ``numpy_torch_2w``: ``TorchDataset(transform=recipe_numpy)`` + ``DataLoader(num_workers=2)``:
  the recipe as a per-batch NumPy function in the DataLoader workers.  The engine still
  fills nulls (``fill_null=0``: a ``transform=`` never sees nulls) and hashes the string
  column (strings cannot leave the engine); ``user_id`` nulls become 0, not -1;
* ``numpy_loader``: the same callable with ``Loader`` (Python on the training process);
* ``fill_only_loader``: ``Loader(fill_null=0, transforms=[HashBucket("category")])``: no
  recipe, what reading and batching alone cost;
* ``petastorm_transformspec``: Petastorm 0.13.1 ``make_batch_reader(transform_spec=
  TransformSpec(recipe on each row group's pandas DataFrame))`` + ``BatchedDataLoader``
  (defaults otherwise), in Petastorm's own environment (``petastorm_env.py``).

Results: ``bench/results/transforms.json`` (``_common``'s format, reference
``builtin_loader``) and a table.  Usage::

    PYTHONPATH=python python3 bench/bench_transforms.py
    PYTHONPATH=python python3 bench/bench_transforms.py --quick      # small, smoke test
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import _common as common
import _measure as measure

SYSTEMS = (
    "builtin_loader",
    "builtin_columns_loader",
    "builtin_torch_2w",
    "numpy_torch_2w",
    "numpy_loader",
    "fill_only_loader",
    "petastorm_transformspec",
)
REFERENCE = "builtin_loader"
NULL_FEATURES = 16
NOISE_STD = 0.05
INT_IDS = {"user_id": 100_000, "item_id": 10_000}
STRING_IDS = {"category": 1_000}
CATEGORIES = 5_000
GENERATOR = "bench.bench_transforms.ids/1"


# --------------------------------------------------------------------------------------
# Dataset
# --------------------------------------------------------------------------------------


def _stats(features: int, seed: int) -> tuple[list[float], list[float]]:
    import numpy as np

    rng = np.random.default_rng([seed, 7])
    mean = rng.uniform(-5, 5, features).astype(np.float32)
    std = rng.uniform(0.5, 3.0, features).astype(np.float32)
    return [float(v) for v in mean], [float(v) for v in std]


def ensure_dataset(spec: common.TabularSpec) -> dict[str, Any]:
    """The id/null variant of the tabular dataset (generated once, then reused)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    name = spec.name.replace("tabular_", "tabular_ids_", 1)
    path = common.DATA_DIR / name
    fingerprint = {
        "generator": GENERATOR,
        **asdict(spec),
        "null_features": NULL_FEATURES,
        "categories": CATEGORIES,
    }
    marker = path / common.MARKER
    meta = None
    if marker.is_file():
        try:
            meta = json.loads(marker.read_text())
        except ValueError:
            meta = None
        if meta is not None and (
            meta.get("spec") != fingerprint
            or any(
                not (path / f["name"]).is_file() or (path / f["name"]).stat().st_size != f["bytes"]
                for f in meta["files"]
            )
        ):
            meta = None
    mean, std = _stats(spec.features, spec.seed)
    if meta is None:
        common.DATA_DIR.mkdir(parents=True, exist_ok=True)
        tmp = common.DATA_DIR / f".tmp-{name}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        feats = spec.feature_names
        schema = pa.schema(
            [
                *(pa.field(n, pa.float32()) for n in feats),
                ("label", pa.int64()),
                ("user_id", pa.int64()),
                ("item_id", pa.int64()),
                ("category", pa.string()),
            ]
        )
        vocab = np.array([f"cat-{i:05d}" for i in range(CATEGORIES)], dtype=object)
        mu = np.asarray(mean, np.float32)[:, None]
        sd = np.asarray(std, np.float32)[:, None]
        files, groups, t0 = [], 0, time.perf_counter()
        for fi, n_rows in enumerate(spec.file_rows()):
            fname = f"part-{fi:05d}.parquet"
            with pq.ParquetWriter(
                tmp / fname,
                schema,
                compression=spec.compression,
                use_dictionary=["label", "category"],
            ) as writer:
                for gi, g in enumerate(spec.group_rows(n_rows)):
                    rng = np.random.default_rng([spec.seed, fi, gi, 1])
                    x = rng.standard_normal((spec.features, g), dtype=np.float32) * sd + mu
                    arrays = []
                    for j in range(spec.features):
                        mask = rng.random(g) < 0.01 if j < NULL_FEATURES else None
                        arrays.append(pa.array(x[j], mask=mask))
                    arrays.append(pa.array(rng.integers(0, spec.classes, g, dtype=np.int64)))
                    arrays.append(
                        pa.array(
                            rng.integers(0, 10_000_000, g, dtype=np.int64),
                            mask=rng.random(g) < 0.02,
                        )
                    )
                    arrays.append(pa.array(rng.integers(0, 1_000_000, g, dtype=np.int64)))
                    cats = vocab[rng.integers(0, CATEGORIES, g)]
                    arrays.append(pa.array(cats, type=pa.string(), mask=rng.random(g) < 0.05))
                    writer.write_table(
                        pa.Table.from_arrays(arrays, schema=schema), row_group_size=g
                    )
                    groups += 1
            files.append({"name": fname, "rows": n_rows, "bytes": (tmp / fname).stat().st_size})
            print(
                f"  generated {fname}: {n_rows} rows, {files[-1]['bytes'] / 1e6:.1f} MB",
                file=sys.stderr,
                flush=True,
            )
        meta = {
            "spec": fingerprint,
            "files": files,
            "row_groups": groups,
            "generation_seconds": round(time.perf_counter() - t0, 2),
        }
        (tmp / common.MARKER).write_text(json.dumps(meta, indent=2) + "\n")
        shutil.rmtree(path, ignore_errors=True)
        tmp.rename(path)
    files = meta["files"]
    rows = sum(f["rows"] for f in files)
    size = sum(f["bytes"] for f in files)
    return {
        "name": name,
        "path": str(path),
        "rows": rows,
        "bytes_on_disk": size,
        "files": len(files),
        "row_groups": meta["row_groups"],
        "features": spec.features,
        "row_group_rows": spec.row_group_rows,
        "compression": spec.compression,
        "seed": spec.seed,
        "description": (
            f"{rows:,} rows x ({spec.features} float32 features, the first {NULL_FEATURES} with "
            f"1% nulls; int64 label; int64 user_id with 2% nulls; int64 item_id; string "
            f"category, {CATEGORIES:,} values, 5% nulls), {size / 1e9:.2f} GB on disk, "
            f"{len(files)} files, {meta['row_groups']} row groups ({spec.compression})"
        ),
    }


def recipe(dataset: dict[str, Any]) -> dict[str, Any]:
    """The recipe as plain data (for the Petastorm worker and the result JSON)."""
    features = dataset["features"]
    mean, std = _stats(features, dataset["seed"])
    feats = [f"f{i:03d}" for i in range(features)]
    return {
        "features": feats,
        "mean": mean,
        "std": std,
        "null_features": feats[:NULL_FEATURES],
        "noise_std": NOISE_STD,
        "int_ids": INT_IDS,
        "string_ids": STRING_IDS,
    }


def _id_transforms() -> list[Any]:
    from shardfeed.transforms import FillNull, HashBucket

    out: list[Any] = [
        FillNull("user_id", value=-1),
        HashBucket("user_id", num_buckets=INT_IDS["user_id"]),
        HashBucket("item_id", num_buckets=INT_IDS["item_id"]),
    ]
    for col, n in STRING_IDS.items():
        out += [HashBucket(col, num_buckets=n), FillNull(col, value=n)]
    return out


def builtin_transforms(r: dict[str, Any]) -> list[Any]:
    """The recipe on the stack ``x``: three transforms with per-feature vectors."""
    from shardfeed.transforms import FillNull, GaussianNoise, Standardize

    return [
        FillNull("x", value=0.0),
        Standardize("x", mean=r["mean"], std=r["std"]),
        GaussianNoise("x", std=r["noise_std"]),
        *_id_transforms(),
    ]


def column_transforms(r: dict[str, Any]) -> list[Any]:
    """The same recipe spelled per column: one transform per (feature, operation)."""
    from shardfeed.transforms import FillNull, GaussianNoise, Standardize

    out: list[Any] = [FillNull(f, value=0.0) for f in r["null_features"]]
    out += [
        Standardize(f, mean=m, std=s)
        for f, m, s in zip(r["features"], r["mean"], r["std"], strict=False)
    ]
    out += _id_transforms()
    out += [GaussianNoise(f, std=r["noise_std"]) for f in r["features"]]
    return out


def _splitmix64(v: Any) -> Any:
    import numpy as np

    with np.errstate(over="ignore"):
        z = v.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


class NumpyRecipe:
    """The recipe as a per-batch NumPy callable (``transform=``)."""

    def __init__(self, r: dict[str, Any], seed: int = 0) -> None:
        import numpy as np

        self.mean = np.asarray(r["mean"], np.float32)
        self.inv_std = (1.0 / np.asarray(r["std"], np.float64)).astype(np.float32)
        self.noise = np.float32(r["noise_std"])
        self.seed = seed

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        import numpy as np

        x = batch["x"]  # nulls already 0 (fill_null in the engine)
        x = (x - self.mean) * self.inv_std
        # Noise keyed by the batch's first sample id: the same batch gets the same noise in
        # any worker (per batch, not per sample: a per-sample generator costs ~µs a row).
        rng = np.random.default_rng([self.seed, int(batch["sample_id"][0])])
        x += rng.standard_normal(x.shape, dtype=np.float32) * self.noise
        out = {"x": x, "label": batch["label"]}
        for col, n in INT_IDS.items():
            out[col] = (_splitmix64(batch[col]) % np.uint64(n)).astype(np.int64)
        for col in STRING_IDS:
            out[col] = batch[col]  # hashed by the engine: strings cannot leave it
        return out


# --------------------------------------------------------------------------------------
# Children
# --------------------------------------------------------------------------------------


def _make(args: argparse.Namespace, system: str, dataset_path: str) -> tuple[Any, str, Any]:
    import shardfeed
    import torch.utils.data as tud
    from shardfeed.transforms import FillNull, HashBucket

    r = json.loads(Path(args.recipe).read_text())
    cols = ["label", *INT_IDS, *STRING_IDS]
    common_kw: dict[str, Any] = {
        "columns": cols,
        "batch_size": args.batch_size,
        "shuffle": True,
        "seed": 0,
        "stack": {"x": r["features"]},
        "output": "torch",
        "num_threads": args.threads,
    }
    strings_only = []
    for col, n in STRING_IDS.items():
        strings_only += [HashBucket(col, num_buckets=n), FillNull(col, value=n)]
    if system.startswith("builtin_columns"):
        kw = {**common_kw, "transforms": column_transforms(r)}
        notes = (
            f"{len(kw['transforms'])} built-in transforms per column (FillNull "
            f"x{NULL_FEATURES + 2}, Standardize x{len(r['features'])}, HashBucket x3, "
            f"GaussianNoise x{len(r['features'])}) in the engine's threads"
        )
    elif system.startswith("builtin"):
        kw = {**common_kw, "transforms": builtin_transforms(r)}
        notes = (
            "built-in transforms on the stack x (FillNull, Standardize with per-feature "
            "mean/std, GaussianNoise: one stream per sample) + 5 on the ids, in the "
            "engine's threads"
        )
    elif system.startswith("numpy"):
        kw = {
            **common_kw,
            "fill_null": 0.0,
            "transforms": strings_only,
            "transform": NumpyRecipe(r),
            "with_sample_id": True,
        }
        notes = (
            "transform=NumpyRecipe (per batch: standardize, noise keyed by the batch's "
            "first sample id, splitmix64 % n for int ids); fill_null=0 and the string "
            "HashBucket in the engine"
        )
    elif system == "fill_only_loader":
        kw = {**common_kw, "fill_null": 0.0, "transforms": strings_only}
        notes = "no recipe: fill_null=0 and the string column's HashBucket only"
    else:
        raise SystemExit(f"unknown system {system!r}")
    if system.endswith("_2w"):
        ds = shardfeed.TorchDataset(dataset_path, **kw)

        def make(epoch: int) -> Any:
            ds.set_epoch(epoch)
            return tud.DataLoader(ds, batch_size=None, num_workers=args.workers)

        return make, notes + f"; TorchDataset in DataLoader(num_workers={args.workers})", None
    loader = shardfeed.Loader(dataset_path, **kw)

    def make_l(epoch: int) -> Any:
        loader.set_epoch(epoch)
        return loader

    return make_l, notes + "; Loader (one process)", loader


def run_child(args: argparse.Namespace) -> None:
    import torch  # noqa: F401

    base = common.rss_mb()
    make, notes, loader = _make(args, args.child, args.data_path)
    passes = []
    for epoch in range(args.epochs):
        q = measure.consume(lambda epoch=epoch: make(epoch))
        if loader is not None:
            st = loader.stats()
            q.extra["stages"] = {k: round(v["seconds"], 4) for k, v in st["stages"].items()}
        passes.append(q)
        print(
            f"    {args.child} epoch {epoch}: {q.rows_per_second:,.0f} rows/s",
            file=sys.stderr,
            flush=True,
        )
    first, measured = passes[0], passes[1:] if len(passes) > 1 else passes
    runs = [
        common.Run(rows=q.rows, seconds=q.seconds, checksum=q.checksum, extra=q.as_dict())
        for q in measured
    ]
    result = common.summarize(args.child, runs, base, notes)
    result["rows_per_second_first"] = first.rows_per_second
    result["extra"] = {"epochs": [q.as_dict() for q in passes]}
    common.emit_child_result(result)


# --------------------------------------------------------------------------------------
# Parent
# --------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rows", type=int, default=1_100_000)
    p.add_argument("--files", type=int, default=8)
    p.add_argument("--row-group-rows", type=int, default=68_750)
    p.add_argument("--features", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=4096)
    p.add_argument("--epochs", type=int, default=4, help="passes per system (1st shown apart)")
    p.add_argument("--petastorm-epochs", type=int, default=4)
    p.add_argument(
        "--petastorm-files",
        type=int,
        default=2,
        help="Petastorm: only the first N files (default 2 of 8: it is slow; 0: all)",
    )
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--systems", default=",".join(SYSTEMS))
    p.add_argument("--skip-petastorm", action="store_true")
    p.add_argument("--quick", action="store_true", help="60k rows, 3 epochs")
    p.add_argument("--busy-threshold", type=float, default=0.10)
    p.add_argument(
        "--quiet-window",
        type=float,
        default=20.0,
        help="seconds of idle CPUs to wait for before measuring (0: don't)",
    )
    p.add_argument("--quiet-max-wait", type=float, default=900.0)
    p.add_argument("--output", type=Path, default=common.RESULTS_DIR / "transforms.json")
    p.add_argument("--timeout", type=float, default=900)
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--data-path", help=argparse.SUPPRESS)
    p.add_argument("--recipe", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:
        args.rows, args.epochs, args.petastorm_epochs, args.petastorm_files = 60_000, 3, 3, 0
        args.quiet_window = 0
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        run_child(args)
        return 0
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    if args.skip_petastorm:
        systems = [s for s in systems if not s.startswith("petastorm")]
    spec = common.TabularSpec(
        rows=args.rows, files=args.files, row_group_rows=args.row_group_rows, features=args.features
    )
    dataset = ensure_dataset(spec)
    files = common.dataset_files(dataset)
    r = recipe(dataset)
    recipe_path = common.RESULTS_DIR / "transforms-recipe.json"
    recipe_path.parent.mkdir(parents=True, exist_ok=True)
    recipe_path.write_text(json.dumps(r))
    print(f"transforms: {dataset['description']}", file=sys.stderr, flush=True)
    quiet = None
    if args.quiet_window > 0:
        print(
            f"waiting for {args.quiet_window:.0f} s of idle CPUs ...", file=sys.stderr, flush=True
        )
        log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
        quiet = measure.wait_quiet(args.quiet_window, 0.05, args.quiet_max_wait, log=log)
        quiet["window"] = args.quiet_window
        print(f"  {quiet}", file=sys.stderr, flush=True)
    results = []
    script = str(Path(__file__).resolve())
    for system in systems:
        if system.startswith("petastorm"):
            import petastorm_env

            petastorm_env.ensure()
            argv = [
                str(common.BENCH_DIR / "petastorm_worker.py"),
                "--system",
                system,
                "--data-path",
                dataset["path"],
                "--recipe",
                str(recipe_path),
                "--epochs",
                str(args.petastorm_epochs),
                "--files",
                str(args.petastorm_files),
                "--features",
                str(args.features),
                "--batch-size",
                str(args.batch_size),
            ]
        else:
            argv = [
                script,
                "--child",
                system,
                "--data-path",
                dataset["path"],
                "--recipe",
                str(recipe_path),
                "--epochs",
                str(args.epochs),
                "--batch-size",
                str(args.batch_size),
                "--workers",
                str(args.workers),
            ]
            if args.threads is not None:
                argv += ["--threads", str(args.threads)]
        for _attempt in range(2):
            measure.warm_files(files)
            measure.wait_quiet(window=3.0, threshold=0.10, max_wait=20.0)
            t0 = time.perf_counter()
            try:
                res = common.run_child(argv, timeout=args.timeout)
            except Exception as e:  # a failed system is reported, the others still run
                print(f"  {system}: FAILED ({e})", file=sys.stderr, flush=True)
                res = None
                break
            share = res.get("background", {}).get("other_cpu_share", 0.0)
            print(
                f"  {system:<24} {res['rows_per_second_median']:>12,.0f} rows/s  "
                f"peak RSS {res['peak_rss_mb']:>6.0f} MB  {time.perf_counter() - t0:5.1f} s  "
                f"other load {share:.0%}",
                file=sys.stderr,
                flush=True,
            )
            if share <= args.busy_threshold:
                break
        if res is not None:
            if system.startswith("petastorm") and args.petastorm_files:
                res["notes"] += f"; first {args.petastorm_files} files only"
            results.append(res)
    recipe_path.unlink(missing_ok=True)
    reference = REFERENCE if any(x["system"] == REFERENCE for x in results) else None
    config = {
        "workload": "transforms",
        "batch_size": args.batch_size,
        "epochs_per_system": args.epochs,
        "petastorm_epochs": args.petastorm_epochs,
        "petastorm_files": args.petastorm_files or "all",
        "page_cache": "warm",
        "shardfeed_threads": args.threads,
        "dataloader_workers": args.workers,
        "recipe": {
            "null_features": NULL_FEATURES,
            "fill": 0.0,
            "standardize": "all features",
            "int_ids": INT_IDS,
            "string_ids": STRING_IDS,
            "noise_std": NOISE_STD,
        },
        "quiet": quiet,
        "shardfeed_build": measure.shardfeed_build(),
        "load_average_end": common.load_average(),
    }
    notes = [
        "Median of epochs 2..; the first epoch is rows_per_second_first.",
        "numpy_*: the engine fills nulls (fill_null=0, so user_id nulls hash as 0, not -1) and "
        "hashes the string column; the callable does the rest, with noise keyed per batch.",
        "petastorm_transformspec: pandas recipe per row group (fillna, standardize, "
        "np.random noise per call, pandas.util.hash_array % n), thread pool of 10, "
        "x = torch.stack(columns) in the consumer.",
    ]
    out, doc = common.write_results(
        "transforms", dataset, config, results, reference, notes=notes, path=args.output
    )
    print(common.format_table(doc))
    print(f"written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
