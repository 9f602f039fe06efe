"""Remote-storage benchmark: the tabular dataset from S3 behind a shaped ~1 Gbit/s link.

The dataset (256 float32 features + int64 label, ``_common``'s generator; many files of
at most 16 MB, 2 row groups each) is uploaded to a moto S3 server that runs inside a
network namespace.  The loader reaches it over a veth pair shaped with ``tc tbf`` (1 Gbit/s
each way by default) through a userspace proxy that adds a one-way delay to every chunk
(2 ms each way by default, so about 4 ms of round trip).  See ``netlink.py``.

Configurations, each in its own process, each ``--epochs`` passes (default 3), each with a
fresh cache folder:

* ``local``: the same files read from the local folder (page cache warm): the baseline;
* ``s3_nocache``: ``Loader(s3://...)``, no cache;
* ``s3_filecache``: ``cache_dir=...`` (whole remote files kept on local disk);
* ``s3_decoded``: ``cache_dir=...`` and ``cache_decoded=True`` (decoded row groups too).

Reported per configuration and epoch: rows/s, remote bytes (the loader's own counter and
the bytes that crossed the veth), cache hits and misses; for epoch 1 the ideal time
(bytes needed ÷ link rate) and the ratio of the measured time to it.  The link itself is
checked first: a raw TCP transfer and a round trip through the proxy, and S3 GETs of the
dataset's files through the proxy.

Aims (issue 3): epoch 1 within 1.15 x of bytes / link rate; epochs 2+ with zero remote
bytes and at least the local-disk throughput; the decoded tier at least 3 x the file cache
on epochs 2+.

Needs root (network namespace, veth, tc), ``ip``/``tc`` (iproute2: installed with
apt-get when missing), ``moto[server]`` and ``boto3``.  Everything it sets up is removed
at exit.  Usage::

    PYTHONPATH=python python3 bench/bench_remote.py                       # ~300 MB, ~2 min
    PYTHONPATH=python python3 bench/bench_remote.py --rows 60000 --files 6 --epochs 2  # quick
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import gc
import importlib.util
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import _common as common
import netlink

CONFIGS = ("local", "s3_nocache", "s3_filecache", "s3_decoded")
BUCKET = "shardfeed-bench"
PREFIX = "tabular"
MAX_FILE_BYTES = 16 << 20  # moto loads a whole object for every ranged GET
EPOCH1_AIM = 1.15  # epoch-1 time <= 1.15 x (bytes needed / link rate)
DECODED_AIM = 3.0  # decoded tier >= 3 x the file cache on epochs 2+
_RATE_UNITS = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}


def _load_s3_helpers() -> Any:
    """tests/s3_server.py (credentials and environment for moto), imported by path."""
    path = common.BENCH_DIR.parent / "tests" / "s3_server.py"
    spec = importlib.util.spec_from_file_location("_shardfeed_s3_server", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def rate_bits_per_second(rate: str) -> float:
    """``tc``'s rate syntax (``1gbit``, ``500mbit``) in bits per second."""
    text = rate.strip().lower()
    if not text.endswith("bit"):
        raise ValueError(f"rate {rate!r}: give it in bits (e.g. 1gbit, 500mbit)")
    number = text[: -len("bit")]
    unit = number[-1] if number and number[-1] in _RATE_UNITS else ""
    return float(number[: len(number) - len(unit)]) * _RATE_UNITS[unit]


# --------------------------------------------------------------------------------------
# One configuration (runs in a child process)
# --------------------------------------------------------------------------------------


def _veth_rx_bytes(dev: str | None) -> int | None:
    """Bytes the root side of the veth received (from the namespace), headers included."""
    if not dev:
        return None
    try:
        return int(Path(f"/sys/class/net/{dev}/statistics/rx_bytes").read_text())
    except (OSError, ValueError):
        return None


def _du(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, f)).st_size
    return total


class _RxSampler:
    """Samples the veth's rx_bytes every ``interval`` seconds on a thread during a pass:
    when the first and the last byte arrived, and how long the link sat idle between."""

    def __init__(self, dev: str | None, interval: float = 0.01) -> None:
        import threading

        self.dev = dev
        self.interval = interval
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> _RxSampler:
        if self.dev:
            self.t0 = time.perf_counter()
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.dev:
            self._stop.set()
            self._thread.join()

    def _run(self) -> None:
        while True:
            rx = _veth_rx_bytes(self.dev)
            if rx is not None:
                self.samples.append((time.perf_counter() - self.t0, rx))
            if self._stop.wait(self.interval):
                break

    def summary(self, rate_bps: float) -> dict[str, Any] | None:
        s = self.samples
        if len(s) < 3:
            return None
        start = s[0][1]
        moving = [i for i in range(1, len(s)) if s[i][1] - s[i - 1][1] > 0]
        if not moving:
            return None
        first = s[moving[0] - 1][0]
        last = s[moving[-1]][0]
        total = s[-1][1] - start
        # "idle": an interval inside [first, last] that carried < 10% of the link's rate.
        idle = 0.0
        for i in range(moving[0], moving[-1] + 1):
            dt = s[i][0] - s[i - 1][0]
            if (s[i][1] - s[i - 1][1]) * 8 < 0.1 * rate_bps * dt:
                idle += dt
        busy = max(1e-9, last - first)
        return {
            "first_byte_seconds": round(first, 3),
            "last_byte_seconds": round(last, 3),
            "bytes": total,
            "rate_bits_per_second_first_to_last": round(total * 8 / busy),
            "idle_seconds_first_to_last": round(idle, 3),
            "sample_interval_seconds": self.interval,
        }


_COUNTERS = (
    "remote_bytes",
    "cache_hits",
    "cache_misses",
    "prefetch_wait_seconds",
    "decoded_hits",
    "decoded_misses",
)


def _delta(after: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for k in _COUNTERS:
        if k in after:
            v = after[k] - before.get(k, 0)
            out[k] = round(v, 4) if isinstance(v, float) else v
    return out


def run_config(args: argparse.Namespace) -> None:
    import pyarrow.fs  # noqa: F401  (before shardfeed opens s3:// URIs)
    import shardfeed
    import torch  # noqa: F401  (count it in the baseline RSS)

    name = args.run_config
    features = [f"f{i:03d}" for i in range(args.features)]
    kwargs: dict[str, Any] = {}
    if name in ("s3_filecache", "s3_decoded"):
        kwargs["cache_dir"] = args.cache_dir
        kwargs["cache_decoded"] = name == "s3_decoded"
    if name != "local" and args.prefetch_bytes is not None:
        kwargs["prefetch_bytes"] = args.prefetch_bytes
    base = common.rss_mb()
    rx0 = _veth_rx_bytes(args.veth)
    t0 = time.perf_counter()
    loader = shardfeed.Loader(
        args.source,
        columns=["label"],
        batch_size=args.batch_size,
        shuffle=True,
        seed=0,
        stack={"x": features},
        output="torch",
        num_threads=args.threads,
        **kwargs,
    )
    open_seconds = time.perf_counter() - t0
    rx1 = _veth_rx_bytes(args.veth)
    opened = loader.stats()
    before = opened
    runs = []
    for epoch in range(args.epochs):
        loader.set_epoch(epoch)
        rx_before = _veth_rx_bytes(args.veth)

        def one_pass(loader: Any = loader) -> tuple[int, float]:
            rows, acc = 0, 0.0
            for batch in loader:
                x, y = batch["x"], batch["label"]
                rows += x.shape[0]
                acc += float(x[-1, -1]) + float(y[0])  # touch every batch; order-sensitive
            return rows, acc

        with _RxSampler(args.veth if epoch == 0 else None) as sampler:
            run = common.timed(one_pass)
        rx_after = _veth_rx_bytes(args.veth)
        stats = loader.stats()
        stages = {
            k: {kk: round(vv, 4) if isinstance(vv, float) else vv for kk, vv in v.items()}
            for k, v in stats.get("stages", {}).items()
        }
        run.extra = {
            "epoch": epoch,
            **_delta(stats, before),
            "cache_bytes": stats.get("cache_bytes"),
            "decoded_bytes": stats.get("decoded_bytes"),
            "wire_bytes": None if rx_before is None or rx_after is None else rx_after - rx_before,
            "consumer_wait_seconds": round(stats.get("consumer_wait_seconds", float("nan")), 4),
            "worker_wait_seconds": round(stats.get("worker_wait_seconds", float("nan")), 4),
            "stages": stages,
        }
        if epoch == 0 and args.veth and args.rate_bps:
            run.extra["link_timeline"] = sampler.summary(args.rate_bps)
        before = stats
        runs.append(run)
        print(
            f"    {name} epoch {epoch + 1}: {run.rows:,} rows in {run.seconds:.2f} s "
            f"({run.rows_per_second:,.0f} rows/s), remote "
            f"{(run.extra.get('remote_bytes') or 0) / 1e6:.1f} MB, wire "
            f"{(run.extra['wire_bytes'] or 0) / 1e6:.1f} MB"
            + _timeline_text(run.extra.get("link_timeline")),
            file=sys.stderr,
            flush=True,
        )
    cache_disk: dict[str, int] = {}
    if args.cache_dir and Path(args.cache_dir).is_dir():
        root = Path(args.cache_dir)
        cache_disk = {p.name: _du(p) for p in root.iterdir() if p.is_dir()}
        cache_disk["total"] = _du(root)
    extra = {
        "open_seconds": round(open_seconds, 4),
        "open_wire_bytes": None if rx0 is None or rx1 is None else rx1 - rx0,
        "open_stats": {k: opened[k] for k in _COUNTERS if k in opened},
        "loader_kwargs": {k: str(v) for k, v in kwargs.items()},
        "batches_per_epoch": len(loader),
        "cache_disk_bytes": cache_disk,
        "final_stats": {
            k: v for k, v in loader.stats().items() if k not in ("stages", "decoded_row_groups")
        },
    }
    result = common.summarize(name, runs, base, notes="", extra=extra)
    del loader  # stop the engine before pyarrow's exit hook finalizes S3
    gc.collect()
    common.emit_child_result(result)


# --------------------------------------------------------------------------------------
# The parent
# --------------------------------------------------------------------------------------


def _upload(link: netlink.ShapedLink, s3mod: Any, files: list[str]) -> tuple[str, float]:
    """Uploads the Parquet files (not the marker) over the direct (undelayed) endpoint."""
    import boto3

    client = boto3.client(
        "s3",
        endpoint_url=f"http://{link.s3_endpoint_direct}",
        aws_access_key_id=s3mod.ACCESS_KEY,
        aws_secret_access_key=s3mod.SECRET_KEY,
        region_name=s3mod.REGION,
    )
    client.create_bucket(Bucket=BUCKET)
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        list(
            pool.map(
                lambda p: client.put_object(
                    Bucket=BUCKET, Key=f"{PREFIX}/{Path(p).name}", Body=Path(p).read_bytes()
                ),
                files,
            )
        )
    return link.s3_uri(BUCKET, PREFIX), time.perf_counter() - t0


def _check_link(link: netlink.ShapedLink, files: list[str], nbytes: int) -> dict[str, Any]:
    """Rate and round trip of the shaped link, raw and through S3."""
    import pyarrow.fs as pafs

    out: dict[str, Any] = {}
    out["tcp_direct"] = netlink.measure_rate(link.ns_ip, link.peer_port, nbytes)
    out["tcp_proxied"] = netlink.measure_rate(link.ns_ip, link.peer_proxy_port, nbytes)
    out["rtt_direct"] = netlink.measure_rtt(link.ns_ip, link.peer_port)
    out["rtt_proxied"] = netlink.measure_rtt(link.ns_ip, link.peer_proxy_port)
    fs = pafs.S3FileSystem(endpoint_override=link.s3_endpoint, scheme="http", region="us-east-1")
    keys = [f"{BUCKET}/{PREFIX}/{Path(p).name}" for p in files]
    sizes = [Path(p).stat().st_size for p in files]

    def get(i: int) -> int:
        with fs.open_input_file(keys[i]) as f:
            return len(f.read_at(sizes[i], 0))  # one whole-object GET

    # Small GETs: the time of a request (signing, moto, two proxy crossings).
    t_small = []
    with fs.open_input_file(keys[0]) as f:
        for _ in range(10):
            t0 = time.perf_counter()
            f.read_at(4096, sizes[0] - 4096)
            t_small.append((time.perf_counter() - t0) * 1e3)
    out["s3_small_get_ms_median"] = statistics.median(t_small)
    # Whole-file GETs of the dataset's files, 4 at a time.
    chosen = list(range(min(len(files), max(4, (nbytes + sizes[0] - 1) // sizes[0]))))
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        got = sum(pool.map(get, chosen))
    dt = time.perf_counter() - t0
    out["s3_get"] = {
        "bytes": got,
        "seconds": dt,
        "bits_per_second": got * 8 / dt,
        "files": len(chosen),
        "concurrency": 4,
    }
    # The same, one GET at a time (a single stream: the round trip shows).
    t0 = time.perf_counter()
    got = sum(get(i) for i in chosen)
    dt = time.perf_counter() - t0
    out["s3_get_sequential"] = {
        "bytes": got,
        "seconds": dt,
        "bits_per_second": got * 8 / dt,
        "files": len(chosen),
        "concurrency": 1,
    }
    return out


def _timeline_text(tl: dict[str, Any] | None) -> str:
    if not tl:
        return ""
    return (
        f"; link: first byte at {tl['first_byte_seconds']:.2f} s, last at "
        f"{tl['last_byte_seconds']:.2f} s, {tl['rate_bits_per_second_first_to_last'] / 1e6:.0f} "
        f"Mbit/s between, idle {tl['idle_seconds_first_to_last']:.2f} s"
    )


def _fmt_mb(b: Any) -> str:
    return "-" if b is None else f"{b / 1e6:.1f}"


@contextlib.contextmanager
def _fresh_dir(root: str | None, name: str) -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix=f"sfbench-{name}-", dir=root))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _split(result: dict[str, Any], name: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """A result entry for a subset of a configuration's epochs (same process)."""
    out = dict(result)
    out["system"] = name
    out["runs"] = runs
    out["rows_per_second_median"] = statistics.median(r["rows_per_second"] for r in runs)
    out["seconds_median"] = statistics.median(r["seconds"] for r in runs)
    out["rows_per_run"] = runs[0]["rows"]
    return out


def _sum_extra(runs: list[dict[str, Any]], key: str) -> Any:
    vals = [r.get("extra", {}).get(key) for r in runs]
    if any(v is None for v in vals):
        return None
    return sum(vals)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rows", type=int, default=288_000, help="dataset rows (default ~300 MB)")
    p.add_argument("--files", type=int, default=24, help="Parquet files (each <= 16 MB)")
    p.add_argument("--row-group-rows", type=int, default=6_000, help="rows per row group")
    p.add_argument("--features", type=int, default=256, help="float32 feature columns")
    p.add_argument("--batch-size", type=int, default=4096)
    p.add_argument("--epochs", type=int, default=3, help="passes per configuration (>= 2)")
    p.add_argument("--threads", type=int, default=None, help="shardfeed num_threads")
    p.add_argument("--prefetch-bytes", type=int, default=None, help="Loader prefetch_bytes")
    p.add_argument("--rate", default="1gbit", help="link rate, tc syntax (default 1gbit)")
    p.add_argument("--delay-ms", type=float, default=2.0, help="one-way delay (RTT +2x)")
    p.add_argument("--check-bytes", type=int, default=128 << 20, help="bytes per link check")
    p.add_argument("--configs", default=",".join(CONFIGS), help=f"subset of {','.join(CONFIGS)}")
    p.add_argument("--cache-root", default=None, help="where the fresh cache folders go (tmp)")
    p.add_argument("--output", type=Path, default=common.RESULTS_DIR / "remote.json")
    p.add_argument("--timeout", type=float, default=900, help="seconds per configuration")
    # Internal: run one configuration in this process and emit its result.
    p.add_argument("--run-config", help=argparse.SUPPRESS)
    p.add_argument("--source", help=argparse.SUPPRESS)
    p.add_argument("--cache-dir", help=argparse.SUPPRESS)
    p.add_argument("--veth", help=argparse.SUPPRESS)
    p.add_argument("--rate-bps", type=float, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.run_config:
        run_config(args)
        return 0
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        raise SystemExit(f"unknown configurations {unknown}; choose from {CONFIGS}")
    if args.epochs < 2:
        raise SystemExit("--epochs must be >= 2 (epoch 1 is cold, 2+ warm)")
    rate_bps = rate_bits_per_second(args.rate)
    remote = [c for c in configs if c != "local"]
    if remote:
        try:
            netlink.ensure_tools()
        except netlink.LinkError as e:
            print(f"bench_remote: cannot set up the shaped link: {e}", file=sys.stderr)
            return 2
        for module in ("moto", "boto3", "flask"):
            if importlib.util.find_spec(module) is None:
                print(
                    f"bench_remote: needs {module} (pip install 'moto[server]' boto3)",
                    file=sys.stderr,
                )
                return 2

    spec = common.TabularSpec(
        rows=args.rows, files=args.files, row_group_rows=args.row_group_rows, features=args.features
    )
    print(f"dataset {spec.name} ...", file=sys.stderr, flush=True)
    dataset = common.ensure_tabular_dataset(spec)
    files = common.dataset_files(dataset)
    biggest = max(Path(f).stat().st_size for f in files)
    groups_per_file = min(len(spec.group_rows(r)) for r in spec.file_rows())
    if biggest > MAX_FILE_BYTES:
        print(
            f"bench_remote: files up to {biggest / 1e6:.1f} MB; moto loads a whole object per "
            f"ranged GET, so keep them <= {MAX_FILE_BYTES >> 20} MiB (use more --files)",
            file=sys.stderr,
        )
        return 2
    bytes_needed = dataset["bytes_on_disk"]  # every column is read
    print(
        f"dataset: {dataset['rows']:,} rows, {bytes_needed / 1e6:.1f} MB, {dataset['files']} "
        f"files (<= {biggest / 1e6:.1f} MB, >= {groups_per_file} row groups each)",
        file=sys.stderr,
        flush=True,
    )
    load_start = common.load_average()
    if load_start and load_start[0] > 0.5:
        print(
            f"warning: the machine is busy (load average {load_start[0]:.2f}); other work on "
            "the CPUs distorts the numbers",
            file=sys.stderr,
            flush=True,
        )
    s3mod = _load_s3_helpers()
    script = str(Path(__file__).resolve())
    results: dict[str, dict[str, Any]] = {}
    failures: dict[str, str] = {}
    link_info: dict[str, Any] = {}

    def child(config: str, source: str, veth: str | None, cache_dir: Path | None) -> None:
        argv = [
            script, "--run-config", config, "--source", source,
            "--features", str(args.features), "--batch-size", str(args.batch_size),
            "--epochs", str(args.epochs),
        ]  # fmt: skip
        if args.threads is not None:
            argv += ["--threads", str(args.threads)]
        if args.prefetch_bytes is not None:
            argv += ["--prefetch-bytes", str(args.prefetch_bytes)]
        if veth:
            argv += ["--veth", veth, "--rate-bps", str(rate_bps)]
        if cache_dir is not None:
            argv += ["--cache-dir", str(cache_dir / "cache")]
        print(f"  {config} ...", file=sys.stderr, flush=True)
        try:
            results[config] = common.run_child(argv, timeout=args.timeout)
        except Exception as e:  # report it and go on with the others
            failures[config] = f"{type(e).__name__}: {e}"
            print(f"  {config} FAILED: {failures[config]}", file=sys.stderr, flush=True)

    if "local" in configs:
        warm = common.warm_page_cache(files)
        print(f"  page cache warmed in {warm:.1f} s", file=sys.stderr, flush=True)
        child("local", dataset["path"], None, None)

    if remote:
        try:
            with (
                netlink.shaped_link(rate=args.rate, delay_ms=args.delay_ms) as link,
                s3mod.s3_env(),
            ):
                print(
                    f"link: {link.root_ip} <-> {link.ns_ip} in namespace {link.namespace}, "
                    f"tbf {args.rate}, +{args.delay_ms} ms each way (proxy :{link.proxy_port} "
                    f"-> moto :{link.moto_port})",
                    file=sys.stderr,
                    flush=True,
                )
                uri, up_s = _upload(link, s3mod, files)
                print(f"  uploaded in {up_s:.1f} s: {uri}", file=sys.stderr, flush=True)
                link_info = _check_link(link, files, args.check_bytes)
                link_info["upload_seconds"] = round(up_s, 2)
                print(
                    "  link check: raw TCP {:.0f} Mbit/s direct, {:.0f} Mbit/s via proxy; "
                    "RTT {:.2f} ms direct, {:.2f} ms via proxy; S3 GET {:.0f} Mbit/s x4, "
                    "{:.0f} Mbit/s x1; small S3 GET {:.1f} ms".format(
                        link_info["tcp_direct"]["bits_per_second"] / 1e6,
                        link_info["tcp_proxied"]["bits_per_second"] / 1e6,
                        link_info["rtt_direct"]["median_ms"],
                        link_info["rtt_proxied"]["median_ms"],
                        link_info["s3_get"]["bits_per_second"] / 1e6,
                        link_info["s3_get_sequential"]["bits_per_second"] / 1e6,
                        link_info["s3_small_get_ms_median"],
                    ),
                    file=sys.stderr,
                    flush=True,
                )
                for config in remote:
                    cpu0 = link.cpu_seconds()
                    with _fresh_dir(args.cache_root, config) as d:
                        child(config, uri, link.veth_root, d if config != "s3_nocache" else None)
                    cpu1 = link.cpu_seconds()
                    if config in results:  # moto's and the proxy's CPU while it ran
                        results[config]["server_cpu_seconds"] = {
                            k: round(cpu1[k] - cpu0.get(k, 0.0), 2) for k in cpu1 if k != "peer"
                        }
                link_info["qdisc"] = link.qdisc_stats()
        except netlink.LinkError as e:
            print(f"bench_remote: the shaped link failed: {e}", file=sys.stderr)
            return 2
        except (netlink.Terminated, KeyboardInterrupt) as e:
            print(f"bench_remote: interrupted ({e or 'Ctrl-C'}); link removed", file=sys.stderr)
            return 130

    # ---- derived numbers ----------------------------------------------------------
    payload_bps = link_info.get("tcp_proxied", {}).get("bits_per_second")
    ideal_nominal = bytes_needed * 8 / rate_bps
    ideal_measured = bytes_needed * 8 / payload_bps if payload_bps else None
    entries: list[dict[str, Any]] = []
    summary: dict[str, dict[str, Any]] = {}
    checksums: dict[str, list[float]] = {}
    for config in configs:
        if config not in results:
            continue
        r = results[config]
        runs = r["runs"]
        checksums[config] = [run["checksum"] for run in runs]
        if config == "local":
            # Epoch 1 pays one-time costs (threads, first allocations); the baseline that
            # the warm remote epochs are held to is the local warm epochs.
            entries += [_split(r, "local_epoch1", runs[:1]), _split(r, "local_warm", runs[1:])]
            summary[config] = {
                "epoch1_rps": entries[-2]["rows_per_second_median"],
                "warm_rps": entries[-1]["rows_per_second_median"],
            }
            continue
        e1 = _split(r, f"{config}_epoch1", runs[:1])
        e2 = _split(r, f"{config}_warm", runs[1:])
        s1 = runs[0]["seconds"]
        e1["extra"] = {
            **r["extra"],
            "bytes_needed": bytes_needed,
            "ideal_seconds_nominal_rate": round(ideal_nominal, 4),
            "ideal_seconds_measured_rate": None
            if ideal_measured is None
            else round(ideal_measured, 4),
            "epoch1_over_ideal_nominal": round(s1 / ideal_nominal, 4),
            "epoch1_over_ideal_measured": None
            if ideal_measured is None
            else round(s1 / ideal_measured, 4),
            "epoch1_plus_open_over_ideal_nominal": round(
                (s1 + r["extra"]["open_seconds"]) / ideal_nominal, 4
            ),
        }
        e2["extra"] = {
            "remote_bytes_epochs_2plus": _sum_extra(runs[1:], "remote_bytes"),
            "wire_bytes_epochs_2plus": _sum_extra(runs[1:], "wire_bytes"),
        }
        entries += [e1, e2]
        summary[config] = {
            "epoch1_seconds": s1,
            "epoch1_rps": e1["rows_per_second_median"],
            "epoch1_over_ideal": s1 / ideal_nominal,
            "epoch1_over_ideal_measured": None if ideal_measured is None else s1 / ideal_measured,
            "epoch1_remote_bytes": runs[0].get("extra", {}).get("remote_bytes"),
            "epoch1_wire_bytes": runs[0].get("extra", {}).get("wire_bytes"),
            "warm_rps": e2["rows_per_second_median"],
            "warm_remote_bytes": e2["extra"]["remote_bytes_epochs_2plus"],
            "warm_wire_bytes": e2["extra"]["wire_bytes_epochs_2plus"],
        }

    # ---- aims ---------------------------------------------------------------------
    aims: list[dict[str, Any]] = []

    def aim(name: str, value: Any, target: float, compare: str) -> None:
        ok = value is not None and (value <= target if compare == "<=" else value >= target)
        shown = None if value is None else round(value, 4)
        aims.append(
            {"ratio": name, "target": target, "compare": compare, "value": shown, "met": bool(ok)}
        )

    for config in ("s3_nocache", "s3_filecache", "s3_decoded"):
        if config in summary:
            aim(f"{config}_epoch1 seconds / ideal (bytes / {args.rate})",
                summary[config]["epoch1_over_ideal"], EPOCH1_AIM, "<=")  # fmt: skip
    local_rps = summary.get("local", {}).get("warm_rps")
    for config in ("s3_filecache", "s3_decoded"):
        if config in summary:
            aim(f"{config}_warm remote_bytes", summary[config]["warm_remote_bytes"], 0, "<=")
            if local_rps:
                aim(f"{config}_warm/local_warm", summary[config]["warm_rps"] / local_rps, 1.0, ">=")
    if "s3_filecache" in summary and "s3_decoded" in summary:
        aim("s3_decoded_warm/s3_filecache_warm",
            summary["s3_decoded"]["warm_rps"] / summary["s3_filecache"]["warm_rps"],
            DECODED_AIM, ">=")  # fmt: skip

    same_stream = None
    if len(checksums) > 1:
        ref_sums = next(iter(checksums.values()))
        same_stream = all(v == ref_sums for v in checksums.values())

    config_doc = {
        "batch_size": args.batch_size,
        "epochs": args.epochs,
        "output": "torch [batch, features] float32 + label int64, shuffle=True, seed 0",
        "shardfeed_threads": args.threads,
        "prefetch_bytes": args.prefetch_bytes,
        "configs": configs,
        "link": {
            "rate": args.rate,
            "rate_bits_per_second": rate_bps,
            "one_way_delay_ms": args.delay_ms,
            "shaping": "tc tbf on both ends of a veth pair into a network namespace",
            "delay": "userspace asyncio proxy, per-chunk schedule (arrival + delay)",
            "server": "moto (python -m moto.server) inside the namespace",
            "measured": link_info,
        },
        "bytes_needed": bytes_needed,
        "ideal_epoch1_seconds_nominal_rate": ideal_nominal,
        "ideal_epoch1_seconds_measured_rate": ideal_measured,
        "page_cache": "warm for local (files read once first); cache folders fresh per config",
        "process_per_config": True,
        "load_average_start": load_start,
        "load_average_end": common.load_average(),
        "failures": failures,
    }
    notes = [
        "epoch1 = the first pass (cold cache); warm = epochs 2.. (median).",
        "remote_bytes: the loader's counter; wire_bytes: bytes the root end of the veth "
        "received from the namespace (headers and S3 responses included).",
        "ideal = bytes_needed (all files: every column is read) / link rate; measured-rate "
        "variant uses the raw TCP payload rate through the proxy.",
        "moto, the delay proxy and the loader share this machine's CPUs.",
        "aims: epoch1 <= 1.15x ideal; warm remote bytes == 0 and rows/s >= local_warm "
        "(local disk, page cache warm, epochs 2..); "
        "decoded warm >= 3x file cache warm.",
    ]
    if same_stream is not None:
        notes.append(
            "same stream in every configuration (per-epoch checksums equal): "
            + ("yes" if same_stream else f"NO: {json.dumps(checksums)}")
        )
    if failures:
        notes.append(f"failed configurations: {json.dumps(failures)}")
    reference = "local_warm" if "local" in results else None
    out, doc = common.write_results(
        "remote", dataset, config_doc, entries, reference=reference, notes=notes, path=args.output
    )
    doc["targets"] = aims
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    tmp.replace(out)

    print(_table(doc, summary, results, configs, bytes_needed, ideal_nominal, ideal_measured))
    print(f"\nresults: {out}")
    return 1 if failures else 0


def _table(
    doc: dict[str, Any],
    summary: dict[str, Any],
    results: dict[str, Any],
    configs: list[str],
    bytes_needed: int,
    ideal_nominal: float,
    ideal_measured: float | None,
) -> str:
    link = doc["config"]["link"]
    m = link.get("measured") or {}
    lines = []
    if m:
        lines.append(
            f"link: tbf {link['rate']}, +{link['one_way_delay_ms']} ms each way | measured: "
            "raw TCP "
            f"{m['tcp_direct']['bits_per_second'] / 1e6:.0f} Mbit/s direct, "
            f"{m['tcp_proxied']['bits_per_second'] / 1e6:.0f} Mbit/s via proxy; "
            f"RTT {m['rtt_direct']['median_ms']:.2f} ms direct, "
            f"{m['rtt_proxied']['median_ms']:.2f} ms via proxy; "
            f"S3 GET x4 {m['s3_get']['bits_per_second'] / 1e6:.0f} Mbit/s, "
            f"x1 {m['s3_get_sequential']['bits_per_second'] / 1e6:.0f} Mbit/s; "
            f"small S3 GET {m['s3_small_get_ms_median']:.1f} ms"
        )
    lines.append(
        f"bytes needed {bytes_needed / 1e6:.1f} MB -> ideal epoch 1 {ideal_nominal:.2f} s at "
        f"{link['rate']}"
        + (f" ({ideal_measured:.2f} s at the measured TCP rate)" if ideal_measured else "")
    )
    header = (
        f"{'config':<14} {'epoch':>5} {'seconds':>8} {'rows/s':>11} {'MB/s':>7} "
        f"{'remote MB':>10} {'wire MB':>8} {'hits/miss':>10} {'x ideal':>8} {'x local':>8}"
    )
    lines += [header, "-" * len(header)]
    bpr = doc["dataset"]["bytes_on_disk"] / max(1, doc["dataset"]["rows"])
    local_rps = summary.get("local", {}).get("warm_rps")
    for config in configs:
        if config not in results:
            lines.append(f"{config:<14} FAILED: {doc['config']['failures'].get(config, '?')}")
            continue
        r = results[config]
        for i, run in enumerate(r["runs"]):
            ex = run.get("extra", {})
            rps = run["rows_per_second"]
            hits = ex.get("cache_hits")
            hm = (
                "-"
                if hits is None or config in ("local", "s3_nocache")
                else (f"{hits}/{ex.get('cache_misses')}")
            )
            if config == "s3_decoded" and ex.get("decoded_hits") is not None:
                hm += f" d{ex.get('decoded_hits')}/{ex.get('decoded_misses')}"
            xi = f"{run['seconds'] / ideal_nominal:.2f}" if i == 0 and config != "local" else ""
            xl = f"{rps / local_rps:.2f}" if local_rps else "-"
            lines.append(
                f"{config:<14} {i + 1:>5} {run['seconds']:>8.2f} {rps:>11,.0f} "
                f"{rps * bpr / 1e6:>7.0f} "
                f"{_fmt_mb(ex.get('remote_bytes')):>10} {_fmt_mb(ex.get('wire_bytes')):>8} "
                f"{hm:>10} {xi:>8} {xl:>8}"
            )
        ex = r.get("extra", {})
        tl = r["runs"][0].get("extra", {}).get("link_timeline")
        if tl:
            lines.append(f"{'':<14} epoch 1{_timeline_text(tl)}")
        lines.append(
            f"{'':<14} open {ex.get('open_seconds', 0):.2f} s, "
            f"wire {_fmt_mb(ex.get('open_wire_bytes'))} MB, "
            f"peak RSS {r['peak_rss_mb']:.0f} MB, server CPU {r.get('server_cpu_seconds', {})} s, "
            f"other load {r.get('background', {}).get('other_cpu_share', float('nan')):.0%}, "
            f"cache on disk "
            f"{ {k: round(v / 1e6, 1) for k, v in ex.get('cache_disk_bytes', {}).items()} } MB"
        )
    for t in doc["targets"]:
        v = t["value"]
        shown = "n/a" if v is None else f"{v:.3f}"
        lines.append(
            f"aim {t['ratio']} {t['compare']} {t['target']}: {shown} "
            f"({'met' if t['met'] else 'NOT met'})"
        )
    for n in doc["notes"]:
        if n.startswith("same stream") or n.startswith("failed"):
            lines.append(n)
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
