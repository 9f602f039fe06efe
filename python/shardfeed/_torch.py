"""A torch IterableDataset over the engine, for torch.utils.data.DataLoader."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import torch.utils.data

from . import _core
from ._errors import StateDictError
from ._loader import check_state, describe_output, iterate, start_engine
from ._options import Caches, CacheSettings, Settings, Source, StackArg, open_dataset
from .transforms import Transform


class TorchDataset(torch.utils.data.IterableDataset):  # type: ignore[type-arg]
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
        super().__init__()
        self._threads_given = num_threads is not None
        self._settings = Settings.make(
            source, columns, batch_size, shuffle, seed, rank, world_size, drop_last,
            num_threads, stack, output, shuffle_window, prefetch, with_sample_id, fill_null,
            transforms, transform,
            CacheSettings.make(cache_dir, cache_limit_bytes, cache_decoded, prefetch_bytes),
            partitioning,
        )  # fmt: skip
        self._dataset: _core.Dataset | None = open_dataset(
            self._settings.sources, self._settings.partitioning
        )
        self._outputs = self._dataset.describe_outputs(self._settings.output_options())
        self._fingerprint = self._dataset.fingerprint
        self._len = int(self._dataset.num_batches(self._settings.plan_options(0)))
        self._pid = os.getpid()
        self._caches: Caches | None = None
        self._epoch = 0
        self._start = 0

    def __len__(self) -> int:
        return self._len

    def describe_outputs(self) -> list[dict[str, Any]]:
        """Each output's name, dtype, shape, source type and unit (see Loader)."""
        return [describe_output(*info) for info in self._outputs]

    def set_epoch(self, epoch: int) -> None:
        self._epoch = int(epoch)
        self._start = 0

    def state_dict(self, batches_consumed: int) -> dict[str, Any]:
        """The Loader state for this epoch after ``batches_consumed`` batches."""
        return {
            "version": 1,
            "epoch": self._epoch,
            "seed": self._settings.seed,
            "batches_consumed": int(batches_consumed),
            "fingerprint": self._fingerprint,
            "settings": self._settings.stream_settings(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """The next pass yields the rest of the saved epoch (a Loader's state works too)."""
        self._start = check_state(state, self._settings, self._own_dataset(), self._len)
        self._epoch = int(state["epoch"])

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_dataset"] = None  # the C++ catalog is rebuilt in the worker
        state["_caches"] = None
        return state

    def _own_dataset(self) -> _core.Dataset:
        # After a fork (or unpickling) read the footers anew rather than reuse the
        # parent's filesystem handles; the fingerprint proves it is the same data.
        if self._dataset is None or self._pid != os.getpid():
            dataset = open_dataset(self._settings.sources, self._settings.partitioning)
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
            offset=(self._start + worker) % workers,
            stride=workers,
            threads=threads,
        )
        dataset = self._own_dataset()
        if self._caches is None:
            self._caches = Caches.open(self._settings.cache, dataset)
        self._caches.apply(options, self._settings.cache)
        engine = start_engine(dataset, self._settings.plan_options(self._epoch), options)
        yield from iterate(engine, self._settings)
