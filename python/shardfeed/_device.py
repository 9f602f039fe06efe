"""pin_memory and device: page-locked batch buffers, and a host-to-device copy one
batch ahead (private)."""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from . import _core
from ._check import check_bool, check_str
from ._errors import InvalidArgumentError


def _cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def _why_no_cuda() -> str:
    import torch

    build = torch.version.cuda
    return f"torch.cuda.is_available() is False (torch {torch.__version__}, " + (
        f"built for CUDA {build}: no usable GPU or driver)" if build else "a CPU-only build)"
    )


def check_device(pin_memory: Any, device: Any, output: str) -> tuple[bool, str | None]:
    """(pin_memory, device) after the checks; ``device`` implies pinned buffers."""
    pin = check_bool("pin_memory", pin_memory)
    if type(device).__module__ == "torch" and type(device).__name__ == "device":
        device = str(device)  # a torch.device, as PyTorch code passes one: "cuda:1"
    name = None if device is None else check_str("device", device)
    if not pin and name is None:
        return False, None
    if name is not None and re.fullmatch(r"cpu(:\d+)?", name.strip()):
        name = None  # host memory, where every output is: pin_memory alone decides
        if not pin:
            return False, None
    setting = "pin_memory=True" if name is None else f"device={name!r}"
    if output != "torch":
        raise InvalidArgumentError(f"{setting} needs output='torch', got output={output!r}")
    if name is not None:
        import torch

        try:
            parsed = torch.device(name)
        except (RuntimeError, ValueError):
            parsed = None
        kind = "" if parsed is None else parsed.type
        if kind == "cpu":
            return pin and _require_cuda("pin_memory=True"), None
        if kind != "cuda":
            raise InvalidArgumentError(
                f"device must be 'cpu' or a CUDA device ('cuda', 'cuda:1', ...), got {name!r}"
            )
        _require_cuda(setting)
        count = int(torch.cuda.device_count())
        if parsed is not None and parsed.index is not None and parsed.index >= count:
            raise InvalidArgumentError(
                f"{setting}: this process sees {count} CUDA device(s), "
                f"numbered 0 to {count - 1} (CUDA_VISIBLE_DEVICES renumbers them)"
            )
        return True, name
    return _require_cuda(setting), name


def _require_cuda(setting: str) -> bool:
    if not _cuda_available():
        raise InvalidArgumentError(
            f"{setting}: page-locked memory and copies to the GPU need CUDA, and "
            f"{_why_no_cuda()}; leave the setting out on a machine without a GPU"
        )
    return True


def _pinned_slab(size: int) -> tuple[int, Any]:
    """(address, owner) of `size` page-locked bytes from torch's CUDA host allocator."""
    import torch

    slab = torch.empty(size, dtype=torch.uint8, pin_memory=True)
    return int(slab.data_ptr()), slab


MIN_SLAB = 1 << 20  # bytes of the first slab, at least


class PinnedArena:
    """Page-locked slabs that the engine's batch buffers come from (or, with
    another ``make_slab``, shared-memory ones: see ``_shm``).

    Starts with room for the batches the engine may hold ready (estimated from
    the outputs; variable-length lists count 16 elements a row) and doubles, up to
    ``limit_factor`` times that, when the engine had to take a buffer from its own
    (pageable) pool; such batches still arrive, only not pinned
    (``stats()["pinned"]["misses"]``).
    """

    def __init__(
        self,
        batch_bytes: int,
        batches: int,
        limit_factor: int = 4,
        make_slab: Callable[[int], tuple[int, Any]] | None = None,
    ) -> None:
        self.core = _core.OutputArena()
        self._make_slab = make_slab
        first = max(MIN_SLAB, batch_bytes * batches)
        self._limit = first * limit_factor
        self._misses = 0
        self._grow(first)

    def _grow(self, size: int) -> None:
        address, owner = (self._make_slab or _pinned_slab)(size)
        self.core.add_slab(address, size, owner)

    def after_batch(self) -> None:
        """Grows the arena when the engine missed it since the last call."""
        stats = self.core.stats()
        if stats["misses"] == self._misses:
            return
        self._misses = int(stats["misses"])
        room = self._limit - int(stats["bytes"])
        if room > 0:
            self._grow(min(room, max(int(stats["bytes"]), int(stats["missed_bytes"]))))

    def stats(self) -> dict[str, int]:
        return {k: int(v) for k, v in self.core.stats().items()}


def batch_bytes(outputs: Sequence[tuple[str, str, list[int]]], batch_size: int) -> int:
    """Bytes of one batch's buffers (64-byte aligned each)."""
    import numpy as np

    total = 0
    for _, dtype, shape in outputs:
        per_row = np.dtype(dtype).itemsize * math.prod(16 if d < 0 else d for d in shape)
        total += (batch_size * per_row + 63) // 64 * 64
    return total


def to_device(batches: Iterator[dict[str, Any]], device: str) -> Iterator[dict[str, Any]]:
    """Copies each batch to `device` on a side stream, one batch ahead: the copy of
    batch k + 1 is issued before batch k is yielded, so it overlaps the step on k.
    The consumer's stream waits for a batch's copy before using it; the host buffers
    stay referenced until their copy is done (the engine reuses pinned memory)."""
    import torch

    dev = torch.device(device)
    side = torch.cuda.Stream(dev)  # type: ignore[no-untyped-call]
    in_flight: deque[tuple[Any, dict[str, Any]]] = deque()  # (event, host batch)

    def issue(host: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        with torch.cuda.stream(side):
            out = {
                k: v.to(dev, non_blocking=True) if isinstance(v, torch.Tensor) else v
                for k, v in host.items()
            }
            done = torch.cuda.Event()  # type: ignore[no-untyped-call]
            done.record(side)
        in_flight.append((done, host))
        return out, done

    try:
        ahead = next(batches, None)
        pending = None if ahead is None else issue(ahead)
        while pending is not None:
            current, done = pending
            following = next(batches, None)
            pending = None if following is None else issue(following)
            stream = torch.cuda.current_stream(dev)
            stream.wait_event(done)
            for value in current.values():
                if isinstance(value, torch.Tensor):
                    value.record_stream(stream)  # allocated on the side stream, used on this one
            while in_flight and (len(in_flight) > 4 or in_flight[0][0].query()):
                in_flight[0][0].synchronize()
                in_flight.popleft()
            yield current
    finally:
        # A loop that breaks off (or an error) drops the batch copied ahead: its host
        # buffers go back to the engine only once the copy has read them.
        for done, _ in in_flight:
            done.synchronize()
        in_flight.clear()
