"""The ``shardfeed`` command line: ``demo``, ``info``, ``profile`` and ``cache``."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
from collections.abc import Callable
from typing import Any

from ._check import check_source
from ._errors import (
    ArgumentTypeError,
    DatasetNotFoundError,
    InvalidArgumentError,
    ShardfeedError,
)

DEFAULT_MEMORY_LIMIT_TEXT = "384MiB"  # EngineOptions::memory_limit (checked by a test)


def _at_least(
    least: float, kind: Callable[[str], float] = int, most: float = math.inf
) -> Callable[[str], float]:
    """An argparse type: a finite number of `kind` in [least, most]."""

    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            what = "a whole number" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
        if value < least:
            raise argparse.ArgumentTypeError(f"must be at least {least}, got {text}")
        if value > most:
            raise argparse.ArgumentTypeError(f"must be at most {most:g}, got {text}")
        return value

    return parse


def _json_option(option: str, text: str) -> Any:
    """An option's value given as JSON (a filter, a fill value or {column: value})."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InvalidArgumentError(f"{option} is not JSON: {e}") from None


def _info(args: argparse.Namespace) -> int:
    from ._options import reusing_catalogs

    with reusing_catalogs():  # the catalog and the plan's Loader: every footer read once
        return _info_of(args)


def _info_of(args: argparse.Namespace) -> int:
    from ._options import open_dataset

    given = None if args.filter is None else _json_option("--filter", args.filter)
    ds = open_dataset(check_source(args.source), args.partitioning)
    info: dict[str, object] = {
        "root": ds.root,
        "files": ds.num_files,
        "row_groups": ds.num_row_groups,
        "rows": ds.num_rows,
        "fingerprint": ds.fingerprint,
        "schema": dict(ds.schema()),
    }
    deleted = dict(ds.filter_counts()).get("rows_deleted", 0)
    if deleted:
        # Rows a Delta table's deletion vectors delete: in the files, never delivered.
        info["rows"] = ds.num_rows - deleted
        info["rows_deleted"] = deleted
    info.update(_evolution(ds.columns()))
    delta = [
        {"table": table, "version": version, "files": files}
        for table, version, files in ds.delta_tables()
    ]
    if delta:
        info["delta_tables"] = delta
    if given is not None:
        from . import _filter
        from ._options import default_threads

        canonical = _filter.canonicalize(given, ds.schema())
        filtered = _filter.apply(ds, canonical, default_threads(), None)
        info["filter"] = {"canonical": canonical, **dict(filtered.filter_counts())}
    from ._profile import memory_plan

    try:
        info["plan"] = memory_plan(
            args.source, columns=args.columns, stack=args.stack, batch_size=args.batch_size,
            threads=args.threads, memory_limit=args.memory_limit,
            shuffle_window=args.shuffle_window, partitioning=args.partitioning,
            world_size=args.world_size, rank=0,
            filter=given,
        )  # fmt: skip
    except (InvalidArgumentError, ArgumentTypeError):
        raise  # a setting of the command line: said as an error (main)
    except ShardfeedError as e:
        # The catalog is still worth printing: say why these columns would not load.
        info["plan"] = {"error": f"{type(e).__name__}: {e}", "hint": "choose --columns/--stack"}
        if args.columns is not None or args.stack is not None:
            # The columns asked for do not load: the catalog, then the error, and status 2.
            print(json.dumps(info, indent=2))
            print(f"shardfeed: {type(e).__name__}: {e}", file=sys.stderr)
            return 2
    print(json.dumps(info, indent=2))
    return 0


def _evolution(columns: list[tuple[str, str, int, list[str], int, str]]) -> dict[str, object]:
    """Partition columns and how the files' schemas differ, from Dataset.columns()."""
    partitions: dict[str, str] = {}
    promoted: dict[str, dict[str, object]] = {}
    missing: dict[str, int] = {}
    conflicts: dict[str, str] = {}
    for name, type_, key, file_types, missing_files, conflict in columns:
        if key >= 0:
            partitions[name] = type_
        elif conflict:
            conflicts[name] = conflict
        elif len(file_types) > 1 or (file_types and file_types[0] != type_):
            promoted[name] = {"type": type_, "from": list(file_types)}
        if missing_files:
            missing[name] = missing_files
    # Unused conflicting columns are fine; using one raises SchemaMismatchError.
    return {
        "partitions": partitions,
        "promoted": promoted,
        "missing_in_files": missing,
        "conflicts": conflicts,
    }


def _demo(args: argparse.Namespace) -> int:
    from ._demo import run

    run(data_dir=args.data_dir, epochs=args.epochs, batch_size=args.batch_size,
        num_threads=args.threads)  # fmt: skip
    return 0


def _profile(args: argparse.Namespace) -> int:
    made = False
    if args.trace is not None:  # before the run, not after it; a file there kept if it fails
        made = not os.path.exists(args.trace)
        try:
            with open(args.trace, "a"):
                pass
        except OSError as e:
            raise InvalidArgumentError(
                f"--trace: cannot write the trace to {args.trace!r}: {e.strerror}"
            ) from None
    try:
        return _run_profile(args)
    except BaseException:
        if made:
            with contextlib.suppress(OSError):  # (the failure, not this, is what is said)
                os.remove(args.trace)
        raise


def _run_profile(args: argparse.Namespace) -> int:
    from ._profile import format_table, profile

    extra: dict[str, Any] = {}
    if args.fill_null is not None:
        extra["fill_null"] = _json_option("--fill-null", args.fill_null)
    if args.filter is not None:
        extra["filter"] = _json_option("--filter", args.filter)
    if args.shuffle_window is not None:
        extra["shuffle_window"] = args.shuffle_window
    report = profile(
        args.source, columns=args.columns, stack=args.stack, batch_size=args.batch_size,
        batches=args.batches, step_ms=args.step_ms, threads=args.threads, trace=args.trace,
        memory_limit=args.memory_limit, drop_last=args.drop_last,
        partitioning=args.partitioning, **extra,
    )  # fmt: skip
    print(json.dumps(report, indent=2) if args.json else format_table(report))
    return 0


def _progress(done: int, total: int, nbytes: int) -> None:
    width = 30
    filled = width * done // max(total, 1)
    bar = "#" * filled + "." * (width - filled)
    sys.stderr.write(f"\r[{bar}] {done}/{total} files, {nbytes / 1e6:,.1f} MB")
    sys.stderr.flush()


def _cache(args: argparse.Namespace) -> int:
    from . import _core
    from ._options import CacheSettings, open_dataset

    folder = os.path.expanduser(args.cache_dir)
    if args.action != "warm" and args.source:
        # The folder is shared by every dataset (and job) that uses it: a source here
        # would read as 'only this dataset's entries', which is not what is done.
        raise InvalidArgumentError(
            f"cache {args.action} takes no SOURCE (got {' '.join(args.source)!r}): it "
            f"{'empties' if args.action == 'clear' else 'reports on'} the whole --cache-dir, "
            "every dataset's entries; a dataset's own entries are superseded when it changes"
        )
    if args.action != "warm" and not os.path.isdir(folder):
        # Inspecting or clearing makes nothing: a mistyped folder is said, not created.
        if os.path.exists(folder):
            raise InvalidArgumentError(f"--cache-dir {args.cache_dir!r} is not a folder")
        raise DatasetNotFoundError(f"--cache-dir {args.cache_dir!r}: no such folder")
    # Both tiers, so that the folder names come from one place (CacheSettings).
    settings = CacheSettings.make(args.cache_dir, args.limit, True, None)
    files_dir, decoded_dir = settings.files_dir(), settings.decoded_dir()
    assert files_dir is not None and decoded_dir is not None
    if args.action == "warm":
        if not args.source:
            print("shardfeed cache warm: give a SOURCE", file=sys.stderr)
            return 2
        dataset = open_dataset(check_source(args.source))
        if dataset.is_local:
            print("local dataset: nothing to cache (files are read in place)")
            return 0
        cache = _core.open_file_cache(files_dir, settings.limit_bytes)
        sizes = dataset.file_sizes()
        done_bytes = 0
        cached = 0
        for i, size in enumerate(sizes):
            cached += bool(cache.warm(dataset, i))
            done_bytes += size
            _progress(i + 1, len(sizes), done_bytes)
        sys.stderr.write("\n")
        print(f"{cached} of {len(sizes)} files cached in {files_dir}")
        if cached < len(sizes) and settings.limit_bytes:
            print(f"(the others do not fit in --limit {settings.limit_bytes} bytes)")
        return 0
    report: dict[str, object] = {}
    if args.action == "clear":
        report["freed_bytes"] = 0
        report["freed_decoded_bytes"] = 0
    report["files"] = {"dir": files_dir, "entries": 0, "bytes": 0}
    report["decoded"] = {"dir": decoded_dir, "entries": 0, "bytes": 0}
    # A tier's folder that is not there holds nothing: it is not made to say so.
    # The tiers' layouts and file names are their own: cleared and counted
    # through them, not by listing the folders here.
    if os.path.isdir(files_dir):
        cache = _core.open_file_cache(files_dir, settings.limit_bytes)
        if args.action == "clear":
            report["freed_bytes"] = int(cache.clear())
        entries, nbytes = cache.usage()
        report["files"] = {"dir": files_dir, "entries": entries, "bytes": nbytes}
    if os.path.isdir(decoded_dir):
        tier = _core.open_decoded_tier(decoded_dir, settings.limit_bytes)
        if args.action == "clear":
            report["freed_decoded_bytes"] = int(tier.clear())
        entries, nbytes = tier.usage()
        report["decoded"] = {"dir": tier.dir, "entries": entries, "bytes": nbytes}
        del tier
    print(json.dumps(report, indent=2))
    return 0


def _add_no_partitioning(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-partitioning",
        dest="partitioning",
        action="store_const",
        const=None,
        default="hive",
        help="read key=value folders as plain paths, not Hive partition columns",
    )


def _add_shuffle_window(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    parser.add_argument(
        "--shuffle-window",
        type=int,
        default=None,
        help="row groups mixed together (default: chosen from the limit)",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="shardfeed", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="generate a tabular dataset and train a small MLP on it")
    demo.add_argument("--data-dir", default=None, help="default: ~/.cache/shardfeed/demo")
    demo.add_argument("--epochs", type=_at_least(1), default=2)
    demo.add_argument("--batch-size", type=_at_least(1), default=1024)
    demo.add_argument("--threads", type=_at_least(1, int, 1024), default=None)
    demo.set_defaults(func=_demo)

    info = sub.add_parser("info", help="print a dataset's catalog (footers only)")
    info.add_argument("source", nargs="+", help="a folder, a file, or several files")
    _add_no_partitioning(info)
    info.add_argument(
        "--filter",
        default=None,
        help='a DNF filter as JSON, e.g. \'[["date", ">=", "2024-01-05"]]\': '
        "shows the files, row groups and rows kept and pruned (by partition, "
        "statistics, rows)",
    )
    plan = info.add_argument_group(
        "plan", "what a Loader with these settings holds and how well it mixes ('plan')"
    )
    plan.add_argument("--columns", help="comma-separated names or patterns (default: all)")
    plan.add_argument("--stack", help="NAME=PATTERNS: stack matching columns into one array")
    plan.add_argument("--batch-size", type=int, default=1024)
    plan.add_argument(
        "--memory-limit",
        default=DEFAULT_MEMORY_LIMIT_TEXT,
        help="bytes, e.g. 512MiB or 2GB; 0: none (default: %(default)s)",
    )
    _add_shuffle_window(plan)
    plan.add_argument("--threads", type=_at_least(1, int, 1024), default=None)
    plan.add_argument("--world-size", type=int, default=1)
    info.set_defaults(func=_info)

    prof = sub.add_parser("profile", help="find the bottleneck stage under a simulated step")
    prof.add_argument("source", nargs="+", help="a folder, a file, or several files")
    prof.add_argument("--columns", help="comma-separated names or patterns (default: all)")
    prof.add_argument("--stack", help="NAME=PATTERNS: stack matching columns into one array")
    prof.add_argument("--batch-size", type=int, default=1024)
    prof.add_argument("--batches", type=_at_least(1), default=200)
    prof.add_argument(
        "--step-ms",
        type=_at_least(0.0, float, 3_600_000.0),
        default=0.0,
        help="simulated training step",
    )
    prof.add_argument("--threads", type=_at_least(1, int, 1024), default=None)
    prof.add_argument(
        "--memory-limit",
        default=DEFAULT_MEMORY_LIMIT_TEXT,
        help="bytes, e.g. 512MiB or 2GB; 0: none (default: %(default)s)",
    )
    _add_shuffle_window(prof)
    prof.add_argument(
        "--fill-null",
        default=None,
        help='value for nulls, as JSON: a number, or {"column": value} (default: a null '
        "is an error)",
    )
    prof.add_argument("--filter", default=None, help="a DNF filter as JSON (as for info)")
    prof.add_argument(
        "--keep-last",
        dest="drop_last",
        action="store_false",
        help="hand out the last, partial batch too (drop_last=False)",
    )
    _add_no_partitioning(prof)
    prof.add_argument("--json", action="store_true", help="print one JSON object")
    prof.add_argument("--trace", metavar="FILE", help="write a Chrome/Perfetto trace")
    prof.set_defaults(func=_profile)

    cache = sub.add_parser("cache", help="inspect, clear or fill the node-local cache")
    cache.add_argument("action", choices=["stats", "clear", "warm"])
    cache.add_argument("source", nargs="*", default=[], help="warm only: the dataset to download")
    cache.add_argument("--cache-dir", required=True)
    cache.add_argument("--limit", type=int, default=None, help="cache_limit_bytes")
    cache.set_defaults(func=_cache)

    args, extra = parser.parse_known_args(argv)
    if args.func is _cache:
        # `cache warm --cache-dir D SOURCE`: argparse gave `source` its (no) values
        # when the option came, and left the sources after it over.
        args.source = [*args.source, *(e for e in extra if not e.startswith("-"))]
        extra = [e for e in extra if e.startswith("-")]
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if sys.stdout is None:  # started with it closed (`>&-`): the output would be lost
        print("shardfeed: standard output is closed", file=sys.stderr)
        return 2
    try:
        code = int(args.func(args))
        sys.stdout.flush()  # here, where a reader gone or a full disk is said
        return code
    except ShardfeedError as e:
        print(f"shardfeed: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("shardfeed: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader left (`| head -1`) with what it wanted: no message, and no second
        # error when Python flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except OSError as e:  # the machine's, not ours: a full disk, a folder not there
        where = f" {e.filename!r}" if e.filename else ""
        print(f"shardfeed: {type(e).__name__}:{where} {e.strerror or e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
