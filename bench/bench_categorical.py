"""Lists of categorical strings: a tags column mapped to ids, in the engine and by hand.

Dataset (generated into ``bench/data/``, reused while its marker matches): ``--rows`` rows
(default 1M), 8 files, 16 row groups, a ``tags`` list<string> column (0-9 tags a row,
drawn Zipf-like from 50,000 values; 2% null lists, 1% null tags) and a float32 ``x``.

Systems, each in its own subprocess, ``--runs`` passes (natural order, batch 4096):

* ``vocabulary_loader``: ``Loader(columns=["tags", "x"], fill_null=0,
  transforms=[Vocabulary("tags", <the 50,000 values>)])``: ``[B, longest]`` int64 ids and
  ``tags_lengths``, in the engine's C++ threads (the reference);
* ``hash_loader``: the same with ``HashBucket("tags", num_buckets=2**20)``;
* ``pyarrow_diy``: ``ParquetFile.iter_batches`` of the same columns, then the flattened
  tags dictionary-encoded per batch, each distinct tag looked up once in a Python dict
  (null lists and tags as 0, values k + 1 as ``Vocabulary`` gives), and a padded NumPy
  matrix made from the offsets: what a user writes without the transform;
* ``read_only_loader``: ``Loader(columns=["x"])``: reading and batching without the tags.

Results: ``bench/results/categorical.json`` (``_common``'s format, reference
``vocabulary_loader``).

    PYTHONPATH=python python3 bench/bench_categorical.py [--rows 1000000] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import _common as common

BENCH = "categorical"
VALUES = 50_000
FILES = 8
GROUPS_PER_FILE = 2
SYSTEMS = ("vocabulary_loader", "hash_loader", "pyarrow_diy", "read_only_loader")


def vocabulary_values() -> list[str]:
    return [f"tag{i:05d}" for i in range(VALUES)]


def make_dataset(root: Path, rows: int) -> dict[str, Any]:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    marker = root / common.MARKER
    spec = {"rows": rows, "values": VALUES, "files": FILES, "version": 1}
    if not (marker.exists() and json.loads(marker.read_text()) == spec):
        root.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(0)
        names = np.array(vocabulary_values(), dtype=object)
        per_file = rows // FILES
        for f in range(FILES):
            lengths = rng.integers(0, 10, per_file)
            flat = names[np.minimum(rng.zipf(1.3, int(lengths.sum())) - 1, VALUES - 1)].tolist()
            for i in rng.choice(len(flat), len(flat) // 100, replace=False):
                flat[i] = None
            offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
            valid = rng.random(per_file) >= 0.02
            tags = pa.ListArray.from_arrays(
                pa.array(offsets), pa.array(flat, pa.string()), mask=pa.array(~valid)
            )
            table = pa.table({"tags": tags, "x": rng.standard_normal(per_file).astype(np.float32)})
            pq.write_table(
                table, root / f"part-{f}.parquet", row_group_size=-(-per_file // GROUPS_PER_FILE)
            )
        marker.write_text(json.dumps(spec))
    files = sorted(root.glob("*.parquet"))
    return {
        "name": f"categorical_tags_{rows}",
        "path": str(root),
        "files": len(files),
        "rows": rows,
        "bytes_on_disk": sum(f.stat().st_size for f in files),
    }


def _diy(root: Path) -> Any:
    """Yields (ids [B, longest], lengths [B], x [B]) as a user would make them."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    index = {v: k + 1 for k, v in enumerate(vocabulary_values())}
    for path in sorted(root.glob("*.parquet")):
        for rb in pq.ParquetFile(path).iter_batches(batch_size=4096, columns=["tags", "x"]):
            tags = rb.column(0).fill_null(pa.scalar([], rb.column(0).type))
            offsets = tags.offsets.to_numpy()
            # Each distinct tag of the batch looked up once, then gathered.
            encoded = pc.dictionary_encode(pc.list_flatten(tags))
            lookup = [index.get(v, 0) for v in encoded.dictionary.to_pylist()] + [0]
            codes = pc.fill_null(encoded.indices, -1).to_numpy()  # a null tag: the last, 0
            ids = np.asarray(lookup, dtype=np.int64)[codes]
            lengths = np.diff(offsets)
            out = np.zeros((len(lengths), int(lengths.max(initial=0))), dtype=np.int64)
            rows = np.repeat(np.arange(len(lengths)), lengths)
            out[rows, np.arange(len(rows)) - np.repeat(offsets[:-1] - offsets[0], lengths)] = ids
            yield out, lengths, rb.column(1).to_numpy()


def child(system: str, root: Path, runs: int, threads: int) -> None:
    baseline = common.rss_mb()
    import shardfeed
    from shardfeed.transforms import HashBucket, Vocabulary

    results: list[common.Run] = []
    for _ in range(runs):
        t0 = time.perf_counter()
        rows, checksum = 0, 0.0
        if system == "pyarrow_diy":
            for ids, lengths, _x in _diy(root):
                rows += len(lengths)
                checksum += float(ids[:, 0].sum()) if ids.shape[1] else 0.0
        else:
            transforms: list[Any] = []
            columns = ["tags", "x"]
            if system == "vocabulary_loader":
                transforms = [Vocabulary("tags", vocabulary_values())]
            elif system == "hash_loader":
                transforms = [HashBucket("tags", num_buckets=2**20)]
            else:
                columns = ["x"]
            ld = shardfeed.Loader(
                str(root), columns=columns, batch_size=4096, shuffle=False, output="numpy",
                drop_last=False, num_threads=threads, fill_null=0, transforms=transforms,
            )  # fmt: skip
            for batch in ld:
                rows += len(batch["x"])
                if "tags" in batch and batch["tags"].shape[1]:
                    checksum += float(batch["tags"][:, 0].sum())
        results.append(
            common.Run(rows=rows, seconds=time.perf_counter() - t0, checksum=round(checksum, 1))
        )
    common.emit_child_result(common.summarize(system, results, baseline))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--rows", type=int, default=1_000_000)
    common.add_system_arguments(p, runs=3)
    args = p.parse_args()
    if args.child:
        child(args.child, Path(args.root), args.runs, args.threads)
        return 0
    root = common.DATA_DIR / f"categorical_tags_{args.rows}"
    dataset = make_dataset(root, args.rows)
    results = common.run_systems(__file__, SYSTEMS, root, args.runs, args.threads)
    notes = [
        f"tags: list<string>, 0-9 a row from {VALUES:,} values (Zipf), 2% null lists, 1% null tags",
        "vocabulary_loader and pyarrow_diy give the same ids (checksum of each batch's first tags)",
    ]
    out, doc = common.write_results(
        BENCH, dataset, {"threads": args.threads, "runs": args.runs, "batch_size": 4096},
        results, reference="vocabulary_loader", notes=notes,
    )  # fmt: skip
    print(common.format_table(doc))
    print(json.dumps(doc["ratios"], indent=2))
    print(f"-> {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
