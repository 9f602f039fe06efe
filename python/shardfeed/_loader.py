"""The in-process loader: a C++ engine per pass over an epoch."""

from __future__ import annotations

import atexit
import ctypes
import functools
import os
import sys
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from . import _core
from ._device import PinnedArena, batch_bytes, to_device
from ._early import NextPass
from ._errors import ArgumentTypeError, LoaderClosedError, UnsupportedTypeError
from ._options import Caches, Settings
from ._stream import Stream

# Engines still running; closed before interpreter exit so that no engine thread
# outlives pyarrow's finalization of its filesystems (S3 in particular).
_live_engines: weakref.WeakSet[_core.Engine] = weakref.WeakSet()


def abandon(inherited: Any) -> None:
    """Never destroys `inherited`, an object this process copied from its parent in a
    fork (the caches: their destructors may wait on locks the parent's threads held).
    An engine copied so guards itself: it neither stops nor is destroyed outside the
    process that made it."""
    if inherited is not None:
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(inherited))


def _warn_if_copied_into_workers() -> None:
    """A Loader made in the main process and iterated in DataLoader workers (wrapped in
    an IterableDataset) is a copy in each: every worker hands out the whole stream, and
    the DataLoader interleaves them, so each batch comes once per worker."""
    data = sys.modules.get("torch.utils.data")
    info = data.get_worker_info() if data is not None else None
    if info is None or info.num_workers < 2:
        return
    warnings.warn(
        f"this Loader was made in another process and is iterated in DataLoader worker "
        f"{info.id} of {info.num_workers}: every worker that iterates it yields the whole "
        f"stream, so each batch comes {info.num_workers} times. Use shardfeed.TorchDataset, "
        "which gives the Loader's stream once for any number of workers",
        UserWarning,
        stacklevel=4,
    )


_IMPORTED_IN = os.getpid()
_exiting = False  # the exit hook has run: an engine made from now on is closed at once


@atexit.register
def _close_engines() -> None:
    # First, so that a daemon thread waiting in next() does not take the GIL
    # back as the interpreter finalizes (that aborts the process): from here on
    # such a thread sleeps until the process ends.
    # No leak report when other threads' frames hold objects, nor in a fork's child,
    # which keeps what it copied from the parent (engines, caches) on purpose.
    global _exiting
    _exiting = True
    forked = os.getpid() != _IMPORTED_IN
    _core.begin_exit(quiet_leaks=threading.active_count() > 1 or forked)
    for engine in list(_live_engines):
        engine.close()
    # An engine being made on another thread now (the next pass's) is stopped as that
    # thread parks: wait for it, or its workers would decode on under the C++ exit
    # handlers (a segfault at exit).  Bounded: making one plans an epoch.
    _core.wait_for_engines_being_made(30.0)
    # A remote call given up at remote_timeout may still run (a filesystem being
    # made, a read): pyarrow's exit hook, which runs after this one, shuts the AWS
    # SDK down, and under such a call that crashed the process.  Bounded.
    _core.wait_for_abandoned_calls(30.0)


def start_engine(
    dataset: _core.Dataset, plan: _core.PlanOptions, options: _core.EngineOptions
) -> _core.Engine:
    engine = _core.Engine(dataset, plan, options)
    _live_engines.add(engine)
    if _exiting:
        # Made on another thread (the next pass's, started early) after the exit
        # hook closed the others: its workers must not outlive the interpreter.
        engine.close()
    return engine


def convert(batch: dict[str, Any], output: str) -> dict[str, Any]:
    if output == "numpy":
        return batch
    if output == "jax":
        # jax.Arrays through DLPack: on the CPU device they alias the engine's
        # (64-byte aligned) buffers, which stay alive as long as the array does.
        # With JAX's default jax_enable_x64=False, 64-bit outputs become 32-bit
        # copies, as everywhere in JAX: integers that 32 bits cannot hold are
        # refused rather than wrapped (2**40 would silently become 0).
        import jax.dlpack

        if not jax.config.read("jax_enable_x64"):  # type: ignore[no-untyped-call]
            _check_32_bit_integers(batch)
        return _arrays_to(batch, jax.dlpack.from_dlpack, f"jax {jax.__version__}")
    import torch

    return _arrays_to(batch, torch.from_numpy, f"torch {torch.__version__}")


def _check_32_bit_integers(batch: dict[str, Any]) -> None:
    for name, value in batch.items():
        if not isinstance(value, np.ndarray) or value.dtype.kind not in "iu" or value.size == 0:
            continue
        if value.dtype.itemsize < 8:
            continue
        narrow = np.iinfo(np.int32 if value.dtype.kind == "i" else np.uint32)
        low, high = value.min(), value.max()
        if low < narrow.min or high > narrow.max:
            bad = int(low if low < narrow.min else high)
            raise UnsupportedTypeError(
                f"output {name!r} holds {bad}, which JAX with jax_enable_x64 off would "
                f"truncate to {narrow.dtype}: turn it on "
                "(jax.config.update('jax_enable_x64', True)) or use output='numpy'"
            )


def _arrays_to(batch: dict[str, Any], make: Callable[[Any], Any], library: str) -> dict[str, Any]:
    """The batch with each ndarray made into the library's array by `make` (no copy)."""
    out: dict[str, Any] = {}
    for name, value in batch.items():
        if not isinstance(value, np.ndarray):
            out[name] = value
            continue
        if value.dtype.char in "Qq":
            # numpy's "unsigned long long" twin of uint64 (what the binding's
            # arrays carry); torch and jax take only the canonical one.  A view.
            value = value.view(value.dtype.str)
        if not value.flags.c_contiguous:
            # A transform='s view (reversed, a strided column): torch takes no
            # negative strides and jax no strides at all, so a copy of it.
            value = np.ascontiguousarray(value)
        try:
            out[name] = make(value)
        except (TypeError, ValueError, RuntimeError, BufferError) as e:  # e.g. uint64, torch < 2.3
            raise UnsupportedTypeError(
                f"output {name!r} has dtype {value.dtype}, which this {library} cannot "
                "hold; cast it in transform= or use output='numpy'"
            ) from e
    return out


class DeliverClock:
    """Time spent in Python per batch: the user's transform and the conversion."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.batches = 0


def deliver(arrays: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """A batch from the engine after the Python transform and the output conversion."""
    if settings.transform is None:
        return convert(arrays, settings.output)
    batch = settings.transform(arrays)
    if settings.output != "numpy" and not isinstance(batch, Mapping):
        # numpy output hands the result on as it is; the others convert its values.
        raise ArgumentTypeError(
            f"transform= must return a dict of arrays for output={settings.output!r}, "
            f"got {type(batch).__name__}"
        )
    return convert(batch, settings.output)


def iterate(
    engine: _core.Engine, settings: Settings, clock: DeliverClock | None = None
) -> Iterator[dict[str, Any]]:
    """Yields batches (after the Python transform, if any); closes the engine however
    the loop ends."""
    cancelled = False
    try:
        while True:
            arrays = engine.next()
            if arrays is None:
                return
            t0 = time.perf_counter()
            batch = deliver(arrays, settings)
            if clock is not None:
                clock.seconds += time.perf_counter() - t0
                clock.batches += 1
            yield batch
    except KeyboardInterrupt:
        # Stop the workers without waiting for them: a worker can be inside a
        # read or a sleep that outlasts the user's patience.  They are joined
        # when the engine is dropped, or at exit.
        engine.cancel()
        cancelled = True
        raise
    finally:
        if not cancelled:
            engine.close()


class Loader(Stream):
    """Batches from a Parquet dataset in one reproducible order.

    ``Loader(source, columns=None, batch_size=1024, ...)``: the arguments are
    documented on ``__init__`` (shared with TorchDataset).

    Iterating yields ``dict[str, Tensor | ndarray]``.  Variable-length list
    columns give ``name`` (zero-padded ``[batch, max_len]``) and
    ``name_lengths``; fixed-size lists give ``[batch, size]``, and fixed-size lists of
    them and fixed-shape tensors ``[batch, *shape]``.
    """

    def _opened(self, dataset: _core.Dataset) -> None:
        self._pid = os.getpid()  # the process whose engines these are (see _in_own_process)
        self._dataset = dataset
        self._caches = Caches.open(self._settings.cache, dataset, self._settings.remote_timeout)
        self._consumed = 0  # batches handed out in this epoch
        self._resume_at = 0  # where the next pass starts
        # Which pass counts in _consumed: the latest, and none after a seek (a pass
        # still running then, or an older one interleaved, hands out batches of
        # another epoch or position).
        self._counting = 0
        self._last_engine: _core.Engine | None = None
        self._deliver = DeliverClock()
        self._arena: PinnedArena | None = None
        # The idle matrices and batch buffers of one epoch's engine, for the next.
        self._leftovers = _core.EngineLeftovers()
        # The next pass's engine, started as this pass ends (see _early).
        self._next = NextPass()
        self._started_early = False  # whether the latest pass's engine was
        self._seeked = False  # set_epoch / load_state_dict since the latest pass began
        # The engines of passes not yet ended (close() stops them) and whether
        # close() was called.
        self._engines: weakref.WeakSet[_core.Engine] = weakref.WeakSet()
        self._closed = False
        if self._settings.pin_memory:
            # Room for what the engine's queues hold, and a few batches in use.
            held = self._settings.num_threads * (self._settings.prefetch + 1) + 4
            self._arena = PinnedArena(batch_bytes(self.outputs, self._largest_batch), held)

    def _pending_resume(self, epoch: int) -> int:
        return self._resume_at if self._seeked and self._epoch == epoch else 0

    def _seek(self, epoch: int, batch: int) -> None:
        self._counting += 1
        self._epoch = epoch
        self._consumed = batch
        self._resume_at = batch
        self._seeked = True

    # -- the stream ------------------------------------------------------------------
    def __iter__(self) -> Iterator[dict[str, Any]]:
        if self._closed:
            raise LoaderClosedError("this Loader was closed (close() or the end of its with block)")
        self._in_own_process()
        self._warn_if_empty()
        start = self._resume_at
        self._resume_at = 0
        self._consumed = start
        self._counting += 1
        counting = self._counting
        predicted = self._next.begin(self._epoch, self._seeked)
        self._seeked = False
        engine = self._next.take(self._epoch, start, self._settings.extra)
        self._started_early = engine is not None
        if engine is None:
            engine = self._engine_maker(self._epoch, start)()
        self._last_engine = engine
        self._engines.add(engine)
        self._deliver = DeliverClock()
        batches = iterate(engine, self._settings, self._deliver)
        if self._arena is not None:
            batches = self._growing(batches, self._arena)
        if self._settings.device is not None:
            batches = to_device(batches, self._settings.device)
        make = self._engine_maker
        for batch in self._next.watch(batches, engine, predicted, self._settings, make):
            if self._counting == counting:
                self._consumed += 1
            yield batch

    def close(self) -> None:
        """Stops this loader's engine threads now and frees the memory they hold; a
        ``next()`` waiting in another thread raises ``LoaderClosedError``, and so does
        iterating the loader afterwards.  Batches already handed out stay valid;
        ``state_dict()`` still says where the stream stood.  Calling it again does
        nothing.  ``with Loader(...) as loader:`` closes at the end of the block."""
        self._closed = True
        if not hasattr(self, "_next") or self._pid != os.getpid():
            return  # not opened, or a fork's copy: the engines are the parent's
        self._next.close()
        for engine in list(self._engines):
            engine.close()

    def __enter__(self) -> Loader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _in_own_process(self) -> None:
        """After a fork (a DataLoader worker iterating this Loader, say) its engines'
        threads stayed in the parent, so the engine started early there would never
        deliver, and the parent's filesystem handles may not work here.  Reopens the
        dataset (the fingerprint proves it is the same data) and starts afresh,
        keeping the epoch and the position."""
        if self._pid == os.getpid():
            return
        abandon(self._caches)  # the parent's (their locks may be held there)
        self._dataset = dataset = self._reopened()
        self._caches = Caches.open(self._settings.cache, dataset, self._settings.remote_timeout)
        self._leftovers = _core.EngineLeftovers()
        self._next = NextPass()
        self._last_engine = None
        self._started_early = False
        self._pid = os.getpid()
        _warn_if_copied_into_workers()

    def _engine_maker(self, epoch: int, start: int) -> Callable[[], _core.Engine]:
        """Makes the engine of (epoch, start) when called; holds no reference to self."""
        options = self._settings.engine_options(start_batch=start, caches=self._caches)
        options.leftovers = self._leftovers
        if self._arena is not None:
            options.output_arena = self._arena.core
        return functools.partial(
            start_engine, self._dataset, self._settings.plan_options(epoch), options
        )

    @staticmethod
    def _growing(batches: Iterator[dict[str, Any]], arena: PinnedArena) -> Iterator[dict[str, Any]]:
        for batch in batches:
            arena.after_batch()
            yield batch

    def __reduce_ex__(self, protocol: Any) -> Any:
        # Without this, pickle fails deep inside on "cannot pickle 'Dataset' object".
        raise TypeError(
            "a Loader cannot be pickled or copied: it holds engine threads and open files. "
            "Make it in the process that iterates it (send its arguments instead; "
            "state_dict() and load_state_dict() carry its position), or use TorchDataset, "
            "which pickles, in a DataLoader"
        )

    # -- resume ----------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """A small JSON-serializable dict: where this epoch stands, and what it is valid for."""
        return self._state(self._consumed)

    # -- introspection ---------------------------------------------------------------
    @property
    def num_rows(self) -> int:
        """Rows in the dataset that the epoch is made of: all ranks, before batching,
        and with ``filter=`` those that pass it (``stats()["filter"]`` has both)."""
        return int(self._filter_counts.get("rows_kept", self._dataset.num_rows))

    @property
    def fingerprint(self) -> str:
        """Digest of the files' relative paths, row-group sizes and schema (a state
        dict's ``fingerprint`` adds, with ``filter=``, which rows pass)."""
        return str(self._dataset.fingerprint)

    def stats(self) -> dict[str, Any]:
        """Counters of the latest pass (before the first pass begins: only ``epoch``,
        ``batches_consumed``, ``started_early`` and the cache, ``filter`` and
        ``pinned`` counters; ``stages`` and ``memory`` come with the first pass).

        ``started_early``: the pass's engine was started near the end of the pass
        before (see the README's *Memory*).
        ``stages`` maps fetch, read, decode, transform, assemble (busy time of the
        engine's workers, summed over threads) and deliver (the consumer's Python
        time: ``transform=`` and conversion) to ``{"seconds", "bytes", "rows"}``;
        ``worker_wait_seconds`` is time workers sat idle, as far ahead of the
        consumer as they may run (the consumer is the bottleneck),
        ``consumer_wait_seconds`` time the consumer waited for its next batch (the
        loader is).  Also ``elapsed_seconds``, ``threads``,
        ``row_groups_decoded``, ``rows_delivered`` and ``peak_live_row_groups``;
        ``stack_columns_tiled`` / ``stack_columns_generic``: stack member columns
        decoded straight into the matrix a tile at a time, or through Arrow (a
        member with a transform of its own, under a filter, of another dtype than
        the stack's, or with nulls and no fill), summed over row groups;
        ``decode_parts_shared``: parts of a row group's decode (a stack's tile
        reads, 16 columns each) run by a worker waiting for that row group,
        or with no batch to build, rather than by the one decoding it.
        ``memory``: the budget of ``memory_limit`` in bytes -- ``limit_bytes``,
        ``peak_bytes`` (all of it at once) and its parts ``peak_decoding_bytes``
        (reserved for row groups being decoded), ``peak_decoded_bytes``,
        ``peak_batch_bytes`` (built, not yet taken); apart from them
        ``peak_idle_bytes`` (freed stack matrices kept for the next decodes,
        ``matrices_reused`` of ``matrices_reused + matrices_allocated`` taken
        from them; ``matrices_prefaulted``: made and written before the first
        batch by an engine that carried nothing over, then taken as reused; and
        buffers of batches the consumer dropped, kept for later
        batches: ``batch_buffers_reused`` of ``batch_buffers_reused +
        batch_buffers_allocated`` batch arrays built in one; both 0 with
        ``pin_memory``; ``batch_buffers_prefaulted``: made and written before
        the first batch by an engine that carried none over); ``waits``/``wait_seconds``
        (decodes that waited for room), ``over_limit`` (decodes for the next
        batch that went past the limit), ``ready_batches`` (built batches kept at
        most); and the prediction made from the footers: ``shuffle_window``,
        ``expected_peak_bytes``, ``expected_mixing`` (W_eff).
        Caches: ``remote_bytes``, ``cache_hits``, ``cache_misses``, ``cache_bytes``,
        ``prefetch_wait_seconds`` (file cache, this process, all passes; without a
        file cache ``remote_bytes`` is what the latest pass fetched) and
        ``decoded_hits``/``decoded_misses``/``decoded_bytes`` with ``cache_decoded``.
        With ``filter=``: ``filter`` holds what cataloguing pruned and kept
        (``files``, ``files_pruned_by_partition``, ``row_groups``,
        ``row_groups_pruned_by_partition``, ``row_groups_pruned_by_statistics``,
        ``row_groups_read``, ``row_groups_kept``, ``rows``,
        ``rows_pruned_by_partition``/``_by_statistics``/``_by_rows``,
        ``rows_kept``, ``bytes_read``).  With ``pin_memory`` (or a CUDA ``device``):
        ``pinned`` holds the page-locked arena's ``slabs``, ``bytes``,
        ``used_bytes``, ``peak_bytes``, ``allocations`` and ``misses`` (buffers
        that came from pageable memory because the arena was full).
        """
        self._in_own_process()  # the parent's engine and caches are not to be touched here
        stats: dict[str, Any] = {
            "epoch": self._epoch,
            "batches_consumed": self._consumed,
            "started_early": self._started_early,
        }
        if self._last_engine is not None:
            stats.update(self._last_engine.stats())
            plan = self._settings.memory_plan or {}
            stats["memory"]["shuffle_window"] = self._settings.shuffle_window
            stats["memory"]["expected_peak_bytes"] = plan.get("expected_peak_bytes")
            stats["memory"]["expected_mixing"] = plan.get("expected_mixing")
            stats["stages"]["deliver"] = {
                "seconds": self._deliver.seconds,
                "bytes": 0,
                "rows": int(stats["rows_delivered"]),
            }
        stats.update(self._caches.stats())
        if self._arena is not None:
            stats["pinned"] = self._arena.stats()
        if self._filter_counts:
            stats["filter"] = dict(self._filter_counts)
        if self._caches.files is None and "stages" in stats:
            # Without the file cache, what the workers fetched is what came over the wire.
            stats["remote_bytes"] = int(stats["stages"]["fetch"]["bytes"])
        return stats

    def trace_events(self) -> list[tuple[int, str, float, float, int]]:
        """(worker, stage, start_us, duration_us, arg) of the latest pass, when it was
        made with tracing on (see ``shardfeed profile --trace``); worker -1 is the consumer."""
        self._in_own_process()
        return [] if self._last_engine is None else list(self._last_engine.trace())
