"""The in-process loader: a C++ engine per pass over an epoch."""

from __future__ import annotations

import atexit
import os
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from . import _core
from ._errors import InvalidArgumentError, StateDictError, UnsupportedTypeError
from ._options import Caches, CacheSettings, Settings, Source, StackArg, open_dataset
from .transforms import Transform

_STATE_VERSION = 1

# Engines still running; closed before interpreter exit so that no engine thread
# outlives pyarrow's finalization of its filesystems (S3 in particular).
_live_engines: weakref.WeakSet[_core.Engine] = weakref.WeakSet()


@atexit.register
def _close_engines() -> None:
    for engine in list(_live_engines):
        engine.close()


def start_engine(
    dataset: _core.Dataset, plan: _core.PlanOptions, options: _core.EngineOptions
) -> _core.Engine:
    engine = _core.Engine(dataset, plan, options)
    _live_engines.add(engine)
    return engine


def convert(batch: dict[str, Any], output: str) -> dict[str, Any]:
    if output == "numpy":
        return batch
    import torch

    out: dict[str, Any] = {}
    for name, value in batch.items():
        if not isinstance(value, np.ndarray):
            out[name] = value
            continue
        if value.dtype.char in "Qq":
            # numpy's "unsigned long long" twin of uint64 (what the binding's
            # arrays carry); torch takes only the canonical one.  A view: no copy.
            value = value.view(value.dtype.str)
        try:
            out[name] = torch.from_numpy(value)
        except TypeError as e:  # e.g. uint64 with a torch older than 2.3
            raise UnsupportedTypeError(
                f"output {name!r} has dtype {value.dtype}, which this torch "
                f"{torch.__version__} cannot hold; cast it in transform= or use output='numpy'"
            ) from e
    return out


def describe_output(
    name: str, dtype: str, shape: Sequence[int], source_type: str, unit: str
) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "dtype": dtype, "shape": list(shape)}
    if source_type:
        out["source_type"] = source_type
    if unit:
        out["unit"] = unit
    return out


class DeliverClock:
    """Time spent in Python per batch: the user's transform and the conversion."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.batches = 0


def iterate(
    engine: _core.Engine, settings: Settings, clock: DeliverClock | None = None
) -> Iterator[dict[str, Any]]:
    """Yields batches (after the Python transform, if any); closes the engine however
    the loop ends."""
    try:
        while True:
            arrays = engine.next()
            if arrays is None:
                return
            t0 = time.perf_counter()
            batch: dict[str, Any] = arrays
            if settings.transform is not None:
                batch = settings.transform(arrays)
            batch = convert(batch, settings.output)
            if clock is not None:
                clock.seconds += time.perf_counter() - t0
                clock.batches += 1
            yield batch
    finally:
        engine.close()


class Loader:
    """Batches from a Parquet dataset in one reproducible order.

    Args:
        source: a directory (every Parquet file below it), a file, or a list of
            files; local paths or URIs Arrow knows (``file://``, ``s3://``, ...).
        columns: columns to hand out one by one; ``None`` means every column
            that is not part of a ``stack``.
        batch_size: rows per batch.
        shuffle: a fresh row-group order per epoch and a permutation of the rows
            of each mixing window of ``shuffle_window`` row groups.
        seed: with the epoch, decides the order (same seed, same stream).
        rank, world_size: this process's slice; default from torch.distributed,
            else the ``RANK``/``WORLD_SIZE`` environment, else 0/1.
        drop_last: ``True``: every rank gets ``N // (world_size * batch_size)``
            full batches.  ``False``: every sample exactly once across ranks;
            ranks get the same batch count, the last batches of a rank smaller.
        num_threads: engine worker threads (default: the CPU count, at most 16).
            The stream does not depend on it.
        stack: ``{"x": ["f0", "f1", ...]}`` packs scalar numeric columns into
            one ``[batch, n]`` array in C++ (one dtype if all agree, else
            float32, or float64 if any column is float64).
        output: ``"torch"`` (``torch.Tensor`` values) or ``"numpy"``.
        shuffle_window: row groups mixed together when shuffling; memory grows
            with it (the decoded row groups of a window stay in memory while its
            batches are assembled).
        prefetch: batches each worker may hold ready (its queue depth).
        with_sample_id: add ``"sample_id"``: each row's int64 index in the
            dataset's natural order.
        fill_null: value for nulls; ``None`` raises InvalidDataError naming the
            file, row group and column of the first null.
        transforms: ``shardfeed.transforms`` objects run in the engine's threads,
            in order, before ``stack`` (random ones keyed per sample).
        transform: a Python callable ``dict[str, ndarray] -> dict`` applied to each
            batch before conversion (with TorchDataset: in the worker processes).
        cache_dir: a node-local folder for cached data (created with mode 0700).
            Remote files are kept there (``files/``), shared by every process
            on the node; local files are read in place.
        cache_limit_bytes: at most this many bytes per cache tier (None: no limit).
        cache_decoded: also keep each row group after decoding, column
            selection and the deterministic transforms (``decoded/``); later
            epochs map it from disk instead of decoding again.  Random
            transforms always run after it.
        prefetch_bytes: how far ahead of use remote files are fetched.
        partitioning: ``"hive"`` (default): ``key=value`` folders below the
            dataset root become columns (int64 when every value is an integer,
            else string; ``__HIVE_DEFAULT_PARTITION__`` is null), placed after
            the files' columns; a file column of the same name wins.  ``None``:
            folder names are only paths.

    Below a folder, paths with a component starting with ``_`` or ``.`` are
    skipped (Spark's ``_temporary``, ``_SUCCESS``, ``.crc`` files), and files
    without the ``.parquet`` extension are read when they are Parquet.  Files
    may differ in their schemas: columns are matched by name, compatible types
    promoted (integer widths, integers with floats to float64, string with
    large_string, ...), a column missing from a file reads as null there, and
    types that cannot be promoted raise ``SchemaMismatchError`` only for a
    column in use.  Dates are int32 days since the Unix epoch, timestamps int64
    in their unit since the epoch (UTC), times and durations their integers,
    decimals float64, dictionary columns their values (``describe_outputs()``).

    Iterating yields ``dict[str, Tensor | ndarray]``.  Variable-length list
    columns give ``name`` (zero-padded ``[batch, max_len]``) and
    ``name_lengths``; fixed-size lists give ``[batch, size]``.
    """

    def __init__(
        self,
        source: Source,
        columns: Sequence[str] | None = None,
        batch_size: int = 1024,
        shuffle: bool = True,
        seed: int = 0,
        rank: int | None = None,
        world_size: int | None = None,
        drop_last: bool = True,
        num_threads: int | None = None,
        stack: StackArg | None = None,
        output: str = "torch",
        *,
        shuffle_window: int = 4,
        prefetch: int = 8,
        with_sample_id: bool = False,
        fill_null: float | None = None,
        transforms: Sequence[Transform] | None = None,
        transform: Callable[[dict[str, np.ndarray]], dict[str, Any]] | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        cache_limit_bytes: int | None = None,
        cache_decoded: bool = False,
        prefetch_bytes: int | None = None,
        partitioning: str | None = "hive",
    ) -> None:
        self._settings = Settings.make(
            source, columns, batch_size, shuffle, seed, rank, world_size, drop_last,
            num_threads, stack, output, shuffle_window, prefetch, with_sample_id, fill_null,
            transforms, transform,
            CacheSettings.make(cache_dir, cache_limit_bytes, cache_decoded, prefetch_bytes),
            partitioning,
        )  # fmt: skip
        self._dataset = open_dataset(self._settings.sources, self._settings.partitioning)
        self._caches = Caches.open(self._settings.cache, self._dataset)
        # Column, type and stack errors surface here, before any data is read.
        self._outputs = self._dataset.describe_outputs(self._settings.output_options())
        self._epoch = 0
        self._consumed = 0  # batches handed out in this epoch
        self._resume_at = 0  # where the next pass starts
        self._len = self._dataset.num_batches(self._settings.plan_options(0))
        self._last_engine: _core.Engine | None = None
        self._deliver = DeliverClock()

    # -- the stream ------------------------------------------------------------------
    def __len__(self) -> int:
        """Batches this rank yields per epoch."""
        return int(self._len)

    def set_epoch(self, epoch: int) -> None:
        """Selects the epoch of the next pass (its order); resets the position."""
        if epoch < 0:
            raise InvalidArgumentError(f"epoch must be >= 0, got {epoch}")
        self._epoch = int(epoch)
        self._consumed = 0
        self._resume_at = 0

    @property
    def epoch(self) -> int:
        return self._epoch

    def __iter__(self) -> Iterator[dict[str, Any]]:
        start = self._resume_at
        self._resume_at = 0
        self._consumed = start
        engine = start_engine(
            self._dataset,
            self._settings.plan_options(self._epoch),
            self._settings.engine_options(start_batch=start, caches=self._caches),
        )
        self._last_engine = engine
        self._deliver = DeliverClock()
        for batch in iterate(engine, self._settings, self._deliver):
            self._consumed += 1
            yield batch

    # -- resume ----------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """A small JSON-serializable dict: where this epoch stands, and what it is valid for."""
        return {
            "version": _STATE_VERSION,
            "epoch": self._epoch,
            "seed": self._settings.seed,
            "batches_consumed": self._consumed,
            "fingerprint": self._dataset.fingerprint,
            "settings": self._settings.stream_settings(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """The next pass yields the rest of the saved epoch, exactly."""
        self._resume_at = check_state(state, self._settings, self._dataset, len(self))
        self._epoch = int(state["epoch"])
        self._consumed = self._resume_at

    # -- introspection ---------------------------------------------------------------
    @property
    def num_rows(self) -> int:
        """Rows in the dataset (all ranks, before batching)."""
        return int(self._dataset.num_rows)

    @property
    def fingerprint(self) -> str:
        """Digest of the files' relative paths, row-group sizes and schema."""
        return str(self._dataset.fingerprint)

    @property
    def outputs(self) -> list[tuple[str, str, list[int]]]:
        """(name, dtype, shape after the batch dimension; -1 varies) of each output."""
        return [(n, d, list(s)) for n, d, s, _, _ in self._outputs]

    def describe_outputs(self) -> list[dict[str, Any]]:
        """Each output as ``{"name", "dtype", "shape"}``, plus ``"source_type"``
        (the dataset column's Arrow type, after promotion across files) for
        one-column outputs and ``"unit"`` for times: ``"days"`` since the Unix
        epoch for dates; ``"s"``, ``"ms"``, ``"us"`` or ``"ns"`` since the
        epoch in UTC for timestamps, since midnight for times, for durations.
        E.g. ``{"name": "ts", "dtype": "int64", "shape": [], "unit": "us",
        "source_type": "timestamp[us, tz=UTC]"}``."""
        return [describe_output(*info) for info in self._outputs]

    def stats(self) -> dict[str, Any]:
        """Counters of the latest pass.

        ``stages`` maps fetch, read, decode, transform, assemble (busy time of the
        engine's workers, summed over threads) and deliver (the consumer's Python
        time: ``transform=`` and conversion) to ``{"seconds", "bytes", "rows"}``;
        ``worker_wait_seconds`` is time workers sat on a full queue (the consumer
        is the bottleneck), ``consumer_wait_seconds`` time the consumer waited on
        an empty one (the loader is).  Also ``elapsed_seconds``, ``threads``,
        ``row_groups_decoded``, ``rows_delivered`` and ``peak_live_row_groups``.
        Caches: ``remote_bytes``, ``cache_hits``, ``cache_misses``, ``cache_bytes``,
        ``prefetch_wait_seconds`` (file cache, this process, all passes; without a
        file cache ``remote_bytes`` is what the latest pass fetched) and
        ``decoded_hits``/``decoded_misses``/``decoded_bytes`` with ``cache_decoded``.
        """
        stats: dict[str, Any] = {"epoch": self._epoch, "batches_consumed": self._consumed}
        if self._last_engine is not None:
            stats.update(self._last_engine.stats())
            stats["stages"]["deliver"] = {
                "seconds": self._deliver.seconds,
                "bytes": 0,
                "rows": int(stats["rows_delivered"]),
            }
        stats.update(self._caches.stats())
        if self._caches.files is None and "stages" in stats:
            # Without the file cache, what the workers fetched is what came over the wire.
            stats["remote_bytes"] = int(stats["stages"]["fetch"]["bytes"])
        return stats

    def trace_events(self) -> list[tuple[int, str, float, float, int]]:
        """(worker, stage, start_us, duration_us, arg) of the latest pass, when it was
        made with tracing on (see ``shardfeed profile --trace``); worker -1 is the consumer."""
        return [] if self._last_engine is None else list(self._last_engine.trace())


def check_state(
    state: Mapping[str, Any], settings: Settings, dataset: _core.Dataset, length: int
) -> int:
    """Validates a state dict against this loader; returns the batch to resume at."""
    try:
        version = state["version"]
        fingerprint = state["fingerprint"]
        saved = state["settings"]
        consumed = int(state["batches_consumed"])
        int(state["epoch"])
        seed = int(state["seed"])
    except (KeyError, TypeError, ValueError) as e:
        raise StateDictError(f"not a shardfeed state dict: {e!r}") from e
    if version != _STATE_VERSION:
        raise StateDictError(f"state dict version {version} is not {_STATE_VERSION}")
    if fingerprint != dataset.fingerprint:
        raise StateDictError(
            "state dict is from another dataset (fingerprint "
            f"{fingerprint} != {dataset.fingerprint})"
        )
    if seed != settings.seed:
        raise StateDictError(f"state dict has seed {seed}, this loader {settings.seed}")
    ours = settings.stream_settings()
    diff = sorted(k for k in set(ours) | set(saved) if ours.get(k) != saved.get(k))
    if diff:
        details = ", ".join(f"{k}: saved {saved.get(k)!r}, now {ours.get(k)!r}" for k in diff)
        raise StateDictError(f"state dict was saved with other settings ({details})")
    if not 0 <= consumed <= length:
        raise StateDictError(f"batches_consumed={consumed} is outside [0, {length}]")
    return consumed
