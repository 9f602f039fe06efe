"""Measuring helpers shared by the suite's children (project env and the Petastorm env).

Standard library only at import time (numpy is imported where it is used), so that both
interpreters can import it:

* ``drop_page_cache``: ``echo 3 > /proc/sys/vm/drop_caches`` (root), else
  ``posix_fadvise(DONTNEED)`` on each file; ``resident_fraction`` checks the result with
  ``mincore``;
* ``consume``: one pass over an iterable of batches that times how long the consumer
  waits for each batch, optionally sleeping a simulated training step per batch, and
  hashes the label sequence (the sample order);
* ``wait_quiet``: waits until the other processes on the machine leave the CPUs idle.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import hashlib
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import _common as common

# --------------------------------------------------------------------------------------
# The page cache
# --------------------------------------------------------------------------------------

_libc: Any = None


def _c() -> Any:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        _libc.mmap.restype = ctypes.c_void_p
        _libc.mmap.argtypes = [
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_long,
        ]
        _libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        _libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    return _libc


def resident_fraction(paths: Iterable[str]) -> float | None:
    """Share of the files' pages that sit in the page cache (``mincore``); None if unknown."""
    try:
        libc = _c()
    except OSError:
        return None
    page = os.sysconf("SC_PAGE_SIZE")
    total = resident = 0
    for path in paths:
        size = os.path.getsize(path)
        if size == 0:
            continue
        fd = os.open(path, os.O_RDONLY)
        try:
            addr = libc.mmap(None, size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
            if addr in (None, ctypes.c_void_p(-1).value):
                return None
            try:
                pages = (size + page - 1) // page
                vec = (ctypes.c_ubyte * pages)()
                if libc.mincore(ctypes.c_void_p(addr), size, vec) != 0:
                    return None
                resident += sum(b & 1 for b in vec)
                total += pages
            finally:
                libc.munmap(ctypes.c_void_p(addr), size)
        finally:
            os.close(fd)
    return resident / total if total else None


def drop_page_cache(paths: Sequence[str]) -> dict[str, Any]:
    """Evicts the files from the page cache; says how and how well.

    ``/proc/sys/vm/drop_caches`` (needs root; drops every clean page on the machine, so
    caches other than the dataset's, e.g. Petastorm's disk cache, go too), else
    ``posix_fadvise(POSIX_FADV_DONTNEED)`` on each file (only those files).  Returns
    ``{"method", "resident_before", "resident_after", "seconds"}``.
    """
    t0 = time.perf_counter()
    before = resident_fraction(paths)
    method = "none"
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        method = "drop_caches"
    except OSError:
        if hasattr(os, "posix_fadvise"):
            for path in paths:
                fd = os.open(path, os.O_RDONLY)
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)
            method = "fadvise_dontneed"
    after = resident_fraction(paths)
    return {
        "method": method,
        "resident_before": None if before is None else round(before, 4),
        "resident_after": None if after is None else round(after, 4),
        "seconds": round(time.perf_counter() - t0, 3),
    }


def warm_files(paths: Iterable[str], chunk: int = 16 << 20) -> float:
    """Reads every file once (page cache warm)."""
    t0 = time.perf_counter()
    buf = bytearray(chunk)
    for path in paths:
        with open(path, "rb", buffering=0) as f:
            while f.readinto(buf):
                pass
    return time.perf_counter() - t0


# --------------------------------------------------------------------------------------
# One pass
# --------------------------------------------------------------------------------------


@dataclass
class Pass:
    """What ``consume`` saw."""

    rows: int = 0
    batches: int = 0
    seconds: float = 0.0  # wall time of the pass, iterator creation included
    wait_seconds: float = 0.0  # time spent getting batches (iterator creation included)
    first_wait_seconds: float = 0.0  # until the first batch (start-up)
    checksum: float = 0.0
    order_hash: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else float("nan")

    @property
    def wait_fraction(self) -> float:
        """Consumer wait / wall time, start-up included."""
        return self.wait_seconds / self.seconds if self.seconds > 0 else float("nan")

    @property
    def wait_fraction_steady(self) -> float:
        """The same after the first batch (start-up left out)."""
        wall = self.seconds - self.first_wait_seconds
        return (self.wait_seconds - self.first_wait_seconds) / wall if wall > 0 else float("nan")

    def as_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "batches": self.batches,
            "seconds": round(self.seconds, 4),
            "rows_per_second": round(self.rows_per_second, 1),
            "wait_seconds": round(self.wait_seconds, 4),
            "first_wait_seconds": round(self.first_wait_seconds, 4),
            "wait_fraction": round(self.wait_fraction, 5),
            "wait_fraction_steady": round(self.wait_fraction_steady, 5),
            "order_hash": self.order_hash,
            **self.extra,
        }


def label_bytes(y: Any) -> bytes:
    """The label column of a batch as int64 bytes (torch tensor or numpy array)."""
    import numpy as np

    if hasattr(y, "numpy"):
        y = y.numpy()
    return np.ascontiguousarray(y, dtype=np.int64).tobytes()


def consume(
    make_iter: Callable[[], Iterable[dict[str, Any]]],
    step_seconds: float = 0.0,
    max_batches: int | None = None,
    hash_key: str = "label",
) -> Pass:
    """One pass: every batch's ``x`` and label are touched, the label sequence hashed.

    ``make_iter()`` is called inside the timed region (a DataLoader starts its workers
    there).  The time spent in ``make_iter`` and in each ``next()`` is the consumer's
    wait; with ``step_seconds`` the loop sleeps that long per batch (a training step
    that leaves the CPUs to the loader, as an accelerator step would).
    """
    h = hashlib.blake2b(digest_size=12)
    p = Pass()
    clock = time.perf_counter
    cpu0 = common.tree_cpu_seconds()
    t0 = clock()
    it = iter(make_iter())
    p.wait_seconds = clock() - t0  # the iterator's creation counts as waiting
    first = True
    acc = 0.0
    while True:
        t = clock()
        try:
            batch = next(it)
        except StopIteration:
            p.wait_seconds += clock() - t
            break
        now = clock()
        p.wait_seconds += now - t
        if first:
            p.first_wait_seconds = now - t0
            first = False
        x, y = batch["x"], batch[hash_key]
        p.rows += len(y)
        p.batches += 1
        acc += float(x[-1, -1]) + float(y[0])
        h.update(label_bytes(y))
        if step_seconds > 0:
            time.sleep(step_seconds)
        if max_batches is not None and p.batches >= max_batches:
            break
    p.seconds = clock() - t0
    p.checksum = acc
    p.order_hash = h.hexdigest()
    del it
    gc.collect()  # a DataLoader's workers exit here: their CPU time joins the children's
    p.extra["cpu_seconds"] = round(common.tree_cpu_seconds() - cpu0, 3)
    return p


def shardfeed_build() -> dict[str, Any] | None:
    """Which build of the extension was measured: its path, size, mtime and md5."""
    import datetime
    import importlib.util

    try:
        spec = importlib.util.find_spec("shardfeed._core")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    st = os.stat(spec.origin)
    with open(spec.origin, "rb") as f:
        digest = hashlib.md5(f.read()).hexdigest()
    mtime = datetime.datetime.fromtimestamp(st.st_mtime, datetime.timezone.utc)
    return {
        "path": spec.origin,
        "bytes": st.st_size,
        "md5": digest,
        "mtime": mtime.isoformat(timespec="seconds"),
    }


# --------------------------------------------------------------------------------------
# A quiet machine
# --------------------------------------------------------------------------------------


def _busy_and_total() -> tuple[float, float] | None:
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    total = sum(fields[:8])
    return float(total - idle), float(total)


def cpu_busy_share(seconds: float) -> float | None:
    """Share of the machine's CPU time that was busy over the next ``seconds``."""
    a = _busy_and_total()
    time.sleep(seconds)
    b = _busy_and_total()
    if a is None or b is None or b[1] <= a[1]:
        return None
    return (b[0] - a[0]) / (b[1] - a[1])


def wait_quiet(
    window: float = 20.0,
    threshold: float = 0.05,
    max_wait: float = 600.0,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Waits until the CPUs were busy less than ``threshold`` of the time for ``window``
    seconds in a row (sampled each second), at most ``max_wait`` seconds.

    Returns ``{"quiet": bool, "waited_seconds", "last_window_busy_share"}``.
    """
    t0 = time.perf_counter()
    quiet_since = time.perf_counter()
    shares: list[float] = []
    last_log = 0.0
    while True:
        share = cpu_busy_share(1.0)
        now = time.perf_counter()
        if share is None:
            return {"quiet": None, "waited_seconds": 0.0, "last_window_busy_share": None}
        if share > threshold:
            quiet_since = now
            shares.clear()
        else:
            shares.append(share)
        if now - quiet_since >= window:
            return {
                "quiet": True,
                "waited_seconds": round(now - t0, 1),
                "last_window_busy_share": round(sum(shares) / max(1, len(shares)), 4),
            }
        if now - t0 >= max_wait:
            return {
                "quiet": False,
                "waited_seconds": round(now - t0, 1),
                "last_window_busy_share": round(share, 4),
            }
        if log is not None and now - last_log >= 30:
            log(f"waiting for a quiet machine (busy {share:.0%} of the CPUs) ...")
            last_log = now
