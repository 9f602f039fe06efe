"""Shared fixtures: small Parquet datasets written by the tests themselves."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

# Files of different sizes and row-group sizes, one in a subfolder: 1745 rows.
LAYOUT = [("a.parquet", 600, 128), ("b.parquet", 345, 100), ("sub/c.parquet", 800, 256)]


def make_table(first_id: int, rows: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = np.arange(first_id, first_id + rows, dtype=np.int64)
    feats = {f"f{i}": (ids * (i + 1) % 97).astype(np.float32) / 97 for i in range(8)}
    lengths = (ids % 5).astype(np.int32)
    seq = pa.array(
        [list(range(int(i), int(i) + int(n))) for i, n in zip(ids, lengths, strict=True)],
        type=pa.list_(pa.int32()),
    )
    vec = pa.FixedSizeListArray.from_arrays(
        pa.array((np.repeat(ids, 4) + np.tile(np.arange(4), rows)).astype(np.float32)), 4
    )
    return pa.table(
        {
            "id": ids,
            "x": ids.astype(np.float64) * 0.5,
            **feats,
            "label": (ids % 3).astype(np.int64),
            "flag": ids % 2 == 0,
            "vec": vec,
            "seq": seq,
            "noise": rng.standard_normal(rows).astype(np.float32),
        }
    )


def write_dataset(root: Path, layout: list[tuple[str, int, int]] = LAYOUT) -> Path:
    first = 0
    for name, rows, rg in layout:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(make_table(first, rows, seed=first), path, row_group_size=rg)
        first += rows
    return root


@pytest.fixture(scope="session")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dataset(tmp_path_factory.mktemp("ds"))


@pytest.fixture(scope="session")
def table(dataset: Path) -> pa.Table:
    """The whole dataset in natural order (files sorted by relative path)."""
    return pa.concat_tables(pq.read_table(dataset / name) for name, _, _ in LAYOUT)


def to_numpy(value: Any) -> np.ndarray:
    return value.numpy() if hasattr(value, "numpy") else np.asarray(value)


def digest(batches: Iterable[dict[str, Any]]) -> str:
    """sha256 of a whole batch stream: names, dtypes, shapes and bytes, in order."""
    h = hashlib.sha256()
    for batch in batches:
        for name in sorted(batch):
            a = np.ascontiguousarray(to_numpy(batch[name]))
            h.update(f"{name}:{a.dtype}:{a.shape};".encode())
            h.update(a.tobytes())
        h.update(b"|")
    return h.hexdigest()


def sample_ids(batches: Iterable[dict[str, Any]]) -> np.ndarray:
    parts = [to_numpy(b["sample_id"]) for b in batches]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def engine_threads() -> int:
    """Engine worker and prefetcher threads still running (not Arrow's lazily grown pools)."""
    from shardfeed import _core

    return int(_core.live_engine_threads())


@pytest.fixture(autouse=True)
def _no_early_start_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whether a Loader starts its next pass early depends on how idle the CPUs are
    (see shardfeed._early); an engine started so would add to the counters that
    tests compare (tier hits, downloads, live threads).  In this process it starts
    only where a test asks with ``_settings.extra["start_early"] = True`` (which
    also skips the CPU check); children the tests start keep the default."""
    from shardfeed import _early

    may = _early.may_start_early

    def only_if_asked(settings: Any) -> bool:
        return bool(settings.extra.get("start_early")) and may(settings)

    monkeypatch.setattr(_early, "may_start_early", only_if_asked)


def log_engine_starts(path: Path, label: Any) -> Any:
    """A DataLoader worker_init_fn (or, called with 0, a patch of this process): each
    engine a TorchDataset starts in that process appends ``label()`` to `path` (the
    pid, the name of the thread that made it, ...)."""

    def init(worker_id: int) -> None:
        from shardfeed import _torch

        real = _torch.start_engine

        def logged(*args: Any, **kwargs: Any) -> Any:
            with open(path, "a") as f:
                f.write(f"{label()}\n")
            return real(*args, **kwargs)

        _torch.start_engine = logged  # type: ignore[assignment]

    return init
