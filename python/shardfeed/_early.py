"""The next pass's engine, started while the current pass is served.

A pass's first batch waits for its first window's decode (with a window of the
whole of a small dataset, for all of it). So once the current engine has begun
to decode its last window (it books no more memory from then on, but for the
batches it builds) and the CPUs have been partly idle (the training step runs
elsewhere: see ``SpareCpu``), the predicted next pass's engine starts and
decodes its first window while this pass's batches are served. The two engines
share the memory limit (they are given the same ``EngineLeftovers``): until its
first batch is asked for, the new one decodes and builds only into the room the
current one leaves, so together they pass the limit only as one engine may, even
where one window is most of it. A pass that is not the one predicted (another
epoch, a resume, other debug settings) closes it and starts its own. The stream
is the same either way: an engine is a pure function of the epoch and the
settings. ``Loader`` and ``TorchDataset`` (the process that runs a pass's one
engine) both use ``NextPass``.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from . import _core
from ._options import Settings

T = TypeVar("T")

# (epoch, start batch) -> a callable that makes that pass's engine.
EngineMaker = Callable[[int, int], Callable[[], _core.Engine]]


def _machine_idle() -> tuple[int, int] | None:
    """(idle, total) jiffies of all CPUs from /proc/stat; None where there is none."""
    try:
        with open("/proc/stat", "rb") as f:
            fields = f.readline().split()
        values = [int(v) for v in fields[1:]]
        return values[3] + values[4], sum(values)  # idle + iowait
    except (OSError, ValueError, IndexError):
        return None


class SpareCpu:
    """Whether the CPUs had room for more work over the last ~50 ms: this process used
    less than 3/4 of the CPUs it may run on, and the machine was at least 1/4 idle.  A
    training step on an accelerator leaves them idle; one on the CPU does not, and
    there another engine's decode would only compete with it."""

    _PERIOD = 0.05

    def __init__(self) -> None:
        try:
            self._cpus = len(os.sched_getaffinity(0))
        except AttributeError:
            self._cpus = os.cpu_count() or 1
        self._last = self._sample()

    @staticmethod
    def _sample() -> tuple[float, float, tuple[int, int] | None]:
        return time.monotonic(), time.process_time(), _machine_idle()

    def spare(self) -> bool:
        wall0, cpu0, idle0 = self._last
        if time.monotonic() - wall0 < self._PERIOD:
            return False
        self._last = wall, cpu, idle = self._sample()
        if cpu - cpu0 > 0.75 * (wall - wall0) * self._cpus:
            return False
        if idle is None or idle0 is None or idle[1] <= idle0[1]:
            return True
        return (idle[0] - idle0[0]) >= 0.25 * (idle[1] - idle0[1])


class _EarlyEngine:
    """The engine of the predicted next pass, made on a thread of its own (making one
    plans the epoch and may write its first pages) while the current pass is served."""

    def __init__(self, epoch: int, extra: dict[str, Any], make: Callable[[], _core.Engine]) -> None:
        self.epoch = epoch
        self.extra = extra
        self.engine: _core.Engine | None = None
        self._make: Callable[[], _core.Engine] | None = make
        self.thread = threading.Thread(target=self._run, name="shardfeed-early-engine", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        make, self._make = self._make, None
        try:
            self.engine = None if make is None else make()
        except Exception:  # the pass that wants it makes its own, and raises
            self.engine = None

    def take(self) -> _core.Engine | None:
        self.thread.join()
        engine, self.engine = self.engine, None
        return engine


def may_start_early(settings: Settings) -> bool:
    """Whether a pass with these settings may start the next one early: with a
    memory plan.  With ``pin_memory`` (or a device) both engines take their batch
    buffers from the one pinned arena; what does not fit it comes from pageable
    memory, and the arena grows (see ``PinnedArena``).  ``extra["start_early"]``:
    False never, True without the CPU test."""
    if settings.extra.get("start_early") is False:
        return False
    return settings.memory_plan is not None


class NextPass:
    """The engine of the pass expected next, for one stream in one process."""

    def __init__(self) -> None:
        self._early: _EarlyEngine | None = None
        self._last_epoch: int | None = None
        self.passes = 0  # passes begun in this process

    def begin(self, epoch: int, seeked: bool) -> int:
        """A pass of `epoch` begins (`seeked`: set_epoch or load_state_dict was called
        in this process since the pass before); returns the epoch expected next: the
        next one when this one is one past the previous pass's (on a first pass: when
        it was set), else this one again."""
        last, self._last_epoch = self._last_epoch, epoch
        self.passes += 1
        advanced = seeked if last is None else epoch == last + 1
        return epoch + 1 if advanced else epoch

    def take(self, epoch: int, start: int, extra: dict[str, Any]) -> _core.Engine | None:
        """The early engine if it is this pass's (epoch, from its start, the same
        debug settings); any other is closed."""
        early, self._early = self._early, None
        if early is None:
            return None
        engine = early.take()
        if engine is None:
            return None
        if early.epoch == epoch and start == 0 and early.extra == extra:
            return engine
        engine.close()
        return None

    def close(self) -> None:
        """Closes the early engine, if any (waits for it to be made: milliseconds)."""
        early, self._early = self._early, None
        engine = None if early is None else early.take()
        if engine is not None:
            engine.close()

    def watch(
        self,
        batches: Iterator[T],
        engine: _core.Engine,
        predicted: int,
        settings: Settings,
        make: EngineMaker,
    ) -> Iterator[T]:
        """Yields `batches` (the pass of `engine`) and starts the engine of epoch
        `predicted` on the way, once the conditions above hold."""
        early = may_start_early(settings)
        # (Tests: extra["start_early"] True skips the CPU check.)
        spare = SpareCpu() if early and not settings.extra.get("start_early") else None
        for batch in batches:
            if early and engine.decodes_started and (spare is None or spare.spare()):
                early = False
                if self._early is None and predicted < 2**64:
                    self._early = _EarlyEngine(predicted, dict(settings.extra), make(predicted, 0))
            yield batch
