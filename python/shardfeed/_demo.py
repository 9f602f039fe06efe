"""``shardfeed demo``: train a small MLP from Parquet and show speed, stalls and order.

The demo generates (once) a synthetic tabular dataset -- 256 float32 features
``f000..f255`` and an int64 ``label`` given by a fixed random linear rule, so an MLP
can learn it -- then trains a 256 -> 128 -> classes MLP on it for a few epochs with
``shardfeed.Loader``.  Per epoch it prints rows/s, the share of wall time the training
loop waited for data, the loss and the accuracy; at the end a fingerprint of the sample
order (sha256 of every epoch's ``sample_id`` arrays), identical on every run.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from ._loader import Loader

NUM_FEATURES = 256
NUM_CLASSES = 4
FEATURES = [f"f{i:03d}" for i in range(NUM_FEATURES)]
NUM_FILES = 6
ROWS_PER_FILE = 25_000  # 150,000 rows in all
ROWS_PER_GROUP = 5_000  # 5 row groups per file, 30 in all
DATA_SEED = 20240601
HIDDEN = 128
LEARNING_RATE = 2e-3
MODEL_SEED = 0
LOADER_SEED = 0

_MARKER = "_shardfeed_demo.json"
_SPEC: dict[str, Any] = {
    "generator": "shardfeed.demo/1",
    "features": NUM_FEATURES,
    "classes": NUM_CLASSES,
    "files": NUM_FILES,
    "rows_per_file": ROWS_PER_FILE,
    "rows_per_group": ROWS_PER_GROUP,
    "seed": DATA_SEED,
}


def default_data_dir() -> Path:
    """``$XDG_CACHE_HOME/shardfeed/demo``, else ``~/.cache/shardfeed/demo``."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "shardfeed" / "demo"


def _file_name(index: int) -> str:
    return f"part-{index:05d}.parquet"


def _is_complete(path: Path) -> bool:
    """True if ``path`` holds this version of the demo dataset (marker + every file)."""
    try:
        meta = json.loads((path / _MARKER).read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(meta, dict) or meta.get("spec") != _SPEC:
        return False
    sizes = meta.get("sizes", {})
    for i in range(NUM_FILES):
        name = _file_name(i)
        file = path / name
        if not file.is_file() or file.stat().st_size != sizes.get(name):
            return False
    return True


def _write_dataset(target: Path) -> None:
    """Writes the dataset's files and marker into the empty folder ``target``.

    One row group is in memory at a time.  The label is ``argmax(x @ W + b)`` for a
    fixed random ``W`` and ``b``, so it is a learnable function of the features.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    rule = np.random.default_rng([DATA_SEED, 0])
    weights = rule.standard_normal((NUM_FEATURES, NUM_CLASSES)).astype(np.float32)
    bias = (0.5 * rule.standard_normal(NUM_CLASSES)).astype(np.float32)
    schema = pa.schema([*(pa.field(n, pa.float32()) for n in FEATURES), ("label", pa.int64())])
    sizes: dict[str, int] = {}
    for f in range(NUM_FILES):
        name = _file_name(f)
        with pq.ParquetWriter(target / name, schema, use_dictionary=["label"]) as writer:
            for g in range(ROWS_PER_FILE // ROWS_PER_GROUP):
                rng = np.random.default_rng([DATA_SEED, 1, f, g])
                x = rng.standard_normal((ROWS_PER_GROUP, NUM_FEATURES), dtype=np.float32)
                label = np.argmax(x @ weights + bias, axis=1).astype(np.int64)
                columns = [pa.array(np.ascontiguousarray(x[:, j])) for j in range(NUM_FEATURES)]
                columns.append(pa.array(label))
                table = pa.Table.from_arrays(columns, schema=schema)
                writer.write_table(table, row_group_size=ROWS_PER_GROUP)
        sizes[name] = (target / name).stat().st_size
    (target / _MARKER).write_text(json.dumps({"spec": _SPEC, "sizes": sizes}, indent=2) + "\n")


def ensure_dataset(data_dir: str | os.PathLike[str] | None = None) -> tuple[Path, bool]:
    """Returns ``(path, generated)``: the demo dataset, generated unless already there.

    The files are written to a temporary folder next to ``data_dir`` and renamed into
    place, so an interrupted run leaves no half dataset.  A ``data_dir`` that exists and
    holds something other than (an older version of) the demo dataset is never touched.
    """
    path = Path(data_dir).expanduser() if data_dir is not None else default_data_dir()
    if _is_complete(path):
        return path, False
    if path.exists():
        ours = (path / _MARKER).exists() and all(
            p.name == _MARKER or p.suffix == ".parquet" for p in path.iterdir()
        )
        if path.is_dir() and not any(path.iterdir()):
            path.rmdir()
        elif ours:
            shutil.rmtree(path)  # an older or damaged copy of the demo dataset
        else:
            raise FileExistsError(
                f"{path} exists and does not hold the shardfeed demo dataset; pass another data_dir"
            )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}-", dir=path.parent))
    try:
        _write_dataset(tmp)
        try:
            tmp.rename(path)
        except OSError:
            if not _is_complete(path):  # not a concurrent demo that got there first
                raise
            return path, False
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return path, True


def run(
    data_dir: str | None = None,
    epochs: int = 2,
    batch_size: int = 1024,
    num_threads: int | None = None,
) -> dict[str, object]:
    """Trains a small MLP from Parquet with ``shardfeed.Loader``; prints and returns figures.

    Args:
        data_dir: where the demo dataset lives (generated there on first use); default
            ``~/.cache/shardfeed/demo`` (``$XDG_CACHE_HOME`` is honoured).
        epochs: passes over the data.
        batch_size: rows per batch.
        num_threads: the loader's worker threads (default: the CPU count, at most 16);
            the sample order does not depend on it.

    Returns:
        ``{"epochs": [{"epoch", "rows", "seconds", "rows_per_second",
        "data_wait_fraction", "loss", "accuracy"}, ...], "order_fingerprint": str,
        "data_dir": str, "generated": bool}``.  ``data_wait_fraction`` is the time spent
        in ``next(iterator)`` over the epoch's wall time; ``loss`` and ``accuracy`` are
        averages over the epoch's training batches; ``order_fingerprint`` is the first 16
        hex digits of the sha256 of every epoch's int64 ``sample_id`` arrays.
    """
    import torch
    from torch import nn

    if epochs < 1:
        raise ValueError(f"epochs must be >= 1, got {epochs}")
    t_gen = time.perf_counter()
    path, generated = ensure_dataset(data_dir)
    if generated:
        print(f"generated the demo dataset in {path} ({time.perf_counter() - t_gen:.1f} s)")
    loader = Loader(
        str(path),
        columns=["label"],
        batch_size=batch_size,
        seed=LOADER_SEED,
        num_threads=num_threads,
        stack={"x": FEATURES},
        with_sample_id=True,
    )
    print(
        f"dataset: {loader.num_rows:,} rows x {NUM_FEATURES} float32 features, "
        f"{NUM_FILES} files; batch_size={batch_size}, {len(loader)} batches per epoch"
    )

    torch.manual_seed(MODEL_SEED)
    model = nn.Sequential(
        nn.Linear(NUM_FEATURES, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, NUM_CLASSES)
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    loss_fn = nn.CrossEntropyLoss()
    order = hashlib.sha256()
    figures: list[dict[str, object]] = []

    for epoch in range(epochs):
        loader.set_epoch(epoch)
        rows = correct = 0
        loss_sum = wait = 0.0
        start = time.perf_counter()
        batches = iter(loader)
        while True:
            t0 = time.perf_counter()
            batch = next(batches, None)
            wait += time.perf_counter() - t0
            if batch is None:
                break
            x, y, ids = batch["x"], batch["label"], batch["sample_id"]
            order.update(ids.numpy().astype("<i8", copy=False).tobytes())
            logits = model(x)
            loss = loss_fn(logits, y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            n = int(y.shape[0])
            rows += n
            loss_sum += float(loss.item()) * n
            correct += int((logits.argmax(dim=1) == y).sum().item())
        seconds = time.perf_counter() - start
        figure: dict[str, object] = {
            "epoch": epoch,
            "rows": rows,
            "seconds": seconds,
            "rows_per_second": rows / seconds if seconds > 0 else 0.0,
            "data_wait_fraction": wait / seconds if seconds > 0 else 0.0,
            "loss": loss_sum / rows if rows else float("nan"),
            "accuracy": correct / rows if rows else float("nan"),
        }
        figures.append(figure)
        print(
            f"epoch {epoch}: {figure['rows_per_second']:>10,.0f} rows/s   "
            f"waiting for data {100 * wait / seconds:5.1f}% of {seconds:.2f} s   "
            f"loss {figure['loss']:.4f}   accuracy {100 * correct / max(rows, 1):.2f}%"
        )

    fingerprint = order.hexdigest()[:16]
    print(f"sample order fingerprint: {fingerprint} (the same on every run)")
    return {
        "epochs": figures,
        "order_fingerprint": fingerprint,
        "data_dir": str(path),
        "generated": generated,
    }
