"""A shaped network link for the remote-storage benchmark: a network namespace behind a
rate-limited veth pair, a delaying TCP proxy, and a traffic test peer.

Topology (everything stays on this machine)::

    root namespace                          namespace "sfbench-<pid>"
    10.213.N.1/30  ==== veth, tc tbf ====   10.213.N.2/30
    (the loader)     RATE each direction    proxy :P  --(+delay each way)-->  moto :M
                                            peer  :T  (raw TCP source / echo, for checks)

* **Rate**: a ``tbf`` qdisc on both ends of the veth pair (this kernel has no ``netem``).
  ``tbf`` counts whole packets (headers included), so the TCP payload rate is a few
  per cent below the configured rate.
* **Delay**: ``proxy`` (this module, asyncio) forwards every chunk it reads after a fixed
  one-way delay, scheduled from the chunk's arrival time (``due = arrival + delay``), so
  the delay adds latency without capping throughput: many chunks are in flight at once.
  A request and its response each cross it once: the added round trip is ``2 * delay``.
  Only the application's data is delayed; the kernel's TCP handshakes and ACKs across
  the veth are not.
* **Peer**: ``peer`` (this module) answers ``S<n>`` with ``n`` bytes (a rate check) and
  echoes everything after ``P`` (a round-trip check).

The namespace, the veth pair, the qdiscs and the processes are removed when the
``shaped_link`` context exits (also on an exception, Ctrl-C or SIGTERM).  Needs root (or
CAP_NET_ADMIN + CAP_SYS_ADMIN), ``ip`` and ``tc`` (package ``iproute2``).

Command line (used by ``shaped_link``; runs inside the namespace)::

    python bench/netlink.py proxy --listen 10.213.0.2:9001 --upstream 10.213.0.2:9000 --delay-ms 2
    python bench/netlink.py peer --listen 10.213.0.2:9002
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import ipaddress
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NS_PREFIX = "sfbench-"
VETH_PREFIX = "sfb"  # + pid + a/b; at most 15 characters
SUBNET_BASE = ipaddress.ip_network("10.213.0.0/16")  # /30s inside it, this machine only
READY = "@@ready@@"


class LinkError(RuntimeError):
    """The link cannot be set up (privileges, tools, kernel support)."""


# --------------------------------------------------------------------------------------
# The delaying proxy (runs in its own process, inside the namespace)
# --------------------------------------------------------------------------------------

_HIGH_WATER = 4 << 20  # bytes queued in one direction before reading pauses
_LOW_WATER = 1 << 20


_EOF = object()  # end of stream from src: half-close dst (write_eof)
_CLOSE = object()  # src is gone: close dst once the data before it is written


class _Direction:
    """One direction of a proxied connection: chunks read from ``src`` are written to
    ``dst`` at ``arrival + delay``, in order, with back-pressure on ``src``."""

    def __init__(self, loop: asyncio.AbstractEventLoop, delay: float, on_finish: Any) -> None:
        self.loop = loop
        self.delay = delay
        self.on_finish = on_finish
        self.src: asyncio.Transport | None = None
        self.dst: asyncio.Transport | None = None
        self.queue: collections.deque[tuple[float, Any]] = collections.deque()
        self.queued = 0
        self.timer: asyncio.TimerHandle | None = None
        self.src_paused = False
        self.dst_blocked = False  # dst's own buffer is over its high-water mark
        self.ended = False  # an _EOF or _CLOSE was queued
        self.finished = False  # ... and has been carried out

    def push(self, data: Any) -> None:
        """Queues a chunk (or _EOF / _CLOSE) for ``arrival + delay``."""
        if self.ended:
            return
        if data is _EOF or data is _CLOSE:
            self.ended = True
        self.queue.append((self.loop.time() + self.delay, data))
        if isinstance(data, bytes):
            self.queued += len(data)
            if self.queued > _HIGH_WATER:
                self._pause_src()
        if self.timer is None:
            self._schedule()

    def _schedule(self) -> None:
        due = self.queue[0][0]
        if due <= self.loop.time():
            self.timer = None
            self._drain()
        else:
            self.timer = self.loop.call_at(due, self._drain)

    def _drain(self) -> None:
        self.timer = None
        now = self.loop.time()
        dst = self.dst
        while self.queue and self.queue[0][0] <= now:
            _, data = self.queue.popleft()
            if isinstance(data, bytes):
                self.queued -= len(data)
                if dst is not None and not dst.is_closing():
                    dst.write(data)
                continue
            if dst is not None and not dst.is_closing():
                if data is _EOF and dst.can_write_eof():
                    dst.write_eof()
                else:
                    dst.close()
            self.finished = True
            self.on_finish()
            return
        if self.queue:
            self._schedule()
        self._maybe_resume()

    def _pause_src(self) -> None:
        if not self.src_paused and self.src is not None and not self.src.is_closing():
            self.src.pause_reading()
            self.src_paused = True

    def _maybe_resume(self) -> None:
        if self.src_paused and not self.dst_blocked and self.queued < _LOW_WATER:
            if self.src is not None and not self.src.is_closing():
                self.src.resume_reading()
            self.src_paused = False

    def dst_pause(self) -> None:
        self.dst_blocked = True
        self._pause_src()

    def dst_resume(self) -> None:
        self.dst_blocked = False
        self._maybe_resume()


class _Side(asyncio.Protocol):
    """One socket of a proxied connection (the client's or the upstream's)."""

    def __init__(self, inbound: _Direction, outbound: _Direction) -> None:
        self.inbound = inbound  # data this socket reads goes here
        self.outbound = outbound  # data written to this socket comes from here
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.inbound.src = transport
        self.outbound.dst = transport

    def data_received(self, data: bytes) -> None:
        self.inbound.push(data)

    def eof_received(self) -> bool:
        self.inbound.push(_EOF)
        return True  # keep our sending half open: the other side may still answer

    def pause_writing(self) -> None:
        self.outbound.dst_pause()

    def resume_writing(self) -> None:
        self.outbound.dst_resume()

    def connection_lost(self, exc: Exception | None) -> None:
        self.inbound.push(_CLOSE)  # what it sent still goes through, then the other closes


class _Connection:
    """A client connection and its upstream connection, with one _Direction each way."""

    def __init__(self, loop: asyncio.AbstractEventLoop, upstream: tuple[str, int], delay: float):
        self.loop = loop
        self.upstream = upstream
        self.up = _Direction(loop, delay, self._finished)  # client -> upstream
        self.down = _Direction(loop, delay, self._finished)  # upstream -> client
        self.client = _Side(self.up, self.down)
        self.server = _Side(self.down, self.up)

    def client_protocol(self) -> _Side:
        self.loop.call_soon(lambda: asyncio.ensure_future(self._connect_upstream()))
        return self.client

    async def _connect_upstream(self) -> None:
        transport = self.client.transport
        assert transport is not None
        transport.pause_reading()
        try:
            await self.loop.create_connection(lambda: self.server, *self.upstream)
        except OSError:
            transport.close()
            return
        if not transport.is_closing():
            transport.resume_reading()

    def _finished(self) -> None:
        # Both ways ended (EOF or gone): nothing more can pass; close what is left.
        if self.up.finished and self.down.finished:
            for side in (self.client, self.server):
                if side.transport is not None and not side.transport.is_closing():
                    side.transport.close()


async def _proxy_main(
    maps: Sequence[tuple[tuple[str, int], tuple[str, int]]], delay: float
) -> None:
    loop = asyncio.get_running_loop()
    servers = []
    for listen, upstream in maps:

        def factory(upstream: tuple[str, int] = upstream) -> asyncio.Protocol:
            return _Connection(loop, upstream, delay).client_protocol()

        servers.append(await loop.create_server(factory, *listen, reuse_address=True, backlog=256))
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(READY, flush=True)
    await stop.wait()
    for s in servers:
        s.close()


# --------------------------------------------------------------------------------------
# The test peer (runs in its own process, inside the namespace)
# --------------------------------------------------------------------------------------


async def _peer_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        cmd = await reader.readexactly(1)
        if cmd == b"S":  # send n bytes
            (n,) = struct.unpack("!Q", await reader.readexactly(8))
            block = b"\0" * (1 << 20)
            while n > 0:
                writer.write(block[: min(n, len(block))])
                n -= min(n, len(block))
                await writer.drain()
        elif cmd == b"P":  # echo until EOF
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def _peer_main(listen: tuple[str, int]) -> None:
    loop = asyncio.get_running_loop()
    server = await asyncio.start_server(_peer_conn, *listen, reuse_address=True)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(READY, flush=True)
    await stop.wait()
    server.close()


# --------------------------------------------------------------------------------------
# Measuring the link (from the root namespace)
# --------------------------------------------------------------------------------------


def measure_rate(
    host: str, port: int, nbytes: int = 128 << 20, timeout: float = 60
) -> dict[str, float]:
    """Asks the peer for ``nbytes`` and times their arrival (first byte to last, and
    request to last).  Returns bytes, seconds and bits per second."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        t0 = time.perf_counter()
        s.sendall(b"S" + struct.pack("!Q", nbytes))
        got = 0
        first = None
        buf = bytearray(1 << 20)
        view = memoryview(buf)
        while got < nbytes:
            n = s.recv_into(view)
            if n == 0:
                raise ConnectionError(f"peer closed after {got} of {nbytes} bytes")
            if first is None:
                first = time.perf_counter()
            got += n
        t1 = time.perf_counter()
    assert first is not None
    return {
        "bytes": got,
        "seconds": t1 - t0,
        "bits_per_second": got * 8 / (t1 - t0),
        "bits_per_second_after_first_byte": got * 8 / max(1e-9, t1 - first),
        "time_to_first_byte_ms": (first - t0) * 1e3,
    }


def measure_rtt(host: str, port: int, count: int = 50, timeout: float = 10) -> dict[str, float]:
    """Round trips of one small message through the peer's echo (application level)."""
    samples = []
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.sendall(b"P")
        for _ in range(count):
            t0 = time.perf_counter()
            s.sendall(b"x" * 64)
            got = 0
            while got < 64:
                n = len(s.recv(64 - got))
                if n == 0:
                    raise ConnectionError("peer closed")
                got += n
            samples.append((time.perf_counter() - t0) * 1e3)
    samples.sort()
    return {
        "count": count,
        "min_ms": samples[0],
        "median_ms": samples[len(samples) // 2],
        "max_ms": samples[-1],
    }


# --------------------------------------------------------------------------------------
# Setting up and tearing down (from the root namespace)
# --------------------------------------------------------------------------------------


def _run(argv: Sequence[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise LinkError(
            f"`{' '.join(argv)}` failed (exit status {proc.returncode}): "
            f"{(proc.stderr or proc.stdout).strip()}"
        )
    return proc


def ensure_tools(install: bool = True) -> None:
    """Checks for root, ``ip`` and ``tc`` (installing ``iproute2`` with apt-get when they
    are missing and ``install``) and that this kernel lets us make a namespace, a veth pair
    and a ``tbf`` qdisc.  Raises LinkError with what is missing."""
    if os.geteuid() != 0:
        raise LinkError(
            "the shaped link needs root (network namespaces, veth, tc); "
            "run as root or in a container with CAP_NET_ADMIN and CAP_SYS_ADMIN"
        )
    if not (shutil.which("ip") and shutil.which("tc")):
        if install and shutil.which("apt-get"):
            print("`ip`/`tc` missing: installing iproute2 with apt-get ...", file=sys.stderr)
            env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
            for argv in (["apt-get", "update"], ["apt-get", "install", "-y", "iproute2"]):
                proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
                if proc.returncode != 0:
                    raise LinkError(f"`{' '.join(argv)}` failed: {proc.stderr.strip()[-2000:]}")
        if not (shutil.which("ip") and shutil.which("tc")):
            raise LinkError("`ip` and `tc` are needed (package iproute2); not found on PATH")
    # A throw-away namespace proves that the kernel and our privileges allow it.
    probe = f"{NS_PREFIX}probe-{os.getpid()}"
    try:
        _run(["ip", "netns", "add", probe])
        _run(["ip", "netns", "exec", probe, "ip", "link", "set", "lo", "up"])
    except LinkError as e:
        raise LinkError(f"cannot create a network namespace: {e}") from e
    finally:
        _run(["ip", "netns", "del", probe], check=False)


def cleanup_stale() -> list[str]:
    """Removes namespaces and veth pairs that an earlier run of this benchmark left behind
    (its process gone).  Only names with this module's prefixes are touched."""
    removed = []
    out = _run(["ip", "netns", "list"], check=False).stdout
    for line in out.splitlines():
        name = line.split()[0] if line.split() else ""
        if not name.startswith(NS_PREFIX):
            continue
        pid = name[len(NS_PREFIX) :]
        if pid.isdigit() and Path(f"/proc/{pid}").exists():
            continue  # a live run's
        _run(["ip", "netns", "del", name], check=False)
        removed.append(name)
    out = _run(["ip", "-o", "link", "show"], check=False).stdout
    for line in out.splitlines():
        parts = line.split(":")
        if len(parts) < 2:
            continue
        name = parts[1].strip().split("@")[0]
        if name.startswith(VETH_PREFIX) and name[len(VETH_PREFIX) : -1].isdigit():
            pid = name[len(VETH_PREFIX) : -1]
            if not Path(f"/proc/{pid}").exists():
                _run(["ip", "link", "del", name], check=False)
                removed.append(name)
    return removed


def _free_subnet() -> ipaddress.IPv4Network:
    """A /30 in 10.213.0.0/16 that no interface on this machine uses yet."""
    used = []
    out = _run(["ip", "-4", "-o", "addr", "show"], check=False).stdout
    for line in out.splitlines():
        parts = line.split()
        if "inet" in parts:
            used.append(ipaddress.ip_interface(parts[parts.index("inet") + 1]).network)
    routes = _run(["ip", "-4", "route", "show"], check=False).stdout
    for line in routes.splitlines():
        dest = line.split()[0] if line.split() else ""
        if dest and dest != "default":
            with contextlib.suppress(ValueError):
                used.append(ipaddress.ip_network(dest, strict=False))
    for net in SUBNET_BASE.subnets(new_prefix=30):
        if not any(net.overlaps(u) for u in used):
            return net  # type: ignore[return-value]
    raise LinkError("no free /30 in 10.213.0.0/16")


def _free_port_in(ns: str, host: str) -> int:
    code = f"import socket; s=socket.socket(); s.bind(({host!r}, 0)); print(s.getsockname()[1])"
    out = _run(["ip", "netns", "exec", ns, sys.executable, "-c", code]).stdout
    return int(out.strip())


@dataclass
class ShapedLink:
    """What ``shaped_link`` set up."""

    namespace: str
    veth_root: str
    veth_ns: str
    root_ip: str
    ns_ip: str
    rate: str
    delay_ms: float
    moto_port: int = 0
    proxy_port: int = 0
    peer_port: int = 0
    peer_proxy_port: int = 0
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list, repr=False)
    process_names: list[str] = field(default_factory=list, repr=False)
    log_dir: Path = field(default=Path("."), repr=False)

    @property
    def s3_endpoint(self) -> str:
        """host:port of S3 behind the shaped link and the delay (for Arrow)."""
        return f"{self.ns_ip}:{self.proxy_port}"

    @property
    def s3_endpoint_direct(self) -> str:
        """host:port of S3 behind the shaped link, without the delay (uploads)."""
        return f"{self.ns_ip}:{self.moto_port}"

    def s3_uri(self, bucket: str, prefix: str = "") -> str:
        path = f"{bucket}/{prefix.strip('/')}".rstrip("/")
        return f"s3://{path}?endpoint_override={self.s3_endpoint}&scheme=http"

    def qdisc_stats(self) -> dict[str, str]:
        return {
            "root_side": _run(
                ["tc", "-s", "qdisc", "show", "dev", self.veth_root], check=False
            ).stdout,
            "ns_side": _run(
                [
                    "ip",
                    "netns",
                    "exec",
                    self.namespace,
                    "tc",
                    "-s",
                    "qdisc",
                    "show",
                    "dev",
                    self.veth_ns,
                ],
                check=False,
            ).stdout,
        }

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds (user + system) each helper process (moto, proxy, peer) used so far."""
        tick = os.sysconf("SC_CLK_TCK")
        out = {}
        for name, proc in zip(self.process_names, self.processes, strict=True):
            try:
                fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
                out[name] = (int(fields[11]) + int(fields[12])) / tick  # utime, stime
            except (OSError, IndexError, ValueError):
                pass
        return out

    def logs(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
            for p in sorted(self.log_dir.glob("*.log"))
        )


def _start_in_ns(
    link: ShapedLink, name: str, argv: Sequence[str], ready: Any, timeout: float = 30
) -> subprocess.Popen[bytes]:
    """Starts ``argv`` inside the namespace (its output to a log file) and waits until
    ``ready()`` is true; raises LinkError with the log if it never is."""
    log_path = link.log_dir / f"{name}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            ["ip", "netns", "exec", link.namespace, *argv],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # our Ctrl-C does not reach it; we stop it ourselves
        )
    link.processes.append(proc)
    link.process_names.append(name)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        if ready(log_path):
            return proc
        time.sleep(0.05)
    raise LinkError(
        f"{name} did not start within {timeout} s (exit status {proc.poll()}):\n"
        + log_path.read_text(errors="replace")[-3000:]
    )


def _says_ready(path: Path) -> bool:
    try:
        return READY in path.read_text(errors="replace")
    except OSError:
        return False


def _answers_tcp(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _stop(proc: subprocess.Popen[bytes], timeout: float = 5.0) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait(timeout=timeout)


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived while the link was up (it has been removed)."""


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    """SIGTERM (and SIGHUP) raise in the main thread, so that cleanup runs."""

    def handler(signum: int, frame: Any) -> None:
        raise Terminated(f"signal {signum}")

    saved = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in saved.items():
            signal.signal(s, h)


@contextlib.contextmanager
def shaped_link(
    rate: str = "1gbit",
    delay_ms: float = 2.0,
    burst: str = "256kb",
    queue_latency: str = "20ms",
    moto: bool = True,
    peer: bool = True,
) -> Iterator[ShapedLink]:
    """Sets up the namespace, the shaped veth pair, moto S3 (``python -m moto.server``),
    the delaying proxy in front of it and the test peer; yields a ShapedLink; removes all
    of it afterwards (also on errors, Ctrl-C and SIGTERM)."""
    ensure_tools()
    stale = cleanup_stale()
    if stale:
        print(f"removed leftovers of an earlier run: {', '.join(stale)}", file=sys.stderr)
    pid = os.getpid()
    net = _free_subnet()
    hosts = list(net.hosts())
    link = ShapedLink(
        namespace=f"{NS_PREFIX}{pid}",
        veth_root=f"{VETH_PREFIX}{pid}a",
        veth_ns=f"{VETH_PREFIX}{pid}b",
        root_ip=str(hosts[0]),
        ns_ip=str(hosts[1]),
        rate=rate,
        delay_ms=delay_ms,
    )
    log_dir = tempfile.TemporaryDirectory(prefix="sfbench-link-")
    link.log_dir = Path(log_dir.name)
    ns = link.namespace
    here = str(Path(__file__).resolve())
    with _sigterm_raises():
        try:
            _run(["ip", "netns", "add", ns])
            _run(
                ["ip", "link", "add", link.veth_root, "type", "veth", "peer", "name", link.veth_ns]
            )
            _run(["ip", "link", "set", link.veth_ns, "netns", ns])
            _run(["ip", "addr", "add", f"{link.root_ip}/30", "dev", link.veth_root])
            _run(["ip", "link", "set", link.veth_root, "up"])
            nsx = ["ip", "netns", "exec", ns]
            _run([*nsx, "ip", "addr", "add", f"{link.ns_ip}/30", "dev", link.veth_ns])
            _run([*nsx, "ip", "link", "set", link.veth_ns, "up"])
            _run([*nsx, "ip", "link", "set", "lo", "up"])
            tbf = ["root", "tbf", "rate", rate, "burst", burst, "latency", queue_latency]
            try:
                _run(["tc", "qdisc", "add", "dev", link.veth_root, *tbf])
                _run([*nsx, "tc", "qdisc", "add", "dev", link.veth_ns, *tbf])
            except LinkError as e:
                raise LinkError(f"cannot shape the link with tc tbf: {e}") from e
            if moto:
                link.moto_port = _free_port_in(ns, link.ns_ip)
                _start_in_ns(
                    link,
                    "moto",
                    [
                        sys.executable,
                        "-m",
                        "moto.server",
                        "-H",
                        link.ns_ip,
                        "-p",
                        str(link.moto_port),
                    ],
                    lambda _p: _answers_tcp(link.ns_ip, link.moto_port),
                )
            maps = []
            if moto:
                link.proxy_port = _free_port_in(ns, link.ns_ip)
                maps += ["--map", f"{link.ns_ip}:{link.proxy_port}={link.ns_ip}:{link.moto_port}"]
            if peer:
                link.peer_port = _free_port_in(ns, link.ns_ip)
                _start_in_ns(
                    link,
                    "peer",
                    [sys.executable, here, "peer", "--listen", f"{link.ns_ip}:{link.peer_port}"],
                    _says_ready,
                )
                link.peer_proxy_port = _free_port_in(ns, link.ns_ip)
                maps += [
                    "--map",
                    f"{link.ns_ip}:{link.peer_proxy_port}={link.ns_ip}:{link.peer_port}",
                ]
            if maps:
                _start_in_ns(
                    link,
                    "proxy",
                    [sys.executable, here, "proxy", "--delay-ms", str(delay_ms), *maps],
                    _says_ready,
                )
            yield link
        finally:
            for proc in reversed(link.processes):
                _stop(proc)
            _run(["ip", "netns", "del", ns], check=False)
            _run(["ip", "link", "del", link.veth_root], check=False)  # gone with the ns, usually
            log_dir.cleanup()


# --------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------


def _hostport(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    pp = sub.add_parser("proxy", help="a TCP proxy that delays each chunk (one way)")
    pp.add_argument("--map", action="append", required=True, help="LISTEN_HOST:PORT=UP_HOST:PORT")
    pp.add_argument("--delay-ms", type=float, default=2.0, help="one-way delay per chunk")
    pe = sub.add_parser("peer", help="a rate/echo test peer")
    pe.add_argument("--listen", required=True, help="HOST:PORT")
    sub.add_parser("check", help="set up the link, measure rate and RTT, tear down")
    args = p.parse_args(argv)
    if args.cmd == "proxy":
        maps = []
        for m in args.map:
            listen, _, up = m.partition("=")
            maps.append((_hostport(listen), _hostport(up)))
        asyncio.run(_proxy_main(maps, args.delay_ms / 1e3))
        return 0
    if args.cmd == "peer":
        asyncio.run(_peer_main(_hostport(args.listen)))
        return 0
    try:
        with shaped_link(moto=False) as link:
            print(link)
            print("direct rate ", measure_rate(link.ns_ip, link.peer_port))
            print("proxied rate", measure_rate(link.ns_ip, link.peer_proxy_port))
            print("direct rtt  ", measure_rtt(link.ns_ip, link.peer_port))
            print("proxied rtt ", measure_rtt(link.ns_ip, link.peer_proxy_port))
            print(link.qdisc_stats()["ns_side"])
    except LinkError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
