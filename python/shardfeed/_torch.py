"""A torch IterableDataset over the engine, for torch.utils.data.DataLoader."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import torch.utils.data

from . import _core, _shm
from ._check import check_int
from ._device import batch_bytes
from ._errors import InvalidArgumentError, StateDictError
from ._loader import iterate, start_engine
from ._options import Caches, open_filtered
from ._stream import Stream


class TorchDataset(Stream, torch.utils.data.IterableDataset):  # type: ignore[type-arg]
    """The Loader's stream as an IterableDataset; use it with ``batch_size=None``.

    ``DataLoader(ds, batch_size=None, num_workers=k)`` yields the same batches in
    the same order as ``Loader`` with the same arguments, for any ``k``: batch j
    of the rank is made by DataLoader worker ``j mod k``, which is the worker
    PyTorch takes batch j from.  Each worker builds its own engine after the fork
    (threads do not survive one) with ``num_threads // k`` threads (at least 1)
    unless ``num_threads`` is given.  With shuffling every worker decodes the row
    groups its batches touch, so decode work grows with ``k``; ``Loader`` (one
    process, many threads) avoids that.

    A Python ``transform=`` runs inside the worker processes.

    ``set_epoch(e)`` in the main process reaches the workers when they are
    started for the epoch (the default, ``persistent_workers=False``).

    The arguments are Loader's (documented on ``__init__``).
    """

    def _opened(self, dataset: _core.Dataset) -> None:
        if self._settings.pin_memory or self._settings.device is not None:
            raise InvalidArgumentError(
                "pin_memory and device are Loader settings: DataLoader workers are other "
                "processes, so pin in the DataLoader (DataLoader(ds, batch_size=None, "
                "pin_memory=True)) and move batches to the GPU in the training loop"
            )
        self._threads_given = self._settings.num_threads_given
        self._dataset: _core.Dataset | None = dataset
        self._pid = os.getpid()
        self._caches: Caches | None = None
        self._start = 0
        # Per process: what one epoch's engine leaves to the next (persistent workers).
        self._leftovers: _core.EngineLeftovers | None = None
        self._leftovers_pid = 0

    def _seek(self, epoch: int, batch: int) -> None:
        self._epoch = epoch
        self._start = batch

    def state_dict(self, batches_consumed: int) -> dict[str, Any]:
        """The Loader state for this epoch after ``batches_consumed`` batches."""
        return self._state(check_int("batches_consumed", batches_consumed, (0, self._len + 1)))

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_dataset"] = None  # the C++ catalog is rebuilt in the worker
        state["_caches"] = None
        state["_leftovers"] = None
        return state

    def _own_dataset(self) -> _core.Dataset:
        # After a fork (or unpickling) read the footers anew rather than reuse the
        # parent's filesystem handles; the fingerprint proves it is the same data.
        if self._dataset is None or self._pid != os.getpid():
            dataset, _ = open_filtered(self._settings, self._filter_image)
            if dataset.fingerprint != self._fingerprint:
                raise StateDictError(
                    "the dataset changed since the TorchDataset was made "
                    f"(fingerprint {dataset.fingerprint} != {self._fingerprint})"
                )
            self._dataset, self._pid = dataset, os.getpid()
            self._caches = None
        return self._dataset

    def __iter__(self) -> Iterator[dict[str, Any]]:
        info = torch.utils.data.get_worker_info()
        workers, worker = (info.num_workers, info.id) if info is not None else (1, 0)
        threads = self._settings.num_threads
        if workers > 1 and not self._threads_given:
            threads = max(1, threads // workers)
        options = self._settings.engine_options(
            start_batch=self._start,
            offset=worker,
            stride=workers,
            threads=threads,
        )
        dataset = self._own_dataset()
        if self._caches is None:
            self._caches = Caches.open(self._settings.cache, dataset, self._settings.remote_timeout)
        self._caches.apply(options, self._settings.cache)
        if self._leftovers is None or self._leftovers_pid != os.getpid():
            self._leftovers, self._leftovers_pid = _core.EngineLeftovers(), os.getpid()
        options.leftovers = self._leftovers
        shm = _shm.sender() if info is not None else None
        if shm is not None:
            # Room for the engine's ready batches and those on their way to the
            # main process; the slabs grow when the engine misses them.
            held = threads * (self._settings.prefetch + 1) + 8
            options.output_arena = shm.arena(
                batch_bytes(self.outputs, self._settings.batch_size), held
            )
        engine = start_engine(dataset, self._settings.plan_options(self._epoch), options)
        if shm is None:
            yield from iterate(engine, self._settings)
            return
        for batch in iterate(engine, self._settings):
            shm.after_batch()
            yield _shm.SharedBatch(batch) if type(batch) is dict else batch
