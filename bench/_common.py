"""Shared parts of the shardfeed benchmarks.

* a synthetic tabular dataset (float32 feature columns + an int64 label), generated once,
  chunk by chunk, into ``bench/data/<name>/`` and reused while its marker file matches;
* timing, peak-RSS and child-process helpers: each system runs in its own subprocess so
  that its peak RSS is its own;
* the one result format every benchmark writes to ``bench/results/<benchmark>.json``.

Result format (``RESULT_FORMAT_VERSION``)::

    {
      "format_version": 1,
      "benchmark": "core",
      "timestamp": "2025-01-01T00:00:00+00:00",
      "machine": {"cpus": 2, "python": "3.11.7", "torch": "...", "pyarrow": "...", ...},
      "dataset": {"name": ..., "path": ..., "rows": ..., "bytes_on_disk": ..., "files": ...,
                  "row_groups": ..., ...},
      "config": {...benchmark-specific settings...},
      "results": [
        {"system": "shardfeed", "rows_per_second_median": ..., "seconds_median": ...,
         "rows_per_second_first": ..., "rows_per_run": ...,
         "runs": [{"rows": ..., "seconds": ..., "rows_per_second": ..., "checksum": ...,
                   "extra": {...}}],
         "peak_rss_mb": ..., "peak_rss_self_mb": ..., "peak_rss_children_max_mb": ...,
         "baseline_rss_mb": ..., "notes": "...", "extra": {...},
         "background": {"wall_seconds": ..., "own_cpu_seconds": ...,
                        "other_cpu_seconds": ..., "other_cpu_share": ...}}
      ],
      "reference": "shardfeed",
      "ratios": {"shardfeed/diy_main": ..., "diy_main/shardfeed": ..., ...},
      "targets": [{"ratio": "shardfeed/diy_main", "target": 3.0, "value": ..., "met": ...}],
      "notes": ["..."]
    }
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
DATA_DIR = BENCH_DIR / "data"
RESULTS_DIR = BENCH_DIR / "results"
RESULT_FORMAT_VERSION = 1
MARKER = "_dataset.json"  # leading "_": pyarrow.dataset and shardfeed skip it
CHILD_PREFIX = "@@bench-result@@ "


# --------------------------------------------------------------------------------------
# Dataset
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TabularSpec:
    """A synthetic tabular dataset: ``features`` float32 columns + an int64 ``label``."""

    rows: int = 1_100_000
    files: int = 8
    row_group_rows: int = 68_750
    features: int = 256
    classes: int = 10
    seed: int = 0
    compression: str = "snappy"
    page_checksums: bool = False  # write a CRC32 per page (what the reader then verifies)

    @property
    def feature_names(self) -> list[str]:
        return [f"f{i:03d}" for i in range(self.features)]

    @property
    def name(self) -> str:
        return (
            f"tabular_f{self.features}_r{self.rows}_n{self.files}"
            f"_g{self.row_group_rows}_s{self.seed}_{self.compression}"
            + ("_crc" if self.page_checksums else "")
        )

    def file_rows(self) -> list[int]:
        """Rows per file (the first ``rows % files`` files get one more)."""
        base, extra = divmod(self.rows, self.files)
        return [base + (1 if i < extra else 0) for i in range(self.files)]

    def group_rows(self, rows_in_file: int) -> list[int]:
        """Row-group sizes of one file; at least 2 groups when the file is small."""
        target = min(self.row_group_rows, max(1, math.ceil(rows_in_file / 2)))
        sizes = [target] * (rows_in_file // target)
        if rows_in_file % target:
            sizes.append(rows_in_file % target)
        return sizes


def _fingerprint(spec: TabularSpec) -> dict[str, Any]:
    return {"generator": "bench._common.tabular/1", **asdict(spec)}


def _dataset_matches(path: Path, fingerprint: dict[str, Any]) -> dict[str, Any] | None:
    marker = path / MARKER
    if not marker.is_file():
        return None
    try:
        meta = json.loads(marker.read_text())
    except (OSError, ValueError):
        return None
    if meta.get("spec") != fingerprint:
        return None
    for f in meta.get("files", []):
        p = path / f["name"]
        if not p.is_file() or p.stat().st_size != f["bytes"]:
            return None
    return dict(meta)


def generated_dataset(
    root: Path,
    name: str,
    fingerprint: dict[str, Any],
    write: Callable[[Path], tuple[list[dict[str, Any]], dict[str, Any]]],
) -> dict[str, Any]:
    """The marker of dataset ``root/name``, generated first unless a copy made from the same
    ``fingerprint`` is there with every file at its recorded size.

    ``write(folder)`` writes the files into an empty temporary folder and returns their list
    (``name``, ``rows``, ``bytes``) and further marker fields; the folder is then renamed into
    place, so an interrupted generation never looks complete.
    """
    path = root / name
    meta = _dataset_matches(path, fingerprint)
    if meta is not None:
        return meta
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".tmp-{name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    t0 = time.perf_counter()
    files, extra = write(tmp)
    meta = {
        "spec": fingerprint,
        "files": files,
        **extra,
        "generation_seconds": round(time.perf_counter() - t0, 2),
    }
    (tmp / MARKER).write_text(json.dumps(meta, indent=2) + "\n")
    shutil.rmtree(path, ignore_errors=True)
    tmp.rename(path)
    return meta


def ensure_tabular_dataset(spec: TabularSpec, root: Path = DATA_DIR) -> dict[str, Any]:
    """Generates the dataset under ``root/spec.name`` unless a matching copy is there.

    Memory stays at about one row group of data: each row group is generated, written and
    dropped before the next.  Features are standard normal float32 drawn from a numpy
    generator seeded by ``(seed, file, row_group)``; the label is uniform in
    ``[0, classes)``.  Written to a temporary folder, then renamed into place.

    Returns the dataset description used in the result JSON.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = root / spec.name
    names = spec.feature_names
    schema = pa.schema([*(pa.field(n, pa.float32()) for n in names), ("label", pa.int64())])

    def write(tmp: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        files = []
        row_groups = 0
        for fi, n_rows in enumerate(spec.file_rows()):
            fname = f"part-{fi:05d}.parquet"
            with pq.ParquetWriter(
                tmp / fname,
                schema,
                compression=spec.compression,
                use_dictionary=["label"],  # random floats do not dictionary-encode
                write_page_checksum=spec.page_checksums,
            ) as writer:
                for gi, g_rows in enumerate(spec.group_rows(n_rows)):
                    rng = np.random.default_rng([spec.seed, fi, gi])
                    # (features, rows): each feature column is contiguous.
                    x = rng.standard_normal((spec.features, g_rows), dtype=np.float32)
                    y = rng.integers(0, spec.classes, size=g_rows, dtype=np.int64)
                    arrays = [pa.array(x[j]) for j in range(spec.features)]
                    arrays.append(pa.array(y))
                    writer.write_table(
                        pa.Table.from_arrays(arrays, schema=schema), row_group_size=g_rows
                    )
                    row_groups += 1
                    del x, y, arrays
            files.append({"name": fname, "rows": n_rows, "bytes": (tmp / fname).stat().st_size})
            print(
                f"  generated {fname}: {n_rows} rows, {files[-1]['bytes'] / 1e6:.1f} MB",
                file=sys.stderr,
                flush=True,
            )
        return files, {"row_groups": row_groups}

    meta = generated_dataset(root, spec.name, _fingerprint(spec), write)
    files = meta["files"]
    return {
        "name": spec.name,
        "path": str(path),
        "rows": sum(f["rows"] for f in files),
        "bytes_on_disk": sum(f["bytes"] for f in files),
        "files": len(files),
        "row_groups": meta["row_groups"],
        "features": spec.features,
        "feature_dtype": "float32",
        "label_dtype": "int64",
        "row_group_rows": spec.row_group_rows,
        "compression": spec.compression,
        "seed": spec.seed,
    }


def dataset_files(dataset: dict[str, Any]) -> list[str]:
    """The dataset's Parquet files, sorted."""
    return sorted(str(p) for p in Path(dataset["path"]).glob("*.parquet"))


def warm_page_cache(paths: Iterable[str], chunk: int = 16 << 20) -> float:
    """Reads every file once so that all systems start from a warm page cache."""
    t0 = time.perf_counter()
    for p in paths:
        with open(p, "rb", buffering=0) as f:
            while f.read(chunk):
                pass
    return time.perf_counter() - t0


# --------------------------------------------------------------------------------------
# Measuring (inside a child process)
# --------------------------------------------------------------------------------------


def load_average() -> list[float]:
    """1, 5 and 15 minute load averages (other work on the CPUs distorts a benchmark)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def rss_mb() -> float:
    """Current resident set size of this process, in MB (Linux /proc)."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 1e6
    except (OSError, ValueError):
        return float("nan")


def peak_rss() -> dict[str, float]:
    """Peak RSS in MB: this process, its largest reaped child, and their sum.

    ``ru_maxrss`` is in KiB on Linux.  ``RUSAGE_CHILDREN`` reports the largest single
    terminated (waited-for) descendant, not a sum; pages a forked worker shares with its
    parent count in both, so the sum over-states a forked pool somewhat.
    """
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024 / 1e6
    return {"self_mb": own, "children_max_mb": children, "total_mb": own + children}


@dataclass
class Run:
    """One timed pass."""

    rows: int
    seconds: float
    checksum: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else float("nan")


def timed(fn: Callable[[], tuple[int, float]]) -> Run:
    """Times ``fn`` (which returns ``(rows, checksum)``) with a monotonic clock."""
    t0 = time.perf_counter()
    rows, checksum = fn()
    return Run(rows=rows, seconds=time.perf_counter() - t0, checksum=checksum)


def summarize(
    system: str,
    runs: Sequence[Run],
    baseline_rss_mb: float,
    notes: str = "",
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One entry of ``results``; peak RSS is read now (call it at the end of the child)."""
    rss = peak_rss()
    return {
        "system": system,
        "rows_per_second_median": statistics.median(r.rows_per_second for r in runs),
        "seconds_median": statistics.median(r.seconds for r in runs),
        # The first pass pays for fresh memory (page faults, allocator growth): shown apart.
        "rows_per_second_first": runs[0].rows_per_second if runs else float("nan"),
        "rows_per_run": runs[0].rows if runs else 0,
        "runs": [
            {
                "rows": r.rows,
                "seconds": round(r.seconds, 4),
                "rows_per_second": round(r.rows_per_second, 1),
                "checksum": r.checksum,
                **({"extra": r.extra} if r.extra else {}),
            }
            for r in runs
        ],
        "peak_rss_mb": round(rss["total_mb"], 1),
        "peak_rss_self_mb": round(rss["self_mb"], 1),
        "peak_rss_children_max_mb": round(rss["children_max_mb"], 1),
        "baseline_rss_mb": round(baseline_rss_mb, 1),
        "notes": notes,
        "extra": extra or {},
    }


def emit_child_result(result: dict[str, Any]) -> None:
    """Hands a child's result to the parent (one tagged JSON line on stdout)."""
    sys.stdout.write(CHILD_PREFIX + json.dumps(result) + "\n")
    sys.stdout.flush()


# --------------------------------------------------------------------------------------
# Orchestrating (in the parent)
# --------------------------------------------------------------------------------------


def _busy_cpu_seconds() -> float | None:
    """CPU seconds the whole machine spent busy since boot (all CPUs, from /proc/stat)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_systems(
    script: str, systems: Sequence[str], root: Path, runs: int, threads: int
) -> list[dict[str, Any]]:
    """Each system of ``script`` in a fresh process of its own (``script --child SYSTEM
    --root ROOT --runs N --threads T``), one after the other; their results in order."""
    shared = ["--root", str(root), "--runs", str(runs), "--threads", str(threads)]
    return [run_child([script, "--child", system, *shared]) for system in systems]


def add_system_arguments(parser: argparse.ArgumentParser, runs: int) -> None:
    """``--runs`` (default ``runs``) and ``--threads``, and the ``--child``/``--root``
    that ``run_systems`` gives each system's process."""
    parser.add_argument("--runs", type=int, default=runs)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--child", default=None)
    parser.add_argument("--root", default=None)


def summarize_first_batch(
    system: str, runs: Sequence[Run], baseline_rss_mb: float
) -> dict[str, Any]:
    """``summarize``, with the median of the runs' ``extra["first_batch_seconds"]``."""
    firsts = sorted(r.extra["first_batch_seconds"] for r in runs)
    extra = {"first_batch_seconds_median": firsts[len(firsts) // 2]}
    return summarize(system, runs, baseline_rss_mb, extra=extra)


def run_child(
    argv: Sequence[str], timeout: float | None = None, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Runs ``python argv...`` in a fresh process; returns the result it emitted.

    ``env``: variables set in the child on top of this process's environment.

    The child's stderr passes through; its stdout is scanned for the tagged result line.
    The result gets ``"background"``: CPU seconds the rest of the machine used while the
    child ran (busy time from /proc/stat minus the child's own), as a share of the
    machine's CPU capacity over that time -- a check that nothing else distorted it.
    """
    busy0, own0, t0 = _busy_cpu_seconds(), _children_cpu_seconds(), time.perf_counter()
    proc = subprocess.run(
        [sys.executable, *argv],
        stdout=subprocess.PIPE,
        text=True,
        timeout=timeout,
        check=False,
        env=None if env is None else {**os.environ, **env},
    )
    result = None
    for line in proc.stdout.splitlines():
        if line.startswith(CHILD_PREFIX):
            result = json.loads(line[len(CHILD_PREFIX) :])
        elif line.strip():
            print(line, file=sys.stderr)
    if proc.returncode != 0 or result is None:
        raise RuntimeError(f"child {argv} failed with exit status {proc.returncode}")
    wall = time.perf_counter() - t0
    busy1, own = _busy_cpu_seconds(), _children_cpu_seconds() - own0
    if busy0 is not None and busy1 is not None:
        other = max(0.0, (busy1 - busy0) - own)
        result["background"] = {
            "wall_seconds": round(wall, 2),
            "own_cpu_seconds": round(own, 2),
            "other_cpu_seconds": round(other, 2),
            "other_cpu_share": round(other / (wall * (os.cpu_count() or 1)), 3),
        }
    return dict(result)


def machine_info() -> dict[str, Any]:
    """Versions and hardware that the numbers depend on."""
    info: dict[str, Any] = {
        "cpus": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "platform": platform.platform(),
        "processor": _cpu_model(),
        "memory_gb": _memory_gb(),
        "python": platform.python_version(),
    }
    for module in ("torch", "pyarrow", "numpy", "shardfeed"):
        try:
            info[module] = __import__(module).__version__
        except Exception:  # best effort: the benchmark still runs
            info[module] = None
    info["git_commit"] = _git_commit()
    return info


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _memory_gb() -> float | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9, 1)
    except (OSError, ValueError):
        return None


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(BENCH_DIR), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        )
        dirty = subprocess.run(
            ["git", "-C", str(BENCH_DIR), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return None


def ratios(
    results: Sequence[dict[str, Any]], reference: str, key: str = "rows_per_second_median"
) -> dict[str, float]:
    """``ref/other`` and ``other/ref`` of ``key`` for every other system."""
    by_name = {r["system"]: r[key] for r in results}
    ref = by_name[reference]
    out: dict[str, float] = {}
    for name, value in by_name.items():
        if name == reference:
            continue
        out[f"{reference}/{name}"] = round(ref / value, 3) if value else float("nan")
        out[f"{name}/{reference}"] = round(value / ref, 3) if ref else float("nan")
    return out


def check_targets(
    ratio_values: dict[str, float], targets: dict[str, float]
) -> list[dict[str, Any]]:
    """Compares ratios with their aims (``value >= target``)."""
    return [
        {
            "ratio": name,
            "target": target,
            "value": ratio_values.get(name),
            "met": bool(ratio_values.get(name, float("nan")) >= target),
        }
        for name, target in targets.items()
    ]


def write_results(
    benchmark: str,
    dataset: dict[str, Any],
    config: dict[str, Any],
    results: list[dict[str, Any]],
    reference: str | None = None,
    targets: dict[str, float] | None = None,
    notes: Sequence[str] = (),
    path: Path | None = None,
) -> tuple[Path, dict[str, Any]]:
    """Writes the one result format to ``bench/results/<benchmark>.json``."""
    ratio_values = ratios(results, reference) if reference else {}
    doc = {
        "format_version": RESULT_FORMAT_VERSION,
        "benchmark": benchmark,
        "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "dataset": dataset,
        "config": config,
        "results": results,
        "reference": reference,
        "ratios": ratio_values,
        "targets": check_targets(ratio_values, targets or {}),
        "notes": list(notes),
    }
    out = path or RESULTS_DIR / f"{benchmark}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    tmp.replace(out)
    return out, doc


def format_table(doc: dict[str, Any]) -> str:
    """A readable table of a result document."""
    ref = doc.get("reference")
    by_name = {r["system"]: r for r in doc["results"]}
    ref_rps = by_name[ref]["rows_per_second_median"] if ref in by_name else None
    header = (
        f"{'system':<24} {'rows/s (median)':>16} {'MB/s':>8} {'s/pass':>8} "
        f"{'x vs ref':>9} {'ref x':>7} {'1st pass rows/s':>16} {'peak RSS MB':>12}"
    )
    bytes_per_row = doc["dataset"]["bytes_on_disk"] / max(1, doc["dataset"]["rows"])
    lines = [header, "-" * len(header)]
    # MB/s: on-disk bytes per row times rows/s.
    for r in doc["results"]:
        rps = r["rows_per_second_median"]
        rel = f"{rps / ref_rps:.2f}" if ref_rps else "-"
        inv = f"{ref_rps / rps:.2f}" if ref_rps and rps else "-"
        lines.append(
            f"{r['system']:<24} {rps:>16,.0f} {rps * bytes_per_row / 1e6:>8.0f} "
            f"{r['seconds_median']:>8.2f} {rel:>9} {inv:>7} "
            f"{r.get('rows_per_second_first', float('nan')):>16,.0f} {r['peak_rss_mb']:>12.0f}"
        )
    for t in doc.get("targets", []):
        value = t["value"]
        shown = f"{value:.2f}" if value is not None else "n/a"
        lines.append(
            f"aim {t['ratio']} >= {t['target']}: {shown} ({'met' if t['met'] else 'NOT met'})"
        )
    return "\n".join(lines)


def _stat_seconds(pid: str, with_children: bool) -> float:
    """utime + stime (+ reaped children's) of a process from /proc, in seconds."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0  # it exited meanwhile (then its parent's children time has it)
    ticks = sum(int(v) for v in fields[11 : 15 if with_children else 13])
    return ticks / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds() -> float:
    """CPU seconds of this process (all threads), its reaped children and its live ones
    (DataLoader workers), from /proc."""
    total = _stat_seconds("self", with_children=True)
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return total
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/children") as f:
                kids = f.read().split()
        except OSError:
            continue
        total += sum(_stat_seconds(pid, with_children=True) for pid in kids)
    return total
