"""One decoder for every DataLoader worker (private).

With shuffling, a batch mixes the rows of every row group in its window, so k
workers that each run an engine for their own batches each decode every row
group: k times the decode work.  Here DataLoader worker 0 (the *leader*) runs the
one engine with all the threads, keeps batches ``0, k, 2k, ...`` and sends batch
``j`` to worker ``j mod k`` (a *follower*) as references into its shared slabs
(``_shm``), over a Unix socket the followers connect to.  Each worker applies the
Python transform and the output conversion to its own batches, and hands them to
the main process, which maps the leader's slabs.  The stream is the one the
engine makes, cut the way the DataLoader takes it: batch j from worker j mod k.

The workers of one pass find each other by an abstract socket name made of the
main process's pid, the DataLoader's base seed (the same in all its workers) and
the pass number in the worker.  A follower that cannot reach the leader, or loses
it, raises; so does one whose leader failed (with the leader's error).  A leader
whose pass is dropped stops its engine and its dealing thread.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import queue
import socket
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any

from . import _shm
from ._errors import ShardfeedError

CONNECT_SECONDS = 120.0  # how long one side waits for the other to turn up
OWN_AHEAD = 4  # the leader's own batches the dealer may hold ready
_POLL = 0.1


class FanoutError(ShardfeedError, RuntimeError):
    """The workers of a DataLoader lost each other."""


def address(token: int, base_seed: int, passes: int) -> str:
    """The leader's abstract socket name for this pass of this DataLoader:
    the main process, the dataset object, the DataLoader's seed, the pass."""
    return f"\0shardfeed-fanout-{os.getppid()}-{token}-{base_seed}-{passes}"


class _Payload:
    """Pickles as a prepared reduce tuple (a batch's references)."""

    __slots__ = ("reduced",)

    def __init__(self, reduced: tuple[Any, ...]) -> None:
        self.reduced = reduced

    def __reduce__(self) -> tuple[Any, ...]:
        return self.reduced


def _send_frame(conn: socket.socket, data: bytes) -> None:
    conn.sendall(struct.pack("<Q", len(data)) + data)


HANDSHAKE_BYTES = 1 << 16  # a handshake frame is a few hundred bytes


def _recv_frame(conn: socket.socket, most: int | None = None) -> bytes:
    (size,) = struct.unpack("<Q", _recv_exact(conn, 8))
    if most is not None and size > most:
        raise ValueError(f"a frame of {size} bytes (at most {most} expected)")
    return _recv_exact(conn, size)


def _same_user(conn: socket.socket) -> bool:
    """Whether the process at the other end runs as this user (SO_PEERCRED).  An
    abstract socket has no file permissions: any local process can connect, and
    what comes through it is unpickled."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _, uid, _ = struct.unpack("3i", creds)
    return bool(uid == os.getuid())


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = conn.recv_into(view[got:])
        if k == 0:
            raise EOFError
        got += k
    return bytes(buf)


class Leader:
    """Worker 0: runs the engine and deals the batches out."""

    def __init__(
        self, sender: _shm.Sender, workers: int, name: str, handshake: tuple[Any, ...]
    ) -> None:
        self._sender = sender
        self._handshake = handshake
        self._workers = workers
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._listener.bind(name)
        except OSError as e:
            self._listener.close()
            raise FanoutError(
                "DataLoader worker 0 could not open its socket for the other workers: "
                f"{e} (two DataLoaders over one TorchDataset with the same generator seed "
                "at once?)"
            ) from e
        self._listener.listen(workers)
        self._listener.settimeout(_POLL)
        self._conns: dict[int, socket.socket | None] = {}  # None: the follower left
        self._told: dict[int, set[int]] = {w: set() for w in range(1, workers)}
        self._deadline = time.monotonic() + CONNECT_SECONDS
        self._own: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=OWN_AHEAD)
        self._stop = threading.Event()
        self._engine: Any = None
        self._thread: threading.Thread | None = None

    def batches(self, engine: Any) -> Iterator[dict[str, Any]]:
        """The leader's own share of the engine's batches (raw, as ``next()`` gives).
        A thread deals the others out as the engine makes them; it runs at most
        ``OWN_AHEAD`` of the leader's own batches ahead.  Closes the engine however
        the loop ends."""
        self._engine = engine
        self._thread = threading.Thread(target=self._run, name="shardfeed-fanout", daemon=True)
        self._thread.start()
        try:
            while True:
                kind, value = self._own.get()
                if kind == "end":
                    return
                if kind == "error":
                    raise value
                yield value
        finally:
            self._close()

    def _close(self) -> None:
        self._stop.set()
        self._engine.cancel()  # wakes a next() in the dealer
        for conn in list(self._conns.values()):
            if conn is not None:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)  # wakes a blocked send
        assert self._thread is not None
        self._thread.join()
        for conn in self._conns.values():
            if conn is not None:
                conn.close()
        self._listener.close()
        self._engine.close()

    def _run(self) -> None:
        end: tuple[str, Any] = ("end", None)
        try:
            j = 0
            while not self._stop.is_set():
                arrays = self._engine.next()
                if arrays is None:
                    break
                self._sender.after_batch()
                worker, j = j % self._workers, j + 1
                if worker == 0:
                    self._put(("batch", arrays))
                else:
                    self._deal(worker, arrays)
        except BaseException as e:  # the consumer and the followers raise it
            end = ("error", e)
        if self._stop.is_set():  # the pass was dropped
            end = ("error", FanoutError("worker 0 stopped before the end of the pass"))
        for worker in range(1, self._workers):
            # At the end every follower needs to hear it; after an error (or a
            # dropped pass) only those that turned up.
            self._tell(worker, end, wait=end[0] == "end")
        self._put(end)

    def _put(self, item: tuple[str, Any]) -> None:
        while not self._stop.is_set():
            try:
                self._own.put(item, timeout=_POLL)
                return
            except queue.Full:
                continue

    def _conn(self, worker: int) -> socket.socket | None:
        while worker not in self._conns:
            if self._stop.is_set():
                return None
            if self._deadline == 0.0:
                self._listener.settimeout(0.0)
                try:
                    conn, _ = self._listener.accept()
                except (BlockingIOError, TimeoutError):
                    return None
                self._admit(conn)
                continue
            if time.monotonic() > self._deadline:
                raise FanoutError(
                    f"DataLoader worker {worker} did not connect to worker 0, which decodes "
                    f"for every worker, within {CONNECT_SECONDS:.0f} s"
                )
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            self._admit(conn)
        return self._conns[worker]

    def _admit(self, conn: socket.socket) -> None:
        conn.settimeout(CONNECT_SECONDS)
        try:
            if not _same_user(conn):
                raise ValueError("another user")
            who, theirs = pickle.loads(_recv_frame(conn, HANDSHAKE_BYTES))
        except (EOFError, OSError, ValueError, pickle.UnpicklingError):
            conn.close()
            return
        conn.settimeout(None)
        if theirs != self._handshake or who in self._conns or not 0 < who < self._workers:
            # Not this pass's worker: refuse it (it raises).
            with contextlib.suppress(OSError):
                _send_frame(conn, pickle.dumps(("refused", None), protocol=5))
            conn.close()
            return
        self._conns[who] = conn

    def _deal(self, worker: int, arrays: dict[str, Any]) -> None:
        conn = self._conn(worker)
        if conn is None:
            return
        reduced = self._sender.reduce(arrays, told=self._told[worker])
        try:
            _send_frame(conn, pickle.dumps(("batch", _Payload(reduced)), protocol=5))
        except OSError:
            # The follower is gone (its pass dropped): nobody will free these.
            self._conns[worker] = None
            self._sender.release(
                [s for _, spec in reduced[1][1] if spec[0] != "obj" for s in spec[7:9]]
            )

    def _tell(self, worker: int, end: tuple[str, Any], wait: bool) -> None:
        try:
            if not wait:
                self._deadline = 0.0  # take the connections already waiting, no more
            conn = self._conn(worker)
            if conn is None:
                return
            try:
                data = pickle.dumps(end, protocol=5)
            except Exception:  # an error that does not pickle: its text does
                data = pickle.dumps(("error", FanoutError(repr(end[1]))), protocol=5)
            _send_frame(conn, data)
            if wait:
                self._await_close(conn)
        except (OSError, FanoutError):
            pass

    def _await_close(self, conn: socket.socket) -> None:
        """Waits for a follower to close its end after the pass's end: by then it has
        taken every descriptor it was sent, which this process's resource sharer
        hands out.  DataLoader shuts a worker down as soon as its own share of an
        iterable dataset ends, which could be before a follower read its last
        batches (a short epoch): it then found no one to take them from."""
        conn.settimeout(_POLL)
        deadline = time.monotonic() + CONNECT_SECONDS
        while not self._stop.is_set() and time.monotonic() < deadline:
            try:
                if not conn.recv(1 << 12):
                    return
            except TimeoutError:
                continue
            except OSError:
                return


def follow(name: str, worker: int, handshake: tuple[Any, ...]) -> Iterator[dict[str, Any]]:
    """A follower's batches (raw), as the leader sends them."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        deadline = time.monotonic() + CONNECT_SECONDS
        while True:
            try:
                conn.connect(name)
                break
            except (ConnectionRefusedError, FileNotFoundError):
                if time.monotonic() > deadline:
                    raise FanoutError(
                        f"DataLoader worker {worker} could not reach worker 0, which decodes "
                        f"for every worker, within {CONNECT_SECONDS:.0f} s"
                    ) from None
                time.sleep(0.005)
        if not _same_user(conn):
            raise FanoutError(
                f"DataLoader worker {worker}: the socket of worker 0 belongs to another user"
            )
        _send_frame(conn, pickle.dumps((worker, handshake), protocol=5))
        while True:
            try:
                kind, value = pickle.loads(_recv_frame(conn))
            except (EOFError, ConnectionError) as e:
                raise FanoutError(
                    f"DataLoader worker {worker} lost worker 0, which decodes for every worker "
                    "(did it fail? its error is the DataLoader's)"
                ) from e
            if kind == "end":
                return
            if kind == "error":
                raise value
            if kind == "refused":
                raise FanoutError(
                    f"DataLoader worker {worker}: worker 0 is in another pass or DataLoader "
                    "(two DataLoaders with the same seed over one TorchDataset at once?)"
                )
            yield value
    finally:
        conn.close()
