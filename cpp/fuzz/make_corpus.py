"""Writes the fuzz targets' seed corpora into cpp/fuzz/corpus/<target>/ (run once; committed).

Small valid Parquet files covering what the decode path meets: plain and dictionary encodings,
nulls, fixed-size and variable-length lists, bools and strings, page v2, page checksums and
several row groups.  Few rows each: the fuzzer mutates bytes, and small files mutate faster.
The decoded-tier seeds are entries that the C++ tier writes itself:

    SHARDFEED_FUZZ_WRITE_SEEDS=cpp/fuzz/corpus/decoded_tier_fuzz \
        build/fuzz/cpp/fuzz/decoded_tier_fuzz -runs=0
    python cpp/fuzz/make_corpus.py

Also writes cpp/fuzz/regressions/: the inputs that crashed shardfeed before issue 10 (footers
whose counts lie; decoded-tier records with huge rows, offsets or sizes, re-sealed so that they
pass the digests), replayed by every CI run next to the crashes the fuzzer finds.
"""

from __future__ import annotations

import io
import struct
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
from tests import thrift_footer as tf  # noqa: E402
from tests.test_decoded_entries import damage  # noqa: E402


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
        "categorical.parquet": parquet_bytes(categorical(10), row_group_size=4),
        "structs.parquet": parquet_bytes(structs(10), row_group_size=4),
        "fixed_lists.parquet": parquet_bytes(fixed_lists(10), row_group_size=4),
    }


def categorical(rows: int) -> pa.Table:
    """Strings in lists, dictionaries and fixed-width ids, with nulls at every level."""
    tags = [None if i % 4 == 3 else [f"n{(i + j) % 3}" if j != 1 else None for j in range(i % 3)]
            for i in range(rows)]  # fmt: skip
    pairs = [None if i % 5 == 2 else ["a", None if i % 2 else "n1"] for i in range(rows)]
    return pa.table(
        {
            "tags": pa.array(tags, pa.list_(pa.string())),
            "pair": pa.array(pairs, pa.list_(pa.string(), 2)),
            "cat": pa.array([f"n{i % 2}" for i in range(rows)]).dictionary_encode(),
            "uid": pa.array([bytes([i]) * 16 for i in range(rows)], pa.binary(16)),
            "x": np.arange(rows, dtype=np.float32),
        }
    )


def structs(rows: int) -> pa.Table:
    """Structs in structs, nullable at every level, with a list and a string inside; a
    list of structs with null lists and null elements."""
    inner = [None if i % 4 == 1 else {"v": None if i % 3 == 0 else float(i), "l": [i] * (i % 3)}
             for i in range(rows)]  # fmt: skip
    outer = [
        None if i % 5 == 3 else {"id": i, "in": inner[i], "tag": f"t{i % 2}"} for i in range(rows)
    ]
    inner_type = pa.struct([("v", pa.float64()), ("l", pa.list_(pa.int32()))])
    outer_type = pa.struct(
        [pa.field("id", pa.int64(), nullable=False), ("in", inner_type), ("tag", pa.string())]
    )

    def elements(i: int) -> list[dict[str, object] | None]:
        return [None if j == 1 else {"id": j, "tag": f"t{j}"} for j in range(i % 4)]

    items = [None if i % 6 == 4 else elements(i) for i in range(rows)]
    items_type = pa.list_(pa.struct([("id", pa.int64()), ("tag", pa.string())]))
    return pa.table(
        {
            "s": pa.array(outer, outer_type),
            "items": pa.array(items, items_type),
            "x": np.arange(rows, dtype=np.float32),
        }
    )


def fixed_lists(rows: int) -> pa.Table:
    """Fixed-size lists inside fixed-size and variable lists (collapsed into their
    values), null at every level, one inside a struct, one of strings."""

    def grid(i: int) -> list[list[float | None] | None] | None:
        if i % 5 == 2:
            return None
        return [None if j == i % 3 else [float(i), None if i % 2 else float(j)] for j in range(3)]

    points = [None if i % 4 == 1 else [[i, j] if j != 1 else None for j in range(i % 3)]
              for i in range(rows)]  # fmt: skip
    grid_type = pa.list_(pa.list_(pa.float32(), 2), 3)
    return pa.table(
        {
            "grid": pa.array([grid(i) for i in range(rows)], grid_type),
            "points": pa.array(points, pa.list_(pa.list_(pa.int32(), 2))),
            "s": pa.array([{"g": grid(i + 1)} for i in range(rows)], pa.struct([("g", grid_type)])),
            "tags": pa.array(
                [[["a", None], ["b", "c"]]] * rows, pa.list_(pa.list_(pa.string(), 2), 2)
            ),
            "x": np.arange(rows, dtype=np.float32),
        }
    )


def lying_footers() -> dict[str, bytes]:
    """Footers with the counts that crashed or misled the loader (issue 10)."""
    cases = {
        "rg_rows_2p32m1": (tf.RG_NUM_ROWS, 4294967295),
        "rg_rows_2p31m1": (tf.RG_NUM_ROWS, 2**31 - 1),
        "rg_rows_2p40": (tf.RG_NUM_ROWS, 2**40),
        "rg_rows_negative": (tf.RG_NUM_ROWS, -144115188075855856),
        "file_rows_zero": (tf.FILE_NUM_ROWS, 0),
    }
    out = {}
    path = HERE / "corpus" / "decode_fuzz" / "dictionary.parquet"
    for name, (field, value) in cases.items():
        body, meta = tf.read_footer(path)
        tf.set_i64(meta if field == tf.FILE_NUM_ROWS else tf.row_groups(meta)[0], field, value)
        footer = tf.encode(meta)
        out[name + ".parquet"] = body + footer + struct.pack("<i", len(footer)) + b"PAR1"
    return out


def damaged_entries() -> dict[str, bytes]:
    """Decoded-tier records that aborted or crashed the loader (issue 10), digests re-sealed."""
    seed = HERE / "corpus" / "decoded_tier_fuzz" / "entry3-sealed"  # a list column first
    out = {}
    for field, value in [
        ("rows", 2**60),
        ("values_offset", 2**63 - 1),
        ("starts_offset", 2**63 - 1),
        ("nulls_bytes", 2**63 - 1),
        ("count", -(2**63)),
    ]:
        entry = Path("/tmp") / "shardfeed-regression-entry"
        entry.write_bytes(seed.read_bytes()[1:])  # without the harness's mode byte
        damage(entry, 0, field, value, seal=True)
        out[f"{field}_{value}"] = b"\x01" + entry.read_bytes()  # mode 1: re-seal
        entry.unlink()
    return out


def deletion_vectors() -> dict[str, bytes]:
    """Serialized deletion vectors (the Delta magic, then pyroaring's portable 64-bit
    format): array, run and bitmap containers, two buckets; and the protocol's own
    inline example (the native format)."""
    import pyroaring

    magic = struct.pack("<I", 1681511377)
    sets = {
        "array": [3, 4, 7, 11, 18, 29],
        "runs": list(range(10, 5000)) + list(range(70000, 70010)),
        "bitmap": [r for r in range(20000) if r % 3],
        "two-buckets": [1, 2, (1 << 32) + 5],
        "empty": [],
    }
    out = {}
    for name, values in sets.items():
        bitmap = pyroaring.BitMap64(values)
        bitmap.run_optimize()
        out[name] = magic + bitmap.serialize()
    # PROTOCOL.md's "JSON Example 3 — Inline", Z85-decoded.
    out["native"] = bytes.fromhex(
        "6439d3d0000000010000001c3a3000000100000000000500100000000300040007000b0012001d00"
    )
    return out


def main() -> None:
    for target in ("catalog_fuzz", "decode_fuzz"):
        folder = HERE / "corpus" / target
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in seeds().items():
            (folder / name).write_bytes(data)
    folder = HERE / "corpus" / "deletion_vector_fuzz"
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in deletion_vectors().items():
        (folder / name).write_bytes(data)
    for target, inputs in [
        ("catalog_fuzz", lying_footers()),
        ("decode_fuzz", lying_footers()),
        ("decoded_tier_fuzz", damaged_entries()),
    ]:
        folder = HERE / "regressions" / target
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in inputs.items():
            (folder / name).write_bytes(data)
    total = sum(p.stat().st_size for p in HERE.rglob("*") if p.is_file())
    print(f"cpp/fuzz: {total} bytes")


if __name__ == "__main__":
    main()
