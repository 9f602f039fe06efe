"""Batches from DataLoader workers to the main process without a copy (private).

PyTorch sends each tensor a worker yields through a fresh shared-memory segment:
the worker copies the tensor into new pages, passes a file descriptor over a
socket, and the main process maps the segment and unmaps it when the tensor is
freed.  For a fast engine that transport is the bottleneck: per 4 MiB batch it
costs the copy, the page faults of 1,024 fresh pages on both sides, a socket
round trip, and an mmap/munmap pair.

Here a worker's engine writes its batches straight into a few shared-memory
slabs (``memfd_create``; an ``OutputArena`` over them).  A batch whose tensors
lie in those slabs is pickled as (slab, offset, shape, ...) references.  The main
process maps each slab once, builds tensors over the mapping and, when a tensor
is freed, clears that tensor's byte in a control segment the two share.  The
worker keeps each sent tensor (and so its arena block) until its byte is clear.

Protocol, per worker (a ``Sender``; its key is ``(pid, token)``):

* control segment bytes: ``[0]`` the main process has mapped the control
  segment; ``[1 + s]`` it has mapped slab ``s``; ``[SLOTS + i]`` slot ``i``
  holds a tensor the main process has not freed (written 1 by the worker before
  sending, 0 by the main process).  Each byte has one writer at a time.
* a message carries a duplicate of a segment's descriptor until the main process
  says (its byte) that it has the mapping, so a lost message loses nothing.

Anything that does not fit (a tensor outside the slabs, not contiguous, a
subclass, no free slot, no ``memfd_create``) goes the usual way, pickled by
torch.  Ordering: the main process clears a slot after the tensor's storage is
released (an acquire-release reference count in torch), so its reads of the
data come before the worker can reuse the block.
"""

from __future__ import annotations

import copy
import mmap
import os
import secrets
import threading
import weakref
from multiprocessing import reduction
from typing import Any

from . import _core
from ._device import PinnedArena

MAX_SLABS = 255
SLOTS = 256  # where the slot bytes start in the control segment
SLOT_COUNT = 1 << 16
CONTROL_BYTES = SLOTS + SLOT_COUNT


def _segment(size: int, name: str) -> tuple[int, mmap.mmap]:
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    try:
        os.ftruncate(fd, size)
        return fd, mmap.mmap(fd, size)
    except BaseException:
        os.close(fd)
        raise


class _Slab:
    __slots__ = ("address", "fd", "map", "size")

    def __init__(self, size: int) -> None:
        import numpy as np

        self.fd, self.map = _segment(size, "shardfeed-batches")
        self.size = size
        self.address = int(np.frombuffer(self.map, dtype=np.uint8).ctypes.data)


class Sender:
    """A worker's side: the slabs its engine's arena holds and the tensors sent."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.key = (self.pid, secrets.randbits(63))
        self.control_fd, self._control = _segment(CONTROL_BYTES, "shardfeed-control")
        self._flags = memoryview(self._control)
        self._slabs: list[_Slab] = []
        self._lock = threading.Lock()
        self._sent: dict[int, Any] = {}  # slot -> the tensor the main process may use
        self._free = list(range(SLOT_COUNT - 1, -1, -1))
        self._arena: PinnedArena | None = None

    def arena(self, batch_bytes: int, batches: int) -> _core.OutputArena:
        """The engine's output arena: room for `batches` batches to start with."""
        if self._arena is None:
            self._arena = PinnedArena(batch_bytes, batches, make_slab=self._new_slab)
        return self._arena.core

    def _new_slab(self, size: int) -> tuple[int, Any]:
        if len(self._slabs) >= MAX_SLABS:
            raise OSError("no more shared-memory slabs")
        slab = _Slab(size)
        self._slabs.append(slab)
        return slab.address, slab

    def after_batch(self) -> None:
        """Takes back what the main process freed; grows the slabs after misses."""
        with self._lock:
            flags = self._flags
            done = [slot for slot in self._sent if not flags[SLOTS + slot]]
            for slot in done:
                del self._sent[slot]
                self._free.append(slot)
        if self._arena is not None and len(self._slabs) < MAX_SLABS:
            self._arena.after_batch()

    def _find(self, address: int, nbytes: int) -> int:
        for i, slab in enumerate(self._slabs):
            if slab.address <= address and address + nbytes <= slab.address + slab.size:
                return i
        return -1

    def reduce(self, batch: dict[str, Any]) -> tuple[Any, ...]:
        """The pickle of `batch`: references for tensors in the slabs."""
        import torch

        with self._lock:
            found: list[tuple[str, Any, int, int]] = []  # name, tensor, slab, bytes
            for name, value in batch.items():
                index = -1
                if (
                    type(value) is torch.Tensor
                    and value.device.type == "cpu"
                    and not value.requires_grad
                    and value.is_contiguous()
                    and value.numel() > 0
                    and len(found) < len(self._free)
                ):
                    nbytes = value.numel() * value.element_size()
                    index = self._find(int(value.data_ptr()), nbytes)
                    found.append((name, value, index, nbytes))
                else:
                    found.append((name, value, -1, 0))
            # Descriptors first: nothing below can fail once slots are taken.
            slabs: dict[int, Any] = {}
            for _, _, index, _ in found:
                if index >= 0 and index not in slabs and not self._flags[1 + index]:
                    slabs[index] = (self._slabs[index].size, reduction.DupFd(self._slabs[index].fd))
            control = None if self._flags[0] else reduction.DupFd(self.control_fd)
            items: list[tuple[str, Any]] = []
            for name, value, index, nbytes in found:
                if index < 0:
                    items.append((name, ("obj", value)))
                    continue
                slot = self._free.pop()
                self._flags[SLOTS + slot] = 1
                self._sent[slot] = value
                offset = int(value.data_ptr()) - self._slabs[index].address
                spec = (index, offset, nbytes, value.dtype, value.shape, slot)
                items.append((name, ("shm", spec)))
        return (_rebuild, (self.key, control, slabs, items))


_SENDER: Sender | None = None


def sender() -> Sender | None:
    """This worker process's sender, made on first use; None where there is no
    memfd_create (or it fails): batches then go torch's way."""
    global _SENDER
    if _SENDER is not None and _SENDER.pid == os.getpid():
        return _SENDER
    _SENDER = None
    if not hasattr(os, "memfd_create"):
        return None
    try:
        _SENDER = Sender()
    except OSError:
        return None
    return _SENDER


class SharedBatch(dict):  # type: ignore[type-arg]
    """A batch in a worker; pickles its slab tensors as references (see above)."""

    # copy.copy (which DataLoader's default_convert uses) must not take the pickle path.
    def __copy__(self) -> SharedBatch:
        return SharedBatch(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return copy.deepcopy(dict(self), memo)

    def __reduce_ex__(self, protocol: Any) -> Any:
        current = _SENDER
        if current is None or current.pid != os.getpid():
            return (dict, (dict(self),))
        try:
            return current.reduce(self)
        except Exception:  # never lose a batch to the fast path: send it torch's way
            return (dict, (dict(self),))


# The main process's side.


class _Peer:
    """What the main process has mapped of one worker's segments."""

    def __init__(self) -> None:
        self.control: memoryview | None = None
        self.slabs: dict[int, memoryview] = {}


# Tensors the main process received: through the slabs, or pickled by torch.
RECEIVED = {"shared": 0, "pickled": 0}
_PEERS: dict[tuple[int, int], _Peer] = {}
_PEERS_LOCK = threading.Lock()


def _map(dup: Any, size: int) -> memoryview:
    fd = dup.detach()
    try:
        return memoryview(mmap.mmap(fd, size))
    finally:
        os.close(fd)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _peer(key: tuple[int, int]) -> _Peer:
    with _PEERS_LOCK:
        peer = _PEERS.get(key)
        if peer is None:
            # Forget the workers that are gone (their tensors keep their own maps).
            for old in [k for k in _PEERS if not _alive(k[0])]:
                del _PEERS[old]
            peer = _PEERS[key] = _Peer()
        return peer


def _release(control: memoryview, slot: int) -> None:
    control[SLOTS + slot] = 0


def _rebuild(
    key: tuple[int, int], control: Any, slabs: dict[int, Any], items: list[tuple[str, Any]]
) -> dict[str, Any]:
    import torch

    peer = _peer(key)
    if control is not None:
        if peer.control is None:
            peer.control = _map(control, CONTROL_BYTES)
            peer.control[0] = 1
        else:
            os.close(control.detach())
    for index, (size, dup) in slabs.items():
        if index in peer.slabs:
            os.close(dup.detach())  # a duplicate sent before the worker saw our mark
            continue
        peer.slabs[index] = _map(dup, size)
        if peer.control is not None:
            peer.control[1 + index] = 1
    out: dict[str, Any] = {}
    for name, (kind, value) in items:
        if kind == "obj":
            RECEIVED["pickled"] += isinstance(value, torch.Tensor)
            out[name] = value
            continue
        RECEIVED["shared"] += 1
        index, offset, nbytes, dtype, shape, slot = value
        view = peer.slabs[index][offset : offset + nbytes]
        assert peer.control is not None
        weakref.finalize(view, _release, peer.control, slot)
        out[name] = torch.frombuffer(view, dtype=dtype).view(shape)
    return out
