"""Writes the fuzz targets' seed corpora into cpp/fuzz/corpus/<target>/ (run once; committed).

Small valid Parquet files covering what the decode path meets: plain and dictionary encodings,
nulls, fixed-size and variable-length lists, bools and strings, page v2, page checksums and
several row groups.  Few rows each: the fuzzer mutates bytes, and small files mutate faster.
The decoded-tier seeds are written by the C++ tier itself (decoded_tier_fuzz -seeds=DIR).

    python cpp/fuzz/make_corpus.py
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent


def table(rows: int) -> pa.Table:
    ids = np.arange(rows, dtype=np.int64)
    return pa.table(
        {
            "id": ids,
            "x": (ids * 0.5).astype(np.float32),
            "opt": pa.array([None if i % 3 == 0 else float(i) for i in range(rows)]),
            "flag": ids % 2 == 0,
            "small": (ids % 7).astype(np.int8),
            "u": (ids * 3).astype(np.uint16),
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(np.repeat(ids, 2), pa.float64()), 2),
            "seq": pa.array([None if i % 5 == 4 else list(range(i % 4)) for i in range(rows)]),
            "name": pa.array([f"n{i % 3}" for i in range(rows)]),
        }
    )


def parquet_bytes(t: pa.Table, **kwargs: object) -> bytes:
    out = io.BytesIO()
    pq.write_table(t, out, **kwargs)  # type: ignore[arg-type]
    return out.getvalue()


def seeds() -> dict[str, bytes]:
    t = table(12)
    return {
        "dictionary.parquet": parquet_bytes(t, row_group_size=6),
        "plain.parquet": parquet_bytes(t, use_dictionary=False, compression="none"),
        "page_v2.parquet": parquet_bytes(t, data_page_version="2.0", row_group_size=5),
        "checksums.parquet": parquet_bytes(t, write_page_checksum=True, compression="zstd"),
        "stats_off.parquet": parquet_bytes(
            t.select(["id", "seq"]), write_statistics=False, row_group_size=4
        ),
        "one_column.parquet": parquet_bytes(pa.table({"v": np.arange(20, dtype=np.int32)})),
        "empty.parquet": parquet_bytes(t.slice(0, 0)),
    }


def main() -> None:
    for target in ("catalog_fuzz", "decode_fuzz"):
        folder = HERE / "corpus" / target
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in seeds().items():
            (folder / name).write_bytes(data)
    total = sum(p.stat().st_size for p in (HERE / "corpus").rglob("*") if p.is_file())
    print(f"corpus: {total} bytes")


if __name__ == "__main__":
    main()
