"""The training loop of ``bench_train.py``, shared by the project's and Petastorm's environments.

Imports the standard library, numpy and torch (both environments have them), and the
constants of ``bench_transforms`` (standard library only at import time):

* ``DLRM``: embeddings of the hashed categorical columns (``user_id`` -> 100,000 buckets,
  ``item_id`` -> 10,000, ``category`` -> 1,000 + 1 for nulls; dimension 16), a bottom
  MLP over the dense features (256 -> 128 -> 16), the 4 vectors concatenated, a top MLP
  (64 -> 64 -> 1) giving one logit; ``BCEWithLogitsLoss`` on ``label % 2`` (the label is
  uniform in [0, 10)); Adam, lr 1e-3; weights from ``torch.manual_seed(seed)``;
* the preprocessing in NumPy, equal to shardfeed's ``HashBucket``: integer ids
  ``splitmix64(id) % n`` (nulls -1 first), strings ``fnv1a64(utf-8 bytes) % n`` (nulls in
  bucket ``n``); dense nulls become 0;
* ``train``: a fixed number of steps over the batches of ``make_iter(epoch)`` (a fresh
  iterator per epoch when one runs out), timing for each step the wait for the batch
  (``next()``, the iterator's creation and any conversion a system does inside it) and
  the step itself;
* ``result``: the outcome as one entry of ``_common``'s result format.

Every step uses a full batch: a shorter one (the end of a file for the DIY path, the end
of an epoch for Petastorm) is skipped, and the time spent getting it counts as waiting.
An epoch that ends without a full batch (Petastorm 0.13.1's thread pool, under CPU
contention, now and then ends one before its first row) is passed over the same way and
counted (``epochs_without_full_batch``, ``rows_per_finished_epoch``).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import _common as common
import numpy as np
import torch
from bench_transforms import INT_IDS, NULL_FEATURES, STRING_IDS, _splitmix64
from torch import nn

EMBED_DIM = 16
BOTTOM_HIDDEN = 128
TOP_HIDDEN = 64
LEARNING_RATE = 1e-3
# Embedding rows per categorical column (a string column's nulls have their own bucket).
TABLES = {**INT_IDS, **{col: n + 1 for col, n in STRING_IDS.items()}}
ID_COLUMNS = tuple(TABLES)
FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3

MakeIter = Callable[[int], Iterable[dict[str, Any]]]


# --------------------------------------------------------------------------------------
# Preprocessing in NumPy (the DIY path and Petastorm's TransformSpec)
# --------------------------------------------------------------------------------------


def hash_ints(values: np.ndarray, buckets: int) -> np.ndarray:
    """``splitmix64(id) % buckets`` as int64 (shardfeed's HashBucket of an integer column)."""
    return np.asarray(_splitmix64(values) % np.uint64(buckets), dtype=np.int64)


def fnv1a64(values: np.ndarray) -> np.ndarray:
    """FNV-1a 64 of each element of a bytes array (numpy ``S`` dtype), vectorized by byte."""
    n, width = len(values), values.dtype.itemsize
    data = np.ascontiguousarray(values).view(np.uint8).reshape(n, width)
    lengths = np.char.str_len(values)
    h = np.full(n, FNV_OFFSET, dtype=np.uint64)
    prime = np.uint64(FNV_PRIME)
    with np.errstate(over="ignore"):
        for j in range(width):
            h = np.where(lengths > j, (h ^ data[:, j]) * prime, h)
    return h


def hash_strings(values: np.ndarray, null: np.ndarray, buckets: int) -> np.ndarray:
    """``fnv1a64(utf-8) % buckets`` as int64, nulls in bucket ``buckets`` (shardfeed's
    ``HashBucket`` then ``FillNull(buckets)``).  ``values``: an object array of str."""
    text = np.where(null, "", values).astype(str)
    out = np.asarray(fnv1a64(np.char.encode(text, "utf-8")) % np.uint64(buckets), np.int64)
    out[null] = buckets
    return out


def pandas_recipe(features: Sequence[str]) -> Callable[[Any], Any]:
    """The preprocessing on a pandas DataFrame (a Petastorm ``TransformSpec`` function)."""
    null_features = list(features[:NULL_FEATURES])

    def transform(df: Any) -> Any:
        df[null_features] = df[null_features].fillna(0.0)
        for col, n in INT_IDS.items():
            df[col] = hash_ints(df[col].fillna(-1).to_numpy(dtype=np.int64), n)
        for col, n in STRING_IDS.items():
            s = df[col]
            df[col] = hash_strings(s.to_numpy(dtype=object), s.isna().to_numpy(), n)
        return df

    return transform


# --------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------


class DLRM(nn.Module):
    """Embeddings of the id columns + a bottom MLP over the dense features -> a top MLP."""

    def __init__(self, features: int, tables: dict[str, int], dim: int = EMBED_DIM) -> None:
        super().__init__()
        self.embeddings = nn.ModuleList(nn.Embedding(n, dim) for n in tables.values())
        self.bottom = nn.Sequential(
            nn.Linear(features, BOTTOM_HIDDEN), nn.ReLU(), nn.Linear(BOTTOM_HIDDEN, dim), nn.ReLU()
        )
        self.top = nn.Sequential(
            nn.Linear(dim * (1 + len(tables)), TOP_HIDDEN), nn.ReLU(), nn.Linear(TOP_HIDDEN, 1)
        )

    def forward(self, x: torch.Tensor, ids: Sequence[torch.Tensor]) -> torch.Tensor:
        parts = [self.bottom(x), *(emb(i) for emb, i in zip(self.embeddings, ids, strict=True))]
        logits: torch.Tensor = self.top(torch.cat(parts, 1))
        return logits.squeeze(1)


def describe_model(features: int) -> dict[str, Any]:
    """The model and optimizer as plain data (for the result JSON)."""
    return {
        "embeddings": {col: [n, EMBED_DIM] for col, n in TABLES.items()},
        "bottom_mlp": [features, BOTTOM_HIDDEN, EMBED_DIM],
        "top_mlp": [EMBED_DIM * (1 + len(TABLES)), TOP_HIDDEN, 1],
        "parameters": sum(p.numel() for p in DLRM(features, TABLES).parameters()),
        "loss": "BCEWithLogitsLoss on label % 2",
        "optimizer": f"Adam(lr={LEARNING_RATE})",
    }


def configure_torch(threads: int) -> None:
    """The training step's intra-op threads (the same for every system)."""
    torch.set_num_threads(threads)


# --------------------------------------------------------------------------------------
# The loop
# --------------------------------------------------------------------------------------


class Feed:
    """Full batches from ``make_iter(0)``, then ``make_iter(1)``, ... (epochs).

    An epoch without a full batch is passed over (Petastorm 0.13.1's thread pool now and
    then ends an epoch early, even before its first row); ``MAX_BARREN`` of them in a row
    is an error (a dataset smaller than a batch).
    """

    MAX_BARREN = 3

    def __init__(self, make_iter: MakeIter, batch_size: int) -> None:
        self.make_iter = make_iter
        self.batch_size = batch_size
        self.epochs = 0  # epochs started
        self.short = 0  # short batches skipped
        self.epoch_rows: list[int] = []  # rows delivered by each finished epoch
        self.barren_epochs = 0  # finished epochs without a full batch
        self._it: Iterator[dict[str, Any]] | None = None
        self._full = 0  # full batches of the current epoch
        self._rows = 0  # rows of the current epoch
        self._barren = 0  # finished epochs in a row without a full batch

    def _end_epoch(self) -> None:
        self._it = None
        self.epoch_rows.append(self._rows)
        self._barren = 0 if self._full else self._barren + 1
        self.barren_epochs += 0 if self._full else 1
        if self._barren >= self.MAX_BARREN:
            raise RuntimeError(
                f"{self._barren} epochs in a row gave no full batch of {self.batch_size} "
                f"(rows per epoch: {self.epoch_rows})"
            )

    def next(self) -> dict[str, Any]:
        while True:
            if self._it is None:
                self._it = iter(self.make_iter(self.epochs))
                self.epochs += 1
                self._full = self._rows = 0
            batch = next(self._it, None)
            if batch is None:
                self._end_epoch()
                continue
            rows = len(batch["label"])
            self._rows += rows
            if rows != self.batch_size:
                self.short += 1
                continue
            self._full += 1
            return batch

    def close(self) -> None:
        """Stops the current iterator (a DataLoader's workers exit and are reaped)."""
        it, self._it = self._it, None
        close = getattr(it, "close", None)
        if close is not None:
            close()
        del it


@dataclass
class Outcome:
    """What ``train`` measured."""

    steps: int
    warmup: int
    batch_size: int
    waits: list[float] = field(default_factory=list)  # per step, seconds
    computes: list[float] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    wall_all: float = 0.0  # from the first iterator's creation to the last step's end
    wall_timed: float = 0.0  # the steps after the warm-up
    cpu_timed: float = 0.0  # CPU seconds of the process and its children during them
    epochs: int = 0
    short_batches: int = 0
    epoch_rows: list[int] = field(default_factory=list)  # of the epochs that finished
    barren_epochs: int = 0


def _step(model: DLRM, opt: torch.optim.Optimizer, batch: dict[str, Any]) -> float:
    y = (batch["label"] % 2).to(torch.float32)
    logits = model(batch["x"], [batch[c] for c in ID_COLUMNS])
    loss = nn.functional.binary_cross_entropy_with_logits(logits, y)
    opt.zero_grad(set_to_none=True)
    loss.backward()  # type: ignore[no-untyped-call]
    opt.step()
    return float(loss.detach())


def train(
    make_iter: MakeIter, *, steps: int, warmup: int, batch_size: int, features: int, seed: int = 0
) -> Outcome:
    """``warmup + steps`` training steps; the last ``steps`` are the timed ones."""
    torch.manual_seed(seed)
    model = DLRM(features, TABLES)
    opt = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    feed = Feed(make_iter, batch_size)
    out = Outcome(steps=steps, warmup=warmup, batch_size=batch_size)
    clock = time.perf_counter
    start = timed = clock()
    cpu0 = common.tree_cpu_seconds()
    try:
        for i in range(warmup + steps):
            if i == warmup:
                timed, cpu0 = clock(), common.tree_cpu_seconds()
            t0 = clock()
            batch = feed.next()
            t1 = clock()
            out.losses.append(_step(model, opt, batch))
            out.waits.append(t1 - t0)
            out.computes.append(clock() - t1)
        end = clock()
        out.cpu_timed = common.tree_cpu_seconds() - cpu0
    finally:
        feed.close()
    out.wall_all, out.wall_timed = end - start, end - timed
    out.epochs, out.short_batches, out.epoch_rows = feed.epochs, feed.short, feed.epoch_rows
    out.barren_epochs = feed.barren_epochs
    return out


# --------------------------------------------------------------------------------------
# CPU time and the result
# --------------------------------------------------------------------------------------


def _ms(values: Sequence[float], q: float = 0.5) -> float:
    ordered = sorted(values)
    return round(1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


def summary(o: Outcome) -> dict[str, Any]:
    """The measures of one system (``extra`` of its result)."""
    waits, computes = o.waits[o.warmup :], o.computes[o.warmup :]
    steps_wall = [w + c for w, c in zip(waits, computes, strict=True)]
    tail = o.losses[-10:]
    return {
        "steps": o.steps,
        "warmup_steps": o.warmup,
        "batch_size": o.batch_size,
        "samples_per_second": round(o.steps * o.batch_size / o.wall_timed, 1),
        "data_wait_share": round(sum(waits) / o.wall_timed, 5),
        "data_wait_share_with_warmup": round(sum(o.waits) / o.wall_all, 5),
        "first_batch_seconds": round(o.waits[0], 4),
        "step_ms_median": _ms(steps_wall),
        "step_ms_p90": _ms(steps_wall, 0.9),
        "wait_ms_median": _ms(waits),
        "wait_ms_mean": round(1000 * statistics.fmean(waits), 3),
        "compute_ms_median": _ms(computes),
        "timed_seconds": round(o.wall_timed, 4),
        "total_seconds": round(o.wall_all, 4),
        "cpu_seconds": round(o.cpu_timed, 3),
        "cpu_cores_busy": round(o.cpu_timed / o.wall_timed, 3),
        "loss_first": round(o.losses[0], 5),
        "loss_last10_mean": round(statistics.fmean(tail), 5),
        "epochs_started": o.epochs,
        "short_batches_skipped": o.short_batches,
        "rows_per_finished_epoch": o.epoch_rows,
        "epochs_without_full_batch": o.barren_epochs,
        "torch_threads": torch.get_num_threads(),
    }


def result(system: str, o: Outcome, baseline_rss_mb: float, notes: str) -> dict[str, Any]:
    """One entry of ``_common``'s ``results``: rows are training samples of the timed steps;
    ``rows_per_second_first`` is over every step, warm-up and start-up included."""
    run = common.Run(rows=o.steps * o.batch_size, seconds=o.wall_timed, checksum=sum(o.losses))
    out = common.summarize(system, [run], baseline_rss_mb, notes, extra=summary(o))
    out["rows_per_second_first"] = (o.warmup + o.steps) * o.batch_size / o.wall_all
    return out
