"""A torch IterableDataset over the engine, for torch.utils.data.DataLoader."""

from __future__ import annotations

import functools
import multiprocessing
import os
import secrets
import threading
from collections.abc import Callable, Iterator
from multiprocessing import context as mp_context
from typing import Any

import torch.utils.data

from . import _core, _fanout, _shm
from ._check import check_int
from ._device import batch_bytes
from ._early import EngineMaker, NextPass
from ._errors import InvalidArgumentError
from ._loader import abandon, deliver, iterate, start_engine
from ._options import Caches
from ._stream import Stream

_PASS_SLOTS = 1024  # workers whose passes are counted apart (more share slots)


class TorchDataset(Stream, torch.utils.data.IterableDataset):  # type: ignore[type-arg]
    """The Loader's stream as an IterableDataset; use it with ``batch_size=None``.

    ``DataLoader(ds, batch_size=None, num_workers=k)`` yields the same batches in
    the same order as ``Loader`` with the same arguments, for any ``k``: batch j
    of the rank is delivered by DataLoader worker ``j mod k``, which is the worker
    PyTorch takes batch j from.  With ``k >= 2`` worker 0 runs the one engine of
    the pass (threads do not survive a fork, so it is built there) with all
    ``num_threads`` and hands the other workers their batches, so each row group
    is decoded once whatever ``k``.  Batches reach the main process as references
    into shared memory the engine wrote them to, not as copies (see the README).
    Without ``memfd_create`` every worker runs an engine of its own with
    ``num_threads // k`` threads (at least 1) unless ``num_threads`` is given.

    A Python ``transform=`` runs in the worker that delivers the batch.

    ``set_epoch(e)`` and ``load_state_dict`` in the main process reach the
    workers at the start of their next pass, persistent ones included (the two
    numbers live in memory the workers share).

    The arguments are Loader's (documented on ``__init__``).
    """

    _WARN_EMPTY_AT_INIT = True  # (iterated in workers: warned of where it is made)

    def _opened(self, dataset: _core.Dataset) -> None:
        if self._settings.output == "jax":
            raise InvalidArgumentError(
                "TorchDataset hands batches to a torch DataLoader: output must be 'torch' or "
                "'numpy' (Loader(output='jax') gives jax arrays)"
            )
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
        # Per process (reset with _dataset after a fork): what one epoch's engine
        # leaves to the next (persistent workers).
        self._leftovers: _core.EngineLeftovers | None = None
        # The workers of one DataLoader pass find each other by these (see _fanout).
        self._token = secrets.randbits(63)
        self._passes = 0
        # [epoch, start batch, passes begun since by worker 0, 1, ...] as set_epoch /
        # load_state_dict left them, in memory the workers share (fork, or spawn:
        # pickled while spawning), so persistent workers see them at the start of
        # each pass too.  The start batch is the first pass's only, as in Loader:
        # each worker counts its own passes (one writer a slot: no lock, which
        # could not be shared with spawned workers anyway).
        # A copy (pickle, copy.deepcopy) or a process that is not one of this
        # object's DataLoader workers (a fork, torch.multiprocessing.spawn) takes
        # its own array, with the values it had: its set_epoch / resume are its own.
        self._where: Any = multiprocessing.RawArray("q", 2 + _PASS_SLOTS)
        self._where[:2] = [self._epoch, 0]
        self._where_pid = os.getpid()  # the process whose array it is
        self._where_lock = threading.Lock()  # threads of one process take passes in turn
        # Per process, likewise: the next pass's engine, started early (see _early).
        self._next: NextPass | None = None
        self._seeked = False  # set_epoch / load_state_dict in this process since a pass began

    def _pending_resume(self, epoch: int) -> int:
        with self._where_lock:
            where = self._own_where(torch.utils.data.get_worker_info() is not None)
            if int(where[0]) != epoch or any(where[2:]):  # a pass began since
                return 0
            return int(where[1])

    def _seek(self, epoch: int, batch: int) -> None:
        self._epoch = epoch
        self._seeked = True
        with self._where_lock:
            where = self._own_where(torch.utils.data.get_worker_info() is not None)
            where[:2] = [epoch, batch]
            where[2:] = [0] * _PASS_SLOTS

    def _own_where(self, in_worker: bool) -> Any:
        """The shared [epoch, start, passes...] array this process reads and writes:
        a DataLoader worker shares the one of the process that started it; any
        other process that inherited an array (fork, spawn) copies it first."""
        if not in_worker and self._where_pid != os.getpid():
            fresh = multiprocessing.RawArray("q", 2 + _PASS_SLOTS)
            fresh[:] = self._where[:]
            self._where, self._where_pid = fresh, os.getpid()
        return self._where

    def _pass_position(self, worker: int, in_worker: bool) -> tuple[int, int]:
        """(epoch, start batch) of the pass this worker begins: resumed at `start`
        in the first pass after the seek; later passes (no set_epoch between) are
        the whole epoch again."""
        with self._where_lock:
            where = self._own_where(in_worker)
            slot = 2 + worker % _PASS_SLOTS
            begun = int(where[slot])
            where[slot] = begun + 1
            epoch, start = int(where[0]), int(where[1]) if begun == 0 else 0
        self._epoch = epoch
        return epoch, start

    def state_dict(self, batches_consumed: int) -> dict[str, Any]:
        """The Loader state for this epoch after ``batches_consumed`` batches."""
        return self._state(check_int("batches_consumed", batches_consumed, (0, self._len + 1)))

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_dataset"] = None  # the C++ catalog is rebuilt in the worker
        state["_caches"] = None
        state["_leftovers"] = None
        state["_next"] = None
        del state["_where_lock"]
        if mp_context.get_spawning_popen() is None:
            # A copy: its own array (made by __setstate__) and its own fanout
            # token, so that it and the original are two datasets.
            state["_where"] = list(self._where[:])
        else:
            # Shared with the processes this one starts (DataLoader workers).
            with self._where_lock:
                state["_where"] = self._own_where(torch.utils.data.get_worker_info() is not None)
            state["_where_pid"] = self._where_pid
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._where_lock = threading.Lock()
        if isinstance(self._where, list):
            values = self._where
            self._where = multiprocessing.RawArray("q", 2 + _PASS_SLOTS)
            self._where[:] = values
            self._where_pid = os.getpid()
            self._token = secrets.randbits(63)

    def _own_dataset(self) -> _core.Dataset:
        # After a fork (or unpickling) read the footers anew rather than reuse the
        # parent's filesystem handles; the fingerprint proves it is the same data.
        if self._dataset is None or self._pid != os.getpid():
            dataset = self._reopened()
            if self._pid != os.getpid():
                abandon(self._caches)  # the parent's (its locks may be held there)
            self._dataset, self._pid = dataset, os.getpid()
            self._caches = self._leftovers = self._next = None
        return self._dataset

    def __iter__(self) -> Iterator[dict[str, Any]]:
        info = torch.utils.data.get_worker_info()
        workers, worker = (info.num_workers, info.id) if info is not None else (1, 0)
        # With one engine for all workers (below) only worker 0's count decides
        # the pass's position; the others take what it runs.
        epoch, start = self._pass_position(worker, info is not None)
        shm = _shm.sender() if info is not None else None
        if shm is not None and workers > 1:
            # One engine, in worker 0, for every worker (see _fanout).
            self._passes += 1
            name = _fanout.address(self._token, info.seed - worker, self._passes)  # type: ignore[union-attr]
            if worker == 0:
                leader = _fanout.Leader(shm, workers, name, self._handshake())
                make = self._engine_maker(shm, 1, 0, self._settings.num_threads, 4 * workers)
                engine, watch = self._pass_engine(make, True, epoch, start)
                raw = watch(leader.batches(engine))
            else:
                raw = _fanout.follow(name, worker, self._handshake())
            for arrays in raw:
                if worker != 0:  # worker 0's dealer does it for every batch
                    shm.after_batch()  # takes back this worker's copies (see _shm)
                batch = deliver(arrays, self._settings)
                # A transform's tuple or list (numpy output) goes on as it is, as
                # with one worker: dict() of it raised, or made another batch.
                yield _shm.SharedBatch(batch) if type(batch) is dict else batch
            return
        threads = self._settings.num_threads
        if workers > 1 and not self._threads_given:
            threads = max(1, threads // workers)
        make = self._engine_maker(shm, workers, worker, threads, 0)
        if workers > 1:  # an engine per worker (no memfd_create): none starts early
            engine, watch = make(epoch, start)(), _unwatched
        else:
            engine, watch = self._pass_engine(make, info is not None, epoch, start)
        if shm is None:
            yield from watch(iterate(engine, self._settings))
            return
        for batch in watch(iterate(engine, self._settings)):
            shm.after_batch()
            yield _shm.SharedBatch(batch) if type(batch) is dict else batch

    def _handshake(self) -> tuple[Any, ...]:
        """What the workers of one pass must agree on (the epoch and start are
        worker 0's: a worker whose slot took no part in the resumed pass, when an
        earlier pass had fewer workers, follows it all the same)."""
        return (self._token, self._fingerprint)

    def _pass_engine(
        self, make: EngineMaker, in_worker: bool, epoch: int, start: int
    ) -> tuple[_core.Engine, Callable[[Iterator[Any]], Iterator[Any]]]:
        """This pass's engine (the one started early, if it is this pass's), and what
        watches its batches to start the next pass's engine early.  Passes run by
        one engine only; in a DataLoader worker from its second pass on, since only
        a persistent worker runs another."""
        if self._next is None:
            self._next = NextPass()
        next_pass = self._next
        predicted = next_pass.begin(epoch, self._seeked)
        self._seeked = False
        engine = next_pass.take(epoch, start, self._settings.extra)
        if engine is None:
            engine = make(epoch, start)()
        if in_worker and next_pass.passes < 2:
            return engine, _unwatched
        settings = self._settings
        return engine, lambda batches: next_pass.watch(batches, engine, predicted, settings, make)

    def _engine_maker(
        self, shm: _shm.Sender | None, stride: int, offset: int, threads: int, more: int
    ) -> EngineMaker:
        """Makes the engine of (epoch, start batch) when called (the dataset and the
        caches are opened now, on this thread)."""
        dataset = self._own_dataset()
        if self._caches is None:
            self._caches = Caches.open(self._settings.cache, dataset, self._settings.remote_timeout)
        if self._leftovers is None:
            self._leftovers = _core.EngineLeftovers()
        caches, leftovers, settings = self._caches, self._leftovers, self._settings
        largest = self._largest_batch
        outputs = self.outputs

        def maker(epoch: int, start: int) -> Callable[[], _core.Engine]:
            options = settings.engine_options(
                start_batch=start, offset=offset, stride=stride, threads=threads
            )
            caches.apply(options, settings.cache)
            options.leftovers = leftovers
            if shm is not None:
                # Room for the engine's ready batches and those on their way to the
                # main process (`more` for other workers); the slabs grow when the
                # engine misses them.
                held = threads * (settings.prefetch + 1) + 8 + more
                options.output_arena = shm.arena(batch_bytes(outputs, largest), held)
            return functools.partial(start_engine, dataset, settings.plan_options(epoch), options)

        return maker


def _unwatched(batches: Iterator[Any]) -> Iterator[Any]:
    return batches
