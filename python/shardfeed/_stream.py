"""What Loader and TorchDataset share: the argument list, the epoch and the resume state."""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from . import _core
from ._check import UINT64, anchored, check_int, check_source
from ._errors import InvalidDataError, StateDictError
from ._filter import FilterArg
from ._options import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_DROP_LAST,
    DEFAULT_MEMORY_LIMIT,
    DEFAULT_PREFETCH,
    DEFAULT_PREFETCH_BYTES,
    DEFAULT_REMOTE_TIMEOUT,
    DEFAULT_SEED,
    DEFAULT_SHUFFLE,
    Settings,
    Source,
    StackArg,
    open_filtered,
)
from ._state import check_state, make_state
from .transforms import Transform

if TYPE_CHECKING:
    import torch


def _stream_fingerprint(dataset: _core.Dataset) -> str:
    """The dataset's fingerprint (paths, row counts, schema: the same for any copy of
    the data), and with a filter which rows pass: a filtered stream's batches follow
    the values, so a state dict saved before a file's values changed is refused."""
    selection = str(dataset.filter_selection())
    return f"{dataset.fingerprint}-{selection}" if selection else str(dataset.fingerprint)


class Stream:
    """Base of Loader and TorchDataset (private): one argument list, checked once."""

    def __init__(
        self,
        source: Source,
        columns: Sequence[str] | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        shuffle: bool | Literal["global"] = DEFAULT_SHUFFLE,
        seed: int = DEFAULT_SEED,
        rank: int | None = None,
        world_size: int | None = None,
        drop_last: bool = DEFAULT_DROP_LAST,
        num_threads: int | None = None,
        stack: StackArg | None = None,
        output: str = "torch",
        *,
        shuffle_window: int | None = None,
        memory_limit: int | str | None = DEFAULT_MEMORY_LIMIT,
        prefetch: int = DEFAULT_PREFETCH,
        with_sample_id: bool = False,
        fill_null: float | Mapping[str, float] | None = None,
        transforms: Sequence[Transform] | None = None,
        transform: Callable[[dict[str, np.ndarray]], dict[str, Any]] | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        cache_limit_bytes: int | None = None,
        cache_decoded: bool = False,
        prefetch_bytes: int | None = DEFAULT_PREFETCH_BYTES,
        partitioning: str | None = "hive",
        filter: FilterArg | None = None,
        remote_timeout: float | None = DEFAULT_REMOTE_TIMEOUT,
        verify_page_checksums: bool = False,
        pin_memory: bool = False,
        device: str | torch.device | None = None,
    ) -> None:
        """Opens the dataset's catalog (footers only) after checking every argument.

        Args:
            source: a directory (every Parquet file below it), a file, or a list of
                files and directories; local paths or URIs Arrow knows (``file://``,
                ``s3://``, ...).  A local path may start with ``~``, and one that does
                not exist may be a glob pattern (``data/*.parquet``, ``**`` for any
                depth), which stands for the paths it matches.  A list is a set: a
                file it names twice (or names and holds in a listed directory) is read
                once, and the natural order is by path whatever the list's order.
            columns: columns to hand out one by one; ``None`` means every column
                that is not part of a ``stack``.
            batch_size: rows per batch.
            shuffle: ``True``: a fresh row-group order per epoch and a permutation of
                the rows of each mixing window of ``shuffle_window`` row groups.
                ``"global"``: a uniform permutation of all rows of the dataset per
                epoch (ranks take slices of it), gathered from the decoded tier, so
                it needs ``cache_dir`` and ``cache_decoded=True``: a cold epoch
                decodes each row group into the tier and maps it back, a warm one
                only maps.  Every batch reads rows of every row group, so the
                tier's pages are all in use at once: with a tier larger than the
                page cache, rows come from the disk one page fault at a time.
                ``False``: the natural order.
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
            output: ``"torch"`` (``torch.Tensor`` values), ``"numpy"`` or
                (Loader) ``"jax"`` (``jax.Array`` values on the CPU device, zero-copy
                through DLPack; 64-bit dtypes need ``jax_enable_x64``, else JAX makes
                32-bit copies).
            shuffle_window: row groups mixed together when shuffling (the decoded
                row groups of a window stay in memory while its batches are
                assembled).  ``None`` (default): as many as fill 3/8 of
                ``memory_limit`` by the footers' sizes (at least 1; 4 without a
                limit), so the window and the order follow from the limit and the
                data, never from threads or timing.  The state dict records the
                window in use.
            memory_limit: bytes the engine may hold (an int or ``"512MiB"``,
                ``"1.5GB"``; ``None`` or 0: no limit; default 384 MiB): row groups
                being decoded (read buffers, Arrow arrays, stack matrices),
                decoded row groups and ready batches (at most a quarter of it).
                A worker waits before a decode that would pass it, except for
                the next batch's row groups: the peak passes the limit by those
                decodes and the batches built meanwhile (a quarter of the limit)
                at most, and no limit gives less than one window and one row
                group being decoded.  Mapped decoded-tier entries are the page
                cache's, outside the limit.  Resident memory adds
                the allocator's (freed pages go back after 0.2 s) and the
                libraries' own.  ``stats()["memory"]``
                counts it; ``shardfeed info --memory-limit`` predicts it.  A
                TorchDataset in a DataLoader with 2 or more workers runs one
                engine, in worker 0, with the limit (with 0 or 1 worker the one
                process that reads does).
            prefetch: batches each worker thread may hold ready (the engine holds
                ``num_threads * prefetch`` at most).
            with_sample_id: add ``"sample_id"``: each row's int64 index in the
                dataset's natural order.
            fill_null: value for nulls: one number (not True/False) for every column, or
                ``{column: number}`` (the other columns keep the default); ``None``
                raises InvalidDataError naming the file, row group and column of
                the first null.  A value the column's type (after its transforms)
                cannot hold exactly -- -1 or 256 for uint8, 2.5 for an integer,
                anything but 0/1/True/False for bool, NaN for a non-float -- is an
                InvalidArgumentError here, naming the column.
            transforms: ``shardfeed.transforms`` objects run in the engine's threads,
                in order, before ``stack`` (random ones keyed per sample).
            transform: a Python callable ``dict[str, ndarray] -> dict`` applied to each
                batch before conversion (with TorchDataset: in the worker processes).
            cache_dir: a node-local folder for cached data (created with mode 0700).
                Remote files are kept there (``files/``), shared by every process
                on the node; local files are read in place.
            cache_limit_bytes: at most this many bytes per cache tier (None or 0: no
                limit).
            cache_decoded: also keep each row group after decoding, column
                selection and the deterministic transforms (``decoded/``); later
                epochs map it from disk instead of decoding again.  Random
                transforms always run after it.
            prefetch_bytes: how far ahead of use remote files are fetched.
            remote_timeout: seconds one remote read (a footer, a row group's
                column chunks, a file's information) may take, retries
                included, before a StorageError names the file; 0: no limit.
                Downloads into the file cache give up when no bytes arrived
                for this long (a large file on a slow link still completes).
            verify_page_checksums: check the CRC32 of every page that has one
                (pyarrow's ``write_page_checksum=True``, Spark): a damaged page
                is an ``InvalidDataError`` naming the file, row group and
                column instead of changed values.  Off by default: on
                checksummed files it costs 16-19% of the throughput
                (``bench/bench_core.py --page-checksums``).
            pin_memory: (Loader, ``output="torch"``) batch buffers are page-locked
                memory from torch's CUDA host allocator, filled in place by the
                engine and reused, so ``.to("cuda", non_blocking=True)`` is an
                asynchronous copy with no extra host copy.  Without CUDA an
                InvalidArgumentError names the setting.  TorchDataset: use
                ``DataLoader(pin_memory=True)`` instead.
            device: (Loader, ``output="torch"``) ``"cuda"`` or ``"cuda:N"`` (or such a
                ``torch.device``): batches arrive on that GPU, copied from pinned
                buffers on a side stream one batch ahead, so that the copy overlaps the
                training step; implies ``pin_memory=True``.  ``"cpu"`` or ``None``:
                batches stay in host memory.
            partitioning: ``"hive"`` (default): ``key=value`` folders below the
                dataset root become columns (int64 when every value is an integer,
                else string; ``__HIVE_DEFAULT_PARTITION__`` is null), placed after
                the files' columns; a file column of the same name wins.  ``None``:
                folder names are only paths.
            filter: keep only the rows that pass, in the DNF form of
                ``pyarrow.parquet.read_table(filters=...)`` and Petastorm:
                ``[("date", ">=", "2024-01-01"), ("country", "in", ["US", "CA"])]``
                (a list of tuples is an AND, a list of such lists an OR of ANDs;
                ops ``==``/``=``, ``!=``, ``<``, ``<=``, ``>``, ``>=``, ``in``,
                ``not in``).  As in pyarrow (``pyarrow.dataset`` and
                ``read_table(filters=...)``) a null passes no comparison, not
                even ``!=``, but does pass ``not in`` (it is ``not (x in S)``).
                Values: numbers for numeric columns, strings
                for string columns, True/False for bool; date and timestamp
                columns also take ISO strings, ``datetime.date``/``datetime``
                (naive ones are UTC) and ``numpy.datetime64``.  Files are pruned
                by partition values, row groups by their statistics, and the
                filter columns of the rest are read once, when the loader is
                made (kept in ``cache_dir/filters/`` when a cache_dir is given),
                so ``len()``, ranks and resume are over the passing rows.
                ``sample_id`` stays the row's index in the unfiltered natural
                order, and random transforms key on it.  A filter that keeps no
                row gives an empty loader (``len() == 0``).  A missing column,
                an unknown operator or a value of the wrong type is an error here.

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

        A wrong type raises ArgumentTypeError (a TypeError), a value out of range
        InvalidArgumentError (a ValueError); both name the argument.

        Integrity: page checksums (CRC32, when the file has them) are verified
        with ``verify_page_checksums=True``; a file that changes after this call
        is an InvalidDataError when its rows are read, never a mix of versions;
        credentials in a source URI never appear in a message.  Ctrl-C
        interrupts a waiting ``next()`` within a fraction of a second.
        """
        # The arguments by name, before any other local exists: the list above is
        # the only one, Settings.make checks each entry.
        args = {k: v for k, v in locals().items() if k not in ("self", "__class__")}
        super().__init__()
        self._settings = Settings.make(args)
        dataset, self._filter_counts = open_filtered(self._settings)
        # Reopened (in DataLoader workers, on later passes) from where it was made.
        self._settings.sources = anchored(check_source(self._settings.sources))
        self._settings.resolve(dataset)
        # (Deletion vectors alone are made again from the catalog: no image.)
        filtered = self._settings.filter is not None
        self._filter_image = bytes(dataset.filter_image()) if filtered else None
        # Column, type and stack errors surface here, before any data is read.
        self._outputs = dataset.describe_outputs(self._settings.output_options())
        self._fingerprint = _stream_fingerprint(dataset)
        self._files = list(dataset.files())
        self._file_sizes = list(dataset.file_sizes())
        self._file_versions = list(dataset.file_versions())
        self._len = int(dataset.num_batches(self._settings.plan_options(0)))
        # What a batch can hold at most: sizes buffers made ahead (a batch_size far
        # past the data's rows asks for no more).
        self._rows = int(self._filter_counts.get("rows_kept", int(dataset.num_rows)))
        self._largest_batch = max(1, min(self._settings.batch_size, self._rows))
        # Why an epoch has no batches (None: it has some): warned of once, where the
        # loader is iterated (a loader made to look at the data stays quiet), or made
        # for a TorchDataset (iterated in DataLoader workers).
        self._empty_why: str | None = None
        if self._len == 0:
            rows = self._rows
            deleted = self._filter_counts.get("rows_deleted", 0)
            self._empty_why = _no_batches_reason(self._settings, rows, deleted)
            if self._WARN_EMPTY_AT_INIT:
                self._warn_if_empty()
        self._epoch = 0
        self._opened(dataset)

    _WARN_EMPTY_AT_INIT = False

    def _warn_if_empty(self) -> None:
        """Warns once, at the caller's line, that every epoch has no batches."""
        why, self._empty_why = self._empty_why, None
        if why is None:
            return
        package = os.path.dirname(__file__)
        frame, level = sys._getframe(1), 2
        while frame.f_back is not None and os.path.dirname(frame.f_code.co_filename) == package:
            frame, level = frame.f_back, level + 1
        warnings.warn(f"every epoch has no batches: {why}", UserWarning, stacklevel=level)

    def _opened(self, dataset: _core.Dataset) -> None:
        """Keeps what the subclass needs of the freshly opened dataset."""
        raise NotImplementedError

    def _seek(self, epoch: int, batch: int) -> None:
        """The next pass yields epoch `epoch` from batch `batch` on."""
        raise NotImplementedError

    def _reopened(self) -> _core.Dataset:
        """The dataset read anew, as in another process (after a fork, or unpickled)
        rather than through the parent's filesystem handles; the fingerprint proves it
        is the same data."""
        # The files this stream was made on, not the ones a folder gained since.
        dataset, _ = open_filtered(self._settings, self._filter_image, self._files)
        fingerprint = _stream_fingerprint(dataset)
        if fingerprint != self._fingerprint:
            raise StateDictError(
                "the dataset changed since the loader was made "
                f"(fingerprint {fingerprint} != {self._fingerprint})"
            )
        # The same paths and row groups, but a file rewritten in between (same sizes,
        # new values) would be read as if it were the one the loader was made on.
        for name, size, version, was_size, was in zip(
            dataset.files(), dataset.file_sizes(), dataset.file_versions(),
            self._file_sizes, self._file_versions, strict=True,
        ):  # fmt: skip
            if size != was_size or version != was:
                raise InvalidDataError(
                    f"file {name!r}: the file changed since the dataset was opened "
                    "(a new process reading it found another version)"
                )
        return dataset

    def __len__(self) -> int:
        """Batches this rank yields per epoch."""
        return self._len

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
        out = []
        for name, dtype, shape, source_type, unit in self._outputs:
            info: dict[str, Any] = {"name": name, "dtype": dtype, "shape": list(shape)}
            if source_type:
                info["source_type"] = source_type
            if unit:
                info["unit"] = unit
            out.append(info)
        return out

    @property
    def epoch(self) -> int:
        return self._epoch

    def set_epoch(self, epoch: int) -> None:
        """Selects the epoch of the next pass (its order); resets the position,
        except a resume that ``load_state_dict`` left for this very epoch and no
        pass has begun since (the usual loop calls ``set_epoch`` at the top of the
        resumed epoch: it goes on from the saved batch)."""
        epoch = check_int("epoch", epoch, UINT64)
        self._seek(epoch, self._pending_resume(epoch))

    def _pending_resume(self, epoch: int) -> int:
        """The batch the next pass resumes epoch `epoch` at, when load_state_dict
        left one and no pass began since; else 0."""
        raise NotImplementedError

    def _state(self, consumed: int) -> dict[str, Any]:
        return make_state(self._settings, self._fingerprint, self._epoch, consumed)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """The next pass yields the rest of the saved epoch, exactly (a state dict
        of a Loader and of a TorchDataset with the same arguments are the same)."""
        self._seek(*check_state(state, self._settings, self._fingerprint, self._len))


def _no_batches_reason(settings: Settings, rows: int, deleted: int = 0) -> str:
    """Why an epoch of a loader with these settings and rows (``deleted`` more left
    out by Delta deletion vectors) has no batches. Legal (a training loop then does
    nothing), but rarely what was meant."""
    if settings.filter is not None and rows == 0:
        return "no rows pass the filter"
    if rows == 0 and deleted:
        return f"the Delta table's deletion vectors delete all {deleted:,} of its rows"
    if not settings.drop_last:
        return f"the dataset has {rows:,} rows"
    return (
        f"{rows:,} rows make no full batch of {settings.batch_size} on each of "
        f"{settings.world_size} rank(s) with drop_last=True"
    )
