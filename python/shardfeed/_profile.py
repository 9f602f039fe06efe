"""``shardfeed profile``: run the pipeline against a simulated training step and
say which stage keeps the accelerator waiting."""

from __future__ import annotations

import fnmatch
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from ._check import check_source
from ._errors import ColumnNotFoundError, InvalidArgumentError, StorageError
from ._loader import Loader

_STAGES = ("fetch", "read", "decode", "transform", "assemble", "deliver")
_ADVICE = {
    "fetch": "remote storage is the limit; use a node-local cache (cache_dir=) and prefetch",
    "read": "storage reads are the limit; use faster local disks or the page cache",
    "decode": "add threads or enable the decoded cache",
    "transform": "add threads, or move heavy transforms off the critical path",
    "assemble": "add threads, or stack fewer columns",
    "deliver": "the Python transform or conversion is slow; use built-in transforms or "
    "TorchDataset worker processes",
}
# The consumer waiting more than this share of the time means the loader is the bottleneck.
INPUT_BOUND = 0.05
# Decodes waiting for room under memory_limit for at least this share of the consumer's wait
# mean the budget, not a stage, is what holds the loader back.
BUDGET_BOUND = 0.5


def verdict(report: dict[str, Any]) -> str:
    """Plain words for a profile report (see ``profile``)."""
    wait = report["consumer_wait_fraction"]
    stages = report["stages"]
    busy = {s: stages[s] for s in _STAGES if stages.get(s, 0) > 0}
    worker_total = max(report["threads"] * report["wall_seconds"], 1e-12)
    memory = report.get("memory") or {}
    held = float(memory.get("wait_seconds") or 0.0)  # decodes ahead held back by the budget
    waited = wait * max(report["wall_seconds"] - report.get("startup_seconds", 0.0), 0.0)
    # Decodes of the consumer's next batch that found no room (and went ahead past the
    # limit): the budget had kept them from being decoded ahead.
    late = int(memory.get("over_limit") or 0)
    if wait > INPUT_BOUND and memory.get("limit_bytes") and (held >= BUDGET_BOUND * waited or late):
        limit = int(memory["limit_bytes"])
        return (f"input-bound: the memory budget holds the engine back: "
                f"{int(memory.get('waits') or 0)} decodes waited {held:.2f} s for room under "
                f"memory_limit={-(-limit // 2**20):,}MiB and {late} of the consumer's next "
                f"batch found none (the consumer waited {wait:.0%} of the time); raise "
                "memory_limit, or write smaller row groups")  # fmt: skip
    if wait > INPUT_BOUND and busy:
        worst = max(busy, key=lambda s: busy[s])
        if worst == "deliver":
            share = stages["deliver"] / max(report["wall_seconds"], 1e-12)
            return (f"input-bound: the consumer waited {wait:.0%} of the time; deliver takes "
                    f"{share:.0%} of wall time; {_ADVICE['deliver']}")  # fmt: skip
        share = busy[worst] / worker_total
        return (f"input-bound: {worst} takes {share:.0%} of worker time (the consumer waited "
                f"{wait:.0%} of the time); {_ADVICE[worst]}")  # fmt: skip
    return (f"compute-bound: the training step is the bottleneck; the loader kept up (the "
            f"consumer waited {wait:.1%} of the time)")  # fmt: skip


def effective_window(sample_ids: list[np.ndarray], row_group_starts: np.ndarray) -> float | None:
    """W_eff of the batches seen: 1 / the mean over batches of the chance that two rows of a
    batch come from the same row group.  In row-group order it is 1; a full shuffle of R
    equal row groups scores about R.  ``None`` when no batch held two rows of one row group
    (or none held two rows)."""
    chances = []
    for ids in sample_ids:
        b = len(ids)
        if b < 2:
            continue
        groups = np.searchsorted(row_group_starts, ids, side="right") - 1
        counts = np.bincount(groups).astype(np.float64)
        chances.append(float((counts * (counts - 1)).sum()) / (b * (b - 1)))
    mean = float(np.mean(chances)) if chances else 0.0
    return 1.0 / mean if mean > 0 else None


def _columns(names: list[str], pattern: str) -> list[str]:
    picked: list[str] = []
    for part in pattern.split(","):
        part = part.strip()
        matches = [n for n in names if fnmatch.fnmatchcase(n, part)]
        if not matches and any(c in part for c in "*?["):
            raise ColumnNotFoundError(f"pattern {part!r} matches no column of the dataset")
        picked.extend(m for m in (matches or [part]) if m not in picked)
    return picked


def _selection(
    dataset: Any, columns: str | None, stack: str | None
) -> tuple[list[str] | None, dict[str, list[str]] | None]:
    """The Loader's columns and stack from the command line's patterns."""
    names = [n for n, _ in dataset.schema()]
    stack_arg = None
    if stack:
        name, eq, pattern = stack.partition("=")
        if not eq or not name.strip() or not pattern.strip():
            raise InvalidArgumentError(f"--stack takes NAME=PATTERNS (e.g. x='f*'), got {stack!r}")
        stack_arg = {name: _columns(names, pattern)}
    cols = _columns(names, columns) if columns else None
    if cols is None and stack_arg:
        cols = [n for n in names if n not in stack_arg[next(iter(stack_arg))]]
    return cols, stack_arg


def memory_plan(
    source: str | list[str],
    columns: str | None = None,
    stack: str | None = None,
    batch_size: int = 1024,
    threads: int | None = None,
    **loader_args: Any,
) -> dict[str, Any]:
    """What a Loader with these settings will hold and how well it will mix, from the
    footers alone (``shardfeed info``'s ``plan``): the shuffle window, the expected
    peak of ``stats()["memory"]["peak_bytes"]`` and the expected W_eff."""
    from ._options import reusing_catalogs

    with reusing_catalogs():  # the footers read once, for the patterns and the Loader
        return _memory_plan(source, columns, stack, batch_size, threads, **loader_args)


def _memory_plan(
    source: str | list[str],
    columns: str | None,
    stack: str | None,
    batch_size: int,
    threads: int | None,
    **loader_args: Any,
) -> dict[str, Any]:
    from ._options import open_dataset

    sources = check_source(source)  # as the Loader takes it (globs, URIs to escape)
    dataset = open_dataset(sources, loader_args.get("partitioning", "hive"))
    cols, stack_arg = _selection(dataset, columns, stack)
    loader = Loader(sources, columns=cols, batch_size=batch_size, num_threads=threads,
                    stack=stack_arg, output="numpy", **loader_args)  # fmt: skip
    settings = loader._settings
    plan = dict(settings.memory_plan or {})
    out = {
        "batch_size": settings.batch_size,
        "threads": settings.num_threads,
        "memory_limit": settings.memory_limit,
        "shuffle_window": settings.shuffle_window,
        "expected_mixing": plan.get("expected_mixing"),
        "expected_peak_bytes": plan.get("expected_peak_bytes"),
        "floor_bytes": plan.get("floor_bytes"),
        "start_bytes": plan.get("start_bytes"),
        "row_group_bytes": plan.get("row_group_bytes"),
        "max_row_group_bytes": plan.get("max_row_group_bytes"),
        "batch_bytes": plan.get("batch_bytes"),
        "ready_batches": plan.get("ready_batches"),
        "batches": len(loader),
        "limit_for_window_16": plan.get("limit_for_window_16"),
    }
    hint = _mixing_hint(settings, plan, loader_args.get("shuffle_window"))
    if hint:
        out["hint"] = hint
    return out


def _size(nbytes: int, up: bool = False, space: str = " ") -> str:
    """Bytes as a short text in the unit that fits (KiB, MiB, GiB): 1.5 MiB, 300 bytes;
    ``up``: rounded up, in whole units (a limit that is enough)."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            if up:
                return f"{-(-nbytes // scale)}{space}{unit}"
            return f"{nbytes / scale:,.1f}".removesuffix(".0") + f"{space}{unit}"
    return f"{nbytes}{space}bytes" if space else str(nbytes)


def _mixing_hint(settings: Any, plan: dict[str, Any], window_given: Any) -> str | None:
    """When the default window is cut short by the limit: what would mix more."""
    need = plan.get("limit_for_window_16") or 0
    limit = settings.memory_limit
    if settings.shuffle is not True or window_given is not None or not limit or need <= limit:
        return None
    return (
        f"batches mix about {plan.get('expected_mixing', 1):.1f} row groups at a time: a "
        f"row group decodes to {_size(plan.get('row_group_bytes', 0))} against "
        f"memory_limit={_size(limit)}. memory_limit='{_size(need, up=True, space='')}' gives a "
        "window of 16 row groups (or all, when fewer), and peak memory grows with it; "
        "shuffle='global' with cache_dir and cache_decoded=True mixes every row of the rank "
        "once its row groups are in the decoded tier, without that memory."
    )


def profile(
    source: str | list[str],
    columns: str | None = None,
    stack: str | None = None,
    batch_size: int = 1024,
    batches: int = 200,
    step_ms: float = 0.0,
    threads: int | None = None,
    trace: str | None = None,
    _hooks: dict[str, Any] | None = None,
    **loader_args: Any,
) -> dict[str, Any]:
    """Runs up to ``batches`` batches, sleeping ``step_ms`` per batch as a stand-in for
    the training step, and returns the report (also the ``--json`` output).

    ``columns``: comma-separated names or shell patterns; ``stack``: ``NAME=PATTERNS``.
    """
    from ._options import reusing_catalogs

    with reusing_catalogs():  # the footers read once, for the patterns and the Loader
        return _profile_run(source, columns, stack, batch_size, batches, step_ms, threads,
                            trace, _hooks, **loader_args)  # fmt: skip


def _profile_run(
    source: str | list[str],
    columns: str | None,
    stack: str | None,
    batch_size: int,
    batches: int,
    step_ms: float,
    threads: int | None,
    trace: str | None,
    _hooks: dict[str, Any] | None,
    **loader_args: Any,
) -> dict[str, Any]:
    from ._options import open_dataset

    sources = check_source(source)  # as the Loader takes it (globs, URIs to escape)
    dataset = open_dataset(sources, loader_args.get("partitioning", "hive"))
    # Where each row group starts in the natural order: sample ids -> row groups (W_eff).
    starts = np.array([first for _, _, _, first, _ in dataset.row_groups()], dtype=np.int64)
    cols, stack_arg = _selection(dataset, columns, stack)
    loader_args["with_sample_id"] = True  # for W_eff; handed out, not timed
    loader = Loader(sources, columns=cols, batch_size=batch_size, num_threads=threads,
                    stack=stack_arg, output="numpy", **loader_args)  # fmt: skip
    loader._settings.extra["trace"] = trace is not None
    loader._settings.extra["start_early"] = False  # one pass: a next one would only compete
    loader._settings.extra.update(_hooks or {})  # tests slow a stage down on purpose
    if loader._empty_why is not None:  # said here, not as a warning and a verdict of nothing
        raise InvalidArgumentError(f"nothing to profile: {loader._empty_why}")
    rows = n = 0
    seen: list[np.ndarray] = []  # each batch's sample ids
    # Start-up: the first batch of each worker thread, which they build at once
    # from nothing decoded; the steady state is measured after it.
    startup_batches = max(1, int(loader._settings.num_threads))
    waited = 0.0  # in next(), after the start-up batches
    start = time.perf_counter()
    first = start
    it = iter(loader)
    while n < batches:
        t0 = time.perf_counter()
        batch = next(it, None)
        if batch is None:
            break
        if n < startup_batches:
            first = time.perf_counter()
        else:
            waited += time.perf_counter() - t0
        rows += len(next(iter(batch.values())))
        seen.append(np.array(batch["sample_id"], copy=True))  # not a view: batches go
        n += 1
        if step_ms > 0:
            time.sleep(step_ms / 1000)
    del it  # stops the engine
    end = time.perf_counter()
    wall = end - start
    stats = loader.stats()
    stages = {s: float(stats["stages"].get(s, {}).get("seconds", 0.0)) for s in _STAGES}
    report: dict[str, Any] = {
        "stages": stages,
        "stage_bytes": {s: int(stats["stages"].get(s, {}).get("bytes", 0)) for s in _STAGES},
        # Steady state: the wait for the start-up batches is reported apart.
        "consumer_wait_fraction": waited / max(end - first, 1e-12),
        "startup_seconds": first - start,
        "startup_batches": min(n, startup_batches),
        "worker_wait_seconds": float(stats["worker_wait_seconds"]),
        "rows_per_second": rows / max(wall, 1e-12),
        "batches": n,
        "rows": rows,
        "threads": int(stats["threads"]),
        "wall_seconds": wall,
        "step_ms": step_ms,
        "row_groups_decoded": int(stats["row_groups_decoded"]),
        "stack_columns_tiled": int(stats["stack_columns_tiled"]),
        "stack_columns_generic": int(stats["stack_columns_generic"]),
        "decode_parts_shared": int(stats["decode_parts_shared"]),
        # The shuffle's strength in row groups (issue 11's measure): None when no two rows
        # of a batch shared a row group.
        "effective_shuffle_window": effective_window(seen, starts),
        "dataset_row_groups": len(starts),
        "memory": dict(stats["memory"]),
    }
    report["verdict"] = verdict(report)
    if trace is not None:
        write_trace(loader.trace_events(), Path(trace))
        report["trace"] = trace
    return report


def write_trace(events: list[tuple[int, str, float, float, int]], path: Path) -> None:
    """A Chrome / Perfetto trace (JSON object format): one track per worker."""
    out: list[dict[str, Any]] = []
    tids = sorted({w for w, *_ in events})
    for w in tids:
        out.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": w,
                    "args": {"name": "consumer" if w < 0 else f"worker {w}"}})  # fmt: skip
    for w, stage, start, dur, arg in events:
        out.append({"name": stage, "cat": "shardfeed", "ph": "X", "pid": 1, "tid": w,
                    "ts": start, "dur": dur, "args": {"id": arg}})  # fmt: skip
    try:
        path.write_text(json.dumps({"traceEvents": out, "displayTimeUnit": "ms"}))
    except OSError as e:  # named: a full disk here is the trace's, not the report's
        raise StorageError(f"cannot write the trace to '{path}': {e.strerror or e}") from None


def format_table(report: dict[str, Any]) -> str:
    threads, wall = report["threads"], report["wall_seconds"]
    capacity = max(threads * wall, 1e-12)
    lines = [f"{'stage':<11}{'seconds':>10}{'share':>9}{'MB':>10}"]
    for s in _STAGES:
        secs = report["stages"][s]
        share = secs / (wall if s == "deliver" else capacity)
        mb = report["stage_bytes"][s] / 1e6
        lines.append(f"{s:<11}{secs:>10.3f}{share:>8.1%}{mb:>10.1f}")
    lines.append(
        f"\n{report['batches']} batches, {report['rows_per_second']:,.0f} rows/s, "
        f"{threads} threads, {wall:.2f} s ({report['startup_seconds']:.2f} s to the first "
        f"{report['startup_batches']} batches, one per thread); consumer waited "
        f"{report['consumer_wait_fraction']:.1%} after them, workers idle ahead of it "
        f"{report['worker_wait_seconds'] / capacity:.1%}"
    )
    lines.append("(share: of worker time for engine stages, of wall time for deliver)")
    w = report["effective_shuffle_window"]
    lines.append(
        "shuffle: effective window "
        + ("beyond measure (no batch held two rows of one row group)" if w is None else f"{w:.1f}")
        + f" row groups (a full shuffle of this data scores about {report['dataset_row_groups']})"
    )
    m = report["memory"]
    limit = _size(m["limit_bytes"]) if m["limit_bytes"] else "none"
    lines.append(
        f"memory: peak {_size(m['peak_bytes'])} of the budget (limit {limit}, "
        f"expected {_size(m['expected_peak_bytes'] or 0)}), shuffle window "
        f"{m['shuffle_window']}, {m['waits']} decodes waited for room"
    )
    tiled, generic = report["stack_columns_tiled"], report["stack_columns_generic"]
    if tiled + generic:
        lines.append(
            f"stacks: {tiled:,} of {tiled + generic:,} member columns decoded straight into the "
            "matrix (the rest through Arrow: a transform of their own, a filter, another dtype, "
            "or nulls without a fill)"
            + (
                f"; {report['decode_parts_shared']:,} tile reads run by workers waiting for "
                "their row group"
                if report["decode_parts_shared"]
                else ""
            )
        )
    lines.append(f"\nverdict: {report['verdict']}")
    return "\n".join(lines)
