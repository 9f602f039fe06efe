"""Batches between processes without copies: DataLoader workers and the main
process (private).

PyTorch sends each tensor a worker yields through a fresh shared-memory segment:
the worker copies the tensor into new pages, passes a file descriptor over a
socket, and the main process maps the segment and unmaps it when the tensor is
freed.  For a fast engine that transport is the bottleneck: per 4 MiB batch it
costs the copy, the page faults of 1,024 fresh pages on both sides, a socket
round trip, and an mmap/munmap pair.

Here the process that runs an engine (a *producer*: a DataLoader worker) has the
engine write its batches straight into a few shared-memory slabs
(``memfd_create``; an ``OutputArena`` over them).  An array that lies in those
slabs is pickled as a reference (slab, offset, shape, slot).  A receiving process
maps each slab once, builds arrays over the mapping and, when an array is freed,
clears the array's byte in the producer's control segment.  The producer keeps
each sent array (and so its arena block) until every byte it gave out is clear.

A reference can be handed on once: worker 0 decodes for the other workers
(``_fanout``), and they pass what they received on to the main process.  Such a
reference carries two slots, one for the worker and one for the main process.

Control segment bytes: ``[0]`` the main process has mapped the control segment;
``[1 + s]`` it has mapped slab ``s``; ``[SLOTS + i]`` slot ``i`` is held (set by
the producer before sending, cleared by its one holder).  Each byte has one
writer at a time.  A message to the main process carries a duplicate of a
segment's descriptor until the main process marks the segment mapped, so a lost
message loses nothing.

An array outside the slabs (a Python transform's output, or a batch the engine
made in its own memory when the slabs were full) is copied once into a *copy
slab* of the sending process, reused once freed: one memcpy into pages mapped
already.  Anything else (not contiguous, a subclass, no free slot or slab, no
``memfd_create``) is pickled the usual way.  Ordering: a holder clears a
slot after the array's memory is released (torch and CPython release through an
acquire-release reference count or the GIL), so its reads of the data come
before the producer can reuse the block.
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

import numpy as np

from . import _core
from ._device import PinnedArena

MAX_SLABS = 255
SLOTS = 256  # where the slot bytes start in the control segment
SLOT_COUNT = 1 << 16
CONTROL_BYTES = SLOTS + SLOT_COUNT
COPY_GRAIN = 1 << 16  # copy slabs are made in multiples of this

Key = tuple[int, int]  # (producer pid, random token)


def _segment(size: int, name: str) -> tuple[int, mmap.mmap]:
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    try:
        os.ftruncate(fd, size)
        return fd, mmap.mmap(fd, size)
    except BaseException:
        os.close(fd)
        raise


def _address(buffer: Any) -> int:
    return int(np.frombuffer(buffer, dtype=np.uint8).ctypes.data)


def _eligible(value: Any) -> tuple[str, int, int] | None:
    """(kind, address, bytes) of a plain contiguous CPU tensor or ndarray."""
    if type(value) is np.ndarray:
        if value.flags.c_contiguous and value.nbytes > 0 and not value.dtype.hasobject:
            return "n", int(value.ctypes.data), int(value.nbytes)
        return None
    import torch

    if (
        type(value) is torch.Tensor
        and value.device.type == "cpu"
        and not value.requires_grad
        and value.is_contiguous()
        and value.numel() > 0
    ):
        return "t", int(value.data_ptr()), value.numel() * value.element_size()
    return None


class _Slab:
    __slots__ = ("address", "fd", "map", "size")

    def __init__(self, size: int) -> None:
        self.fd, self.map = _segment(size, "shardfeed-batches")
        self.size = size
        self.address = _address(self.map)


class Sender:
    """A producer's side: its slabs, its control segment and the arrays it sent."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.key: Key = (self.pid, secrets.randbits(63))
        self.control_fd, self._control = _segment(CONTROL_BYTES, "shardfeed-control")
        self._flags = memoryview(self._control)
        self._slabs: list[_Slab] = []
        self._lock = threading.Lock()
        # slot -> (array or None, second slot or -1, copy slab or -1)
        self._sent: dict[int, tuple[Any, int, int]] = {}
        self._free = list(range(SLOT_COUNT - 1, -1, -1))
        self._copies: set[int] = set()  # copy slabs (see _copy) free for the next copy
        self._arena: PinnedArena | None = None

    def arena(self, batch_bytes: int, batches: int) -> _core.OutputArena:
        """The engine's output arena: room for `batches` batches to start with."""
        if self._arena is None:
            self._arena = PinnedArena(batch_bytes, batches, make_slab=self._new_slab)
        return self._arena.core

    def _new_slab(self, size: int) -> tuple[int, Any]:
        slab = _Slab(size)
        self._slabs.append(slab)
        return slab.address, slab

    def after_batch(self) -> None:
        """Takes back what every holder freed; grows the slabs after misses."""
        with self._lock:
            flags = self._flags
            done = [
                slot
                for slot, (_, other, _) in self._sent.items()
                if not flags[SLOTS + slot] and (other < 0 or not flags[SLOTS + other])
            ]
            for slot in done:
                _, other, copy = self._sent.pop(slot)
                self._free.append(slot)
                if other >= 0:
                    self._free.append(other)
                if copy >= 0:
                    self._copies.add(copy)
        if self._arena is not None and len(self._slabs) < MAX_SLABS:
            self._arena.after_batch()

    def release(self, slots: list[int]) -> None:
        """Clears slots whose holder will never see them (a follower that left)."""
        for slot in slots:
            self._flags[SLOTS + slot] = 0

    def _copy(self, value: Any, nbytes: int) -> int:
        """A copy slab (one array's worth, reused) holding a copy of `value`, for an
        array outside the slabs (a transform's output): one memcpy into pages that
        are mapped already, where torch's way makes a segment per array.  -1 when
        there is no room for another slab."""
        fits = [i for i in self._copies if nbytes <= self._slabs[i].size <= 2 * nbytes + COPY_GRAIN]
        if fits:
            index = min(fits, key=lambda i: self._slabs[i].size)
            self._copies.discard(index)
        elif len(self._slabs) < MAX_SLABS:
            index = len(self._slabs)
            self._slabs.append(_Slab(-(-nbytes // COPY_GRAIN) * COPY_GRAIN))
        else:
            return -1
        target = self._slabs[index].map
        if isinstance(value, np.ndarray):
            np.copyto(np.frombuffer(target, dtype=value.dtype, count=value.size), value.ravel())
        else:
            import torch

            torch.frombuffer(target, dtype=value.dtype, count=value.numel()).copy_(value.view(-1))
        return index

    def _descriptors(self, indices: list[int], told: set[int] | None) -> tuple[dict[int, Any], Any]:
        """Duplicates of the descriptors of the slabs (and control segment) the
        receiver does not have yet: ({slab: (size, DupFd)}, DupFd or None)."""
        slabs: dict[int, Any] = {}
        for index in indices:
            if index in slabs:
                continue
            if told is None and self._flags[1 + index]:
                continue
            if told is not None and index in told:
                continue
            slabs[index] = (self._slabs[index].size, reduction.DupFd(self._slabs[index].fd))
        control = None
        has = (self._flags[0] if told is None else -1 in told) or not indices
        if not has:
            control = reduction.DupFd(self.control_fd)
        return slabs, control

    def _find(self, address: int, nbytes: int) -> int:
        for i, slab in enumerate(self._slabs):
            if slab.address <= address and address + nbytes <= slab.address + slab.size:
                return i
        return -1

    def reduce(self, batch: dict[str, Any], told: set[int] | None = None) -> tuple[Any, ...]:
        """A pickle of `batch` whose arrays in the slabs are references.

        ``told is None``: for the main process.  Otherwise for a worker that will
        hand the arrays on (two slots each); ``told`` holds the slabs whose
        descriptors that worker already has, and is updated.
        """
        with self._lock:
            items: list[tuple[str, Any]] = []
            taken: list[tuple[str, Any, tuple[str, int, int], int]] = []
            need = 1 if told is None else 2
            copies: dict[int, int] = {}  # position in taken -> copy slab
            for name, value in batch.items():
                found = _eligible(value)
                index = -1 if found is None else self._find(found[1], found[2])
                if found is None or len(self._free) < need * (len(taken) + 1):
                    index = -1
                elif index < 0 and told is None:
                    copy = self._copy(value, found[2])
                    if copy >= 0:
                        found, index = (found[0], self._slabs[copy].address, found[2]), copy
                        copies[len(taken)] = copy
                if found is None or index < 0:
                    items.append((name, ("obj", value)))
                else:
                    taken.append((name, value, found, index))
                    items.append((name, None))
            # Descriptors first: nothing below can fail once slots are taken.
            try:
                slabs, control = self._descriptors([index for _, _, _, index in taken], told)
            except BaseException:
                self._copies.update(copies.values())
                raise
            refs = iter(enumerate(taken))
            for i, (name, spec) in enumerate(items):
                if spec is not None:
                    continue
                position, (_, value, (kind, address, nbytes), index) = next(refs)
                slot = self._free.pop()
                other = self._free.pop() if told is not None else -1
                self._flags[SLOTS + slot] = 1
                if other >= 0:
                    self._flags[SLOTS + other] = 1
                copy = copies.get(position, -1)
                self._sent[slot] = (None if copy >= 0 else value, other, copy)
                dtype = value.dtype if kind == "t" else value.dtype.str
                offset = address - self._slabs[index].address
                ref = (
                    kind,
                    self.key,
                    index,
                    offset,
                    nbytes,
                    dtype,
                    tuple(value.shape),
                    slot,
                    other,
                )
                items[i] = (name, ref)
            if told is not None:
                told.update(slabs)
                if control is not None:
                    told.add(-1)
        segments = {self.key: (control, slabs)}
        return (_rebuild if told is None else _rebuild_to_forward, (segments, items))


_SENDER: Sender | None = None


def sender() -> Sender | None:
    """This process's sender, made on first use; None where there is no
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
    """A batch in a worker; pickles its arrays in shared slabs as references."""

    # copy.copy (which DataLoader's default_convert uses) must not take the pickle path.
    def __copy__(self) -> SharedBatch:
        return SharedBatch(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return copy.deepcopy(dict(self), memo)

    def __reduce_ex__(self, protocol: Any) -> Any:
        try:
            return _reduce_for_main(self)
        except Exception:  # never lose a batch to the fast path: send it torch's way
            return (dict, (dict(self),))


# -- receiving ------------------------------------------------------------------------


class _Peer:
    """What this process has mapped of one producer's segments."""

    def __init__(self, key: Key) -> None:
        self.key = key
        self.control: memoryview | None = None
        self.control_fd = -1  # kept where references are handed on
        self.slabs: dict[int, tuple[memoryview, int, int]] = {}  # index -> (map, address, fd)
        self.live = 0  # arrays received from it and not yet freed

    def find(self, address: int, nbytes: int) -> tuple[int, int]:
        for index, (view, base, _) in self.slabs.items():
            if base <= address and address + nbytes <= base + len(view):
                return index, address - base
        return -1, 0

    def close(self) -> None:
        for fd in [self.control_fd] + [fd for _, _, fd in self.slabs.values()]:
            if fd >= 0:
                os.close(fd)
        self.control_fd = -1
        self.slabs = {i: (v, a, -1) for i, (v, a, _) in self.slabs.items()}


class _Region:
    """An array this process received that it may hand on (the second slot)."""

    __slots__ = ("__weakref__", "address", "forward", "nbytes", "peer", "sent", "slot")

    def __init__(self, peer: _Peer, slot: int, forward: int, address: int, nbytes: int) -> None:
        self.peer, self.slot, self.forward = peer, slot, forward
        self.address, self.nbytes, self.sent = address, nbytes, False

    def done(self) -> None:
        control = self.peer.control
        assert control is not None
        with _LOCK:
            if _REGIONS.get(self.address) is self:
                del _REGIONS[self.address]
            if not self.sent:
                control[SLOTS + self.forward] = 0
        control[SLOTS + self.slot] = 0
        _freed(self.peer.key)


# Arrays the main process received: through the slabs, or pickled.
RECEIVED = {"shared": 0, "pickled": 0}
_PEERS: dict[Key, _Peer] = {}
_REGIONS: dict[int, _Region] = {}  # address -> a received array this process may hand on
_LOCK = threading.RLock()  # re-entered when a collection runs a finalizer


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _forget_dead() -> None:
    """Forgets the producers that are gone (their arrays keep their own maps): a slab
    no array holds any more is then unmapped, its memory freed."""
    with _LOCK:
        for old in [k for k in _PEERS if not _alive(k[0])]:
            _PEERS.pop(old).close()


def _peer(key: Key) -> _Peer:
    peer = _PEERS.get(key)
    if peer is None:
        _forget_dead()
        peer = _PEERS[key] = _Peer(key)
    return peer


def _map(dup: Any, size: int, keep: bool) -> tuple[memoryview, int]:
    fd = dup.detach()
    try:
        return memoryview(mmap.mmap(fd, size)), fd
    finally:
        if not keep:
            os.close(fd)


def _receive(
    segments: dict[Key, tuple[Any, dict[int, Any]]], items: list[tuple[str, Any]], forward: bool
) -> dict[str, Any]:
    import torch

    out: dict[str, Any] = {}
    if not _NUMPY:
        _NUMPY.update(_numpy_dtypes())
    with _LOCK:
        for key, (control, slabs) in segments.items():
            peer = _peer(key)
            if control is not None:
                if peer.control is None:
                    peer.control, fd = _map(control, CONTROL_BYTES, forward)
                    peer.control_fd = fd if forward else -1
                    if not forward:
                        peer.control[0] = 1
                else:
                    os.close(control.detach())  # sent before the producer saw our mark
            for index, (size, dup) in slabs.items():
                if index in peer.slabs:
                    os.close(dup.detach())
                    continue
                view, fd = _map(dup, size, forward)
                peer.slabs[index] = (view, _address(view), fd if forward else -1)
                if not forward and peer.control is not None:
                    peer.control[1 + index] = 1
        for name, spec in items:
            if spec[0] == "obj":
                RECEIVED["pickled"] += int(isinstance(spec[1], (np.ndarray, torch.Tensor)))
                out[name] = spec[1]
                continue
            kind, key, index, offset, nbytes, dtype, shape, slot, other = spec
            peer = _PEERS[key]
            assert peer.control is not None
            slab = peer.slabs[index][0]
            np_dtype = np.dtype(dtype) if kind == "n" else _NUMPY.get(dtype)
            owner: Any
            if np_dtype is not None:
                # The flat array is what every view and tensor of it keeps alive
                # (numpy stops collapsing bases at it: its own base is no array).
                owner = np.frombuffer(slab, np_dtype, nbytes // np_dtype.itemsize, offset)
                array: Any = owner.reshape(shape)
                if kind == "t":
                    array = torch.from_numpy(array)
            else:  # a dtype numpy lacks (bfloat16): the tensor keeps the memoryview
                owner = slab[offset : offset + nbytes]
                array = torch.frombuffer(owner, dtype=dtype).view(shape)
            if other >= 0 and forward:
                address = peer.slabs[index][1] + offset
                region = _Region(peer, slot, other, address, nbytes)
                _REGIONS[address] = region
                weakref.finalize(owner, region.done)
            else:
                weakref.finalize(owner, _clear, peer.control, slot, peer.key)
            RECEIVED["shared"] += 1
            peer.live += 1
            out[name] = array
    return out


def _numpy_dtypes() -> dict[Any, np.dtype[Any]]:
    """torch dtype -> numpy dtype, for those torch.from_numpy takes back."""
    import torch

    out: dict[Any, np.dtype[Any]] = {}
    for name in ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32"):
        out[getattr(torch, name)] = np.dtype(name)
    out[torch.float64] = np.dtype("float64")
    out[torch.complex64] = np.dtype("complex64")
    out[torch.complex128] = np.dtype("complex128")
    for name in ("uint16", "uint32", "uint64"):  # torch >= 2.3
        if hasattr(torch, name):
            out[getattr(torch, name)] = np.dtype(name)
    return out


_NUMPY: dict[Any, np.dtype[Any]] = {}


def _clear(control: memoryview, slot: int, key: Key) -> None:
    control[SLOTS + slot] = 0
    _freed(key)


def _freed(key: Key) -> None:
    """One of producer `key`'s arrays was freed.  A DataLoader's workers exit at the end
    of its pass, or when it is dropped: once its last array is gone, a producer that is
    gone too is forgotten, and its slabs unmapped (they stayed mapped, their memory held,
    until another DataLoader's worker sent a batch).  By key, not the peer itself: an
    array kept long keeps its own slab mapped, not every slab of a producer forgotten."""
    with _LOCK:
        peer = _PEERS.get(key)
        if peer is None:  # forgotten already
            return
        peer.live -= 1
        if peer.live == 0:
            _forget_dead()


def _rebuild(segments: dict[Key, Any], items: list[tuple[str, Any]]) -> dict[str, Any]:
    return _receive(segments, items, forward=False)


def _rebuild_to_forward(segments: dict[Key, Any], items: list[tuple[str, Any]]) -> dict[str, Any]:
    return _receive(segments, items, forward=True)


def _reduce_for_main(batch: dict[str, Any]) -> tuple[Any, ...]:
    """Own arrays through this process's sender; received ones handed on."""
    current = _SENDER if _SENDER is not None and _SENDER.pid == os.getpid() else None
    handed: list[tuple[str, Any]] = []
    rest: dict[str, Any] = {}
    segments: dict[Key, tuple[Any, dict[int, Any]]] = {}
    with _LOCK:
        for name, value in batch.items():
            found = _eligible(value)
            region = None if found is None else _REGIONS.get(found[1])
            if found is None or region is None or region.sent or found[2] > region.nbytes:
                rest[name] = value
                continue
            peer = region.peer
            assert peer.control is not None
            index, offset = peer.find(found[1], found[2])
            control, slabs = segments.setdefault(peer.key, (None, {}))
            if control is None and not peer.control[0]:
                segments[peer.key] = (reduction.DupFd(peer.control_fd), slabs)
            if index not in slabs and not peer.control[1 + index]:
                slabs[index] = (len(peer.slabs[index][0]), reduction.DupFd(peer.slabs[index][2]))
            region.sent = True
            dtype = value.dtype if found[0] == "t" else value.dtype.str
            ref = (found[0], peer.key, index, offset, found[2], dtype, tuple(value.shape))
            handed.append((name, (*ref, region.forward, -1)))
    if current is None and not handed:
        return (dict, (dict(batch),))
    items: list[tuple[str, Any]] = []
    if current is not None and rest:
        own = current.reduce(rest)
        segments.update(own[1][0])
        items.extend(own[1][1])
    else:
        items.extend((name, ("obj", value)) for name, value in rest.items())
    order = {name: i for i, name in enumerate(batch)}
    items = sorted(items + handed, key=lambda item: order[item[0]])
    return (_rebuild, (segments, items))
