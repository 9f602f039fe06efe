"""Petastorm systems for the benchmark suite, run in Petastorm's own environment.

The suite runs this file with the project's interpreter through ``_common.run_child``;
it re-executes itself with ``bench/.venv/petastorm/bin/python`` (the same process, so
peak RSS and CPU time are still the child's own), builds nothing, and emits one result
line in ``_common``'s format.

Systems (Petastorm 0.13.1 as the published work used it):

* ``petastorm_baseline``: ``make_batch_reader(url, schema_fields=...)`` with its defaults
  (thread pool of 10 workers, ``results_queue_size=50``, row groups shuffled, no seed) +
  ``petastorm.pytorch.BatchedDataLoader(reader, batch_size=B)``;
* ``petastorm_optimized``: the same with ``cache_type='local-disk'``,
  ``convert_early_to_numpy=True`` and ``seed=0`` (``cache_extra_settings={"cleanup":
  False}`` keeps the disk cache across the per-epoch readers; 0.13.1 deletes it when a
  reader closes otherwise);
* ``petastorm_transformspec``: the baseline reader with a ``TransformSpec`` running the
  transform benchmark's recipe on each row group's pandas DataFrame (``--recipe``).

One reader per epoch (``with make_batch_reader(...)``), as a training loop that
iterates epochs does; the consumer stacks the feature columns into ``x = [B, F]``
(``torch.stack``), which counts as waiting for the batch: the trainer cannot use the
batch before it.

``--phase train`` (``bench_train.py``): the baseline or optimized reader with a
``TransformSpec`` doing ``bench_train``'s preprocessing on each row group's pandas
DataFrame (dense nulls -> 0, ids hashed as shardfeed's ``HashBucket`` does, in NumPy:
``_train.pandas_recipe``) feeds ``_train.train`` for ``--warmup`` + ``--steps`` steps.

``--phase weff`` (``bench_memory.py``): ``--epochs`` epochs of the baseline or optimized
reader over ``bench_memory``'s sorted dataset, which has an int64 column ``rg`` (the row's
row group); each epoch's W_eff from ``rg`` of every full batch (``bench_memory.weff_pass``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
VENV_PYTHON = BENCH_DIR / ".venv" / "petastorm" / "bin" / "python"


def _reexec_in_venv() -> None:
    """Replaces this process with the Petastorm environment's interpreter (same pid)."""
    if os.environ.get("SHARDFEED_BENCH_IN_PETASTORM_ENV") == "1":
        return
    if not VENV_PYTHON.exists():
        raise SystemExit(f"no Petastorm environment at {VENV_PYTHON}: run bench/petastorm_env.py")
    env = dict(os.environ, SHARDFEED_BENCH_IN_PETASTORM_ENV="1")
    env.pop("PYTHONPATH", None)  # the project's packages (numpy 2, pyarrow 26) stay out
    os.execve(
        str(VENV_PYTHON), [str(VENV_PYTHON), str(Path(__file__).resolve()), *sys.argv[1:]], env
    )


_reexec_in_venv()

sys.path.insert(0, str(BENCH_DIR))
import warnings  # noqa: E402

import _common as common  # noqa: E402
import _measure as measure  # noqa: E402

warnings.filterwarnings("ignore")


def _urls(args: argparse.Namespace) -> tuple[list[str], Any]:
    files = sorted(str(p) for p in Path(args.data_path).glob("*.parquet"))
    if args.files:
        files = files[: args.files]
        return files, [f"file://{f}" for f in files]
    return files, f"file://{Path(args.data_path).resolve()}"


def _reader_kwargs(args: argparse.Namespace, cache_dir: str | None) -> dict[str, Any]:
    kw: dict[str, Any] = {}
    if args.workers_count is not None:
        kw["workers_count"] = args.workers_count
    if args.system == "petastorm_optimized":
        kw.update(
            cache_type="local-disk",
            cache_location=cache_dir,
            cache_size_limit=64 << 30,
            cache_row_size_estimate=args.features * 4 + 8,
            cache_extra_settings={"cleanup": False},
            convert_early_to_numpy=True,
            seed=0,
        )
    return kw


def _recipe_spec(args: argparse.Namespace) -> tuple[Any, list[str], list[str]]:
    """The transform benchmark's recipe as a Petastorm TransformSpec on pandas frames."""
    import numpy as np
    import pandas as pd
    from petastorm import TransformSpec

    recipe = json.loads(Path(args.recipe).read_text())
    feats: list[str] = recipe["features"]
    mean = np.asarray(recipe["mean"], dtype=np.float32)
    std = np.asarray(recipe["std"], dtype=np.float32)
    null_feats: list[str] = recipe["null_features"]
    noise = float(recipe["noise_std"])
    ids: dict[str, int] = recipe["int_ids"]
    strings: dict[str, int] = recipe["string_ids"]

    def transform(df: pd.DataFrame) -> pd.DataFrame:
        df[null_feats] = df[null_feats].fillna(0.0)
        x = (df[feats].to_numpy(dtype=np.float32) - mean) / std
        x += np.random.default_rng().standard_normal(x.shape, dtype=np.float32) * noise
        df[feats] = x
        for col, buckets in ids.items():
            v = df[col].fillna(-1).to_numpy(dtype=np.int64)
            df[col] = (pd.util.hash_array(v) % np.uint64(buckets)).astype(np.int64)
        for col, buckets in strings.items():
            s = df[col]
            h = pd.util.hash_array(s.fillna("").to_numpy(dtype=object)) % np.uint64(buckets)
            h = h.astype(np.int64)
            h[s.isna().to_numpy()] = buckets  # nulls: their own bucket
            df[col] = h
        return df

    edit = [(c, np.int64, (), False) for c in [*ids, *strings]]
    spec = TransformSpec(transform, edit_fields=edit)
    return spec, feats, [*ids, *strings]


def _batches(
    args: argparse.Namespace,
    url: Any,
    cache_dir: str | None,
    transform_spec: Any,
    feats: list[str],
    extra_cols: list[str],
) -> Any:
    import torch
    from petastorm import make_batch_reader
    from petastorm.pytorch import BatchedDataLoader

    kw = _reader_kwargs(args, cache_dir)
    if transform_spec is not None:
        kw["transform_spec"] = transform_spec
    fields = [*feats, "label", *extra_cols]
    with make_batch_reader(url, schema_fields=[f"^{f}$" for f in fields], **kw) as reader:
        for b in BatchedDataLoader(reader, batch_size=args.batch_size):
            out = {"x": torch.stack([b[f] for f in feats], 1), "label": b["label"]}
            for c in extra_cols:
                out[c] = b[c]
            yield out


def _notes(args: argparse.Namespace, files: list[str], with_spec: bool) -> str:
    """The reader and loader as used, in words."""
    import petastorm
    import pyarrow

    kw = _reader_kwargs(args, "<cache dir>")
    return (
        f"petastorm {petastorm.__version__} (pyarrow {pyarrow.__version__}): "
        "make_batch_reader("
        + ", ".join(
            [
                "url" if not args.files else f"{len(files)} file urls",
                *(f"{k}={v!r}" for k, v in kw.items() if k != "cache_location"),
                *(["transform_spec=TransformSpec(recipe on pandas)"] if with_spec else []),
            ]
        )
        + f") + BatchedDataLoader(batch_size={args.batch_size}); one reader per epoch; "
        "x = torch.stack(feature columns) in the consumer; row-group order shuffled, rows "
        "in file order within a row group"
    )


def _train_phase(args: argparse.Namespace, url: Any, cache_dir: str | None) -> Any:
    """bench_train's model trained on this reader's batches; returns the outcome."""
    import _train
    import numpy as np
    from petastorm import TransformSpec

    _train.configure_torch(args.torch_threads)
    feats = [f"f{i:03d}" for i in range(args.features)]
    ids = list(_train.ID_COLUMNS)
    spec = TransformSpec(
        _train.pandas_recipe(feats), edit_fields=[(c, np.int64, (), False) for c in ids]
    )
    return _train.train(
        lambda epoch: _batches(args, url, cache_dir, spec, feats, ids),
        steps=args.steps,
        warmup=args.warmup,
        batch_size=args.batch_size,
        features=args.features,
    )


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--system", required=True)
    phases = ("throughput", "step", "order", "train", "weff")
    p.add_argument("--phase", default="throughput", choices=phases)
    p.add_argument("--mode", default="warm", choices=("warm", "cold"))
    p.add_argument("--data-path", required=True)
    p.add_argument("--files", type=int, default=0, help="only the first N files (0: all)")
    p.add_argument("--features", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=4096)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--workers-count", type=int, default=None)
    p.add_argument("--step-ms", default="", help="step phase: 'ms:batches,...'")
    p.add_argument("--recipe", default=None, help="transform recipe JSON (transformspec)")
    p.add_argument("--name", default=None, help="system name in the result")
    p.add_argument("--steps", type=int, default=200, help="train phase: timed steps")
    p.add_argument("--warmup", type=int, default=10, help="train phase: untimed steps first")
    p.add_argument("--torch-threads", type=int, default=1, help="train phase: of the step")
    args = p.parse_args()

    import numpy
    import petastorm
    import pyarrow
    import pyarrow.parquet
    import torch

    files, url = _urls(args)
    transform_spec = None
    extra_cols: list[str] = []
    feats = [f"f{i:03d}" for i in range(args.features)]
    if args.system == "petastorm_transformspec":
        transform_spec, feats, extra_cols = _recipe_spec(args)
    elif args.system not in ("petastorm_baseline", "petastorm_optimized"):
        raise SystemExit(f"unknown system {args.system!r}")

    # SIGTERM (a timeout, Ctrl-C of the suite) unwinds through `finally`: the cache goes.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    cache_dir = None
    if args.system == "petastorm_optimized":
        cache_dir = tempfile.mkdtemp(prefix=".petastorm-cache-", dir=str(common.DATA_DIR))
    base = common.rss_mb()
    passes: list[measure.Pass] = []
    drops: list[dict[str, Any]] = []
    steps: dict[str, Any] = {}
    trained = None
    weff: list[dict[str, Any]] = []
    try:
        if args.phase == "train":
            trained = _train_phase(args, url, cache_dir)
        elif args.phase == "weff":
            import bench_memory

            for _ in range(args.epochs):
                weff.append(
                    bench_memory.weff_pass(
                        lambda: _batches(args, url, cache_dir, None, feats, ["rg"]),
                        args.batch_size,
                    )
                )
                print(
                    f"    {args.name or args.system} W_eff epoch {len(weff)}: "
                    f"{weff[-1]['w_eff']:.2f} ({weff[-1]['batches']} batches)",
                    file=sys.stderr,
                    flush=True,
                )
        elif args.phase == "step":
            # One pass without a step first (it fills the optimized version's disk cache),
            # then one per step ("ms:batches,...").
            passes.append(
                measure.consume(
                    lambda: _batches(args, url, cache_dir, transform_spec, feats, extra_cols)
                )
            )
            for item in [x for x in args.step_ms.split(",") if x.strip()]:
                ms, n = float(item.split(":")[0]), int(item.split(":")[1])
                q = measure.consume(
                    lambda: _batches(args, url, cache_dir, transform_spec, feats, extra_cols),
                    step_seconds=ms / 1000,
                    max_batches=n,
                )
                q.extra["step_ms"] = ms
                steps[f"{ms:g}"] = q.as_dict()
                print(
                    f"    {args.system} step {ms:g} ms: wait {q.wait_fraction_steady:.1%} "
                    f"(with start-up {q.wait_fraction:.1%}), {q.batches} batches",
                    file=sys.stderr,
                    flush=True,
                )
        else:
            epochs = 1 if args.phase == "order" else args.epochs
            for _ in range(epochs):
                if args.mode == "cold":
                    drops.append(measure.drop_page_cache(files))
                passes.append(
                    measure.consume(
                        lambda: _batches(args, url, cache_dir, transform_spec, feats, extra_cols)
                    )
                )
                print(
                    f"    {args.name or args.system} epoch {len(passes)}: "
                    f"{passes[-1].rows_per_second:,.0f} rows/s",
                    file=sys.stderr,
                    flush=True,
                )
        cache_bytes = None
        if cache_dir is not None:
            cache_bytes = sum(f.stat().st_size for f in Path(cache_dir).rglob("*") if f.is_file())
    finally:
        if cache_dir is not None:
            shutil.rmtree(cache_dir, ignore_errors=True)

    if weff:
        import bench_memory

        result = bench_memory.weff_result(
            args.name or args.system, weff, base, _notes(args, files, False)
        )
        result["extra"].update(petastorm_cache_bytes=cache_bytes, files=len(files))
        common.emit_child_result(result)
        return 0
    if trained is not None:
        import _train

        result = _train.result(args.name or args.system, trained, base, _notes(args, files, True))
        result["extra"].update(petastorm_cache_bytes=cache_bytes, files=len(files))
        common.emit_child_result(result)
        return 0
    first, measured = passes[0], passes[1:] if len(passes) > 1 else passes
    # Petastorm delivers every row (no drop_last): an epoch with fewer (once, a warm
    # epoch of the suite's baseline delivered none in 0.6 s) is a failed read, not a
    # speed.  It is left out of the median and named in the notes.
    expected = sum(pyarrow.parquet.ParquetFile(f).metadata.num_rows for f in files)
    skipped = 1 if len(passes) > 1 else 0  # epochs before the measured ones
    short = [(i + 1 + skipped, q.rows) for i, q in enumerate(measured) if q.rows < expected]
    for epoch, rows in short:
        print(f"    epoch {epoch}: {rows:,} of {expected:,} rows, left out", file=sys.stderr)
    if len(short) < len(measured):
        measured = [q for q in measured if q.rows >= expected]
    runs = [
        common.Run(rows=q.rows, seconds=q.seconds, checksum=q.checksum, extra=q.as_dict())
        for q in measured
    ]
    kw = _reader_kwargs(args, "<cache dir>")
    notes = _notes(args, files, transform_spec is not None)
    if short:
        notes += "; " + ", ".join(
            f"epoch {e} delivered {rows:,} of {expected:,} rows (a failed read, left out)"
            for e, rows in short
        )
    result = common.summarize(args.name or args.system, runs, base, notes)
    result["rows_per_second_first"] = first.rows_per_second
    result["extra"] = {
        "phase": args.phase,
        "mode": args.mode,
        "files": len(files),
        "epochs": [q.as_dict() for q in passes],
        "page_cache_drops": drops,
        "steps": steps,
        "petastorm_cache_bytes": cache_bytes,
        "reader_kwargs": {k: v for k, v in kw.items()},
        "versions": {
            "petastorm": petastorm.__version__,
            "pyarrow": pyarrow.__version__,
            "numpy": numpy.__version__,
            "torch": torch.__version__,
        },
    }
    common.emit_child_result(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
