"""Delta Lake deletion vectors: what skipping deleted rows costs.

One set of Parquet files (8 files x 500,000 rows, 16 float32 features + a label, 50,000-row
row groups) behind two Delta logs: ``plain`` (the files as written) and ``deleted`` (a
later DELETE's deletion vectors remove 1% of each file's rows, spread over every row
group, in one ``.bin`` file). Systems, each in its own subprocess:

* ``shardfeed_deleted``: ``Loader`` on the table with deletion vectors;
* ``shardfeed_plain``: the same ``Loader`` on the table without them (every row);
* ``pyarrow_deleted``: the do-it-yourself path: ``pyarrow.parquet.read_table`` of each
  file, its deleted positions dropped with a boolean mask, ``column_stack`` of the
  features per 4,096 rows.

Per system: rows/s over the delivered rows and seconds to the first batch (opening
included: for shardfeed that is the log and its vectors).

    PYTHONPATH=python python3 bench/bench_deletion_vectors.py [--files 8] [--rows 500000]

Results: ``bench/results/deletion_vectors.json`` (``_common``'s format, reference
``shardfeed_deleted``).
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import _common as common

BENCH = "deletion_vectors"
EVERY = 100  # one row in EVERY deleted
FEATURES = 16
SHUFFLE = False  # batches in file order, as the do-it-yourself path gives them


def deleted_rows(rows: int) -> list[int]:
    return list(range(7, rows, EVERY))


def _log(table: Path, files: list[str], sizes: list[int], dv: dict[str, Any] | None) -> None:
    log = table / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    actions: list[dict[str, Any]] = [
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7,
                      "readerFeatures": ["deletionVectors"],
                      "writerFeatures": ["deletionVectors"]}},
        {"metaData": {"id": "bench", "format": {"provider": "parquet", "options": {}},
                      "schemaString": "{}", "partitionColumns": [], "configuration": {}}},
    ]  # fmt: skip
    for name, size in zip(files, sizes, strict=True):
        add = {"path": name, "partitionValues": {}, "size": size, "modificationTime": 0,
               "dataChange": True}  # fmt: skip
        if dv is not None:
            add["deletionVector"] = dv[name]
        actions.append({"add": add})
    (log / f"{0:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))


def make_dataset(root: Path, files: int, rows: int) -> dict[str, Any]:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    import pyroaring

    marker = root / common.MARKER
    spec = {"files": files, "rows_per_file": rows, "every": EVERY, "version": 1}
    names = [f"part-{i:05d}.parquet" for i in range(files)]
    if not (marker.exists() and json.loads(marker.read_text()) == spec):
        rng = np.random.default_rng(0)
        for table in ("plain", "deleted"):
            (root / table).mkdir(parents=True, exist_ok=True)
        for name in names:
            cols = {f"f{i}": rng.standard_normal(rows).astype(np.float32) for i in range(FEATURES)}
            cols["label"] = rng.integers(0, 10, rows)
            pq.write_table(pa.table(cols), root / "plain" / name, row_group_size=50_000)
            (root / "deleted" / name).unlink(missing_ok=True)
            (root / "deleted" / name).hardlink_to(root / "plain" / name)
        sizes = [(root / "plain" / n).stat().st_size for n in names]
        _log(root / "plain", names, sizes, None)
        gone = deleted_rows(rows)
        data = struct.pack("<I", 1681511377) + pyroaring.BitMap64(gone).serialize()
        frame = struct.pack(">I", len(data)) + data + struct.pack(">I", zlib.crc32(data))
        bin_path = root / "deleted" / "deletion_vector_bench.bin"
        bin_path.write_bytes(b"\x01" + frame * files)
        dv = {
            name: {"storageType": "p", "pathOrInlineDv": bin_path.as_uri(), "sizeInBytes":
                   len(data), "cardinality": len(gone), "offset": 1 + k * len(frame)}
            for k, name in enumerate(names)
        }  # fmt: skip
        _log(root / "deleted", names, sizes, dv)
        marker.write_text(json.dumps(spec))
    return {
        "name": f"delta_dv_{files}x{rows}",
        "path": str(root),
        "files": files,
        "rows": files * rows,
        "rows_deleted": files * len(deleted_rows(rows)),
        "bytes_on_disk": sum((root / "plain" / n).stat().st_size for n in names),
    }


def child(system: str, root: Path, runs: int, threads: int) -> None:
    import numpy as np

    baseline = common.rss_mb()
    columns = [f"f{i}" for i in range(FEATURES)]
    table = root / ("plain" if system == "shardfeed_plain" else "deleted")
    results: list[common.Run] = []
    if system.startswith("shardfeed"):
        import shardfeed
    else:
        import pyarrow.parquet as pq
    for _ in range(runs):
        t0 = time.perf_counter()
        first = None
        rows, checksum = 0, 0.0
        if system.startswith("shardfeed"):
            ld = shardfeed.Loader(
                str(table), columns=[], stack={"x": columns}, batch_size=4096,
                shuffle=SHUFFLE, output="numpy", drop_last=False, num_threads=threads,
            )  # fmt: skip
            for batch in ld:
                if first is None:
                    first = time.perf_counter() - t0
                rows += len(batch["x"])
                checksum += float(batch["x"][0, 0])
        else:
            for path in sorted(table.glob("*.parquet")):
                t = pq.read_table(path, columns=columns)
                keep = np.ones(t.num_rows, dtype=bool)
                keep[deleted_rows(t.num_rows)] = False
                x = np.column_stack([t[c].to_numpy() for c in columns])[keep]
                for start in range(0, len(x), 4096):
                    batch = np.ascontiguousarray(x[start : start + 4096])
                    if first is None:
                        first = time.perf_counter() - t0
                    rows += len(batch)
                    checksum += float(batch[0, 0])
        seconds = time.perf_counter() - t0
        run = common.Run(rows=rows, seconds=seconds, checksum=round(checksum, 3))
        run.extra = {"first_batch_seconds": round(first or seconds, 4)}
        results.append(run)
    common.emit_child_result(common.summarize_first_batch(system, results, baseline))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--files", type=int, default=8)
    p.add_argument("--rows", type=int, default=500_000)
    common.add_system_arguments(p, runs=7)
    args = p.parse_args()
    if args.child:
        child(args.child, Path(args.root), args.runs, args.threads)
        return 0
    root = common.DATA_DIR / f"delta_dv_{args.files}x{args.rows}"
    dataset = make_dataset(root, args.files, args.rows)
    systems = ("shardfeed_deleted", "shardfeed_plain", "pyarrow_deleted")
    results = common.run_systems(__file__, systems, root, args.runs, args.threads)
    firsts = {r["system"]: r["extra"]["first_batch_seconds_median"] for r in results}
    notes = [
        f"deletion vectors remove 1 row in {EVERY} of every row group "
        f"({dataset['rows_deleted']:,} of {dataset['rows']:,} rows)",
        "rows/s counts delivered rows; shardfeed_plain delivers every row",
        "first batch seconds (median): " + json.dumps(firsts),
    ]
    out, doc = common.write_results(
        BENCH, dataset, {"threads": args.threads, "runs": args.runs, "batch_size": 4096},
        results, reference="shardfeed_deleted", notes=notes,
    )  # fmt: skip
    print(common.format_table(doc))
    print(json.dumps(doc["ratios"], indent=2))
    print("\n".join(notes))
    print(f"-> {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
