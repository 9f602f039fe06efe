"""Damaged decoded-tier entries (issue 10): never trusted, never a crash; decoded again.

An entry: "SFDT0003" | u64 key length | key | u64 columns | 80-byte records | u64 header
digest | u64 data digest | buffers.  The cases below set record fields to values that used to
abort or crash the process (rows >= 2^60, offsets of INT64_MAX, ...), both leaving the digests
(the damage a disk does) and re-sealing them (what only a forger could do): either way the
entry must be a miss that is decoded again, with the same stream as without the tier.
"""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import pytest
import xxhash

from .conftest import digest
from .test_decoded_cache import loader, plain

RECORD = struct.Struct("<iiqqqqqqqqq")  # dtype, from_strings, count, list_size, rows, offsets
FIELDS = ["count", "list_size", "rows", "values_offset", "values_bytes", "starts_offset"]
FIELDS += ["lengths_offset", "nulls_offset", "nulls_bytes"]


def tier_digest(data: bytes) -> int:
    """The tier's 64-bit digest: the project's one hash, XXH3-64 (util/hash.cc, Hash64)."""
    return xxhash.xxh3_64_intdigest(data)


def damage(path: Path, column: int, field: str, value: int, seal: bool) -> None:
    raw = bytearray(path.read_bytes())
    assert raw[:8] == b"SFDT0003"
    key_len = struct.unpack_from("<Q", raw, 8)[0]
    records = 16 + key_len + 8
    columns = struct.unpack_from("<Q", raw, records - 8)[0]
    at = records + RECORD.size * (column % columns)
    fields = list(RECORD.unpack_from(raw, at))
    fields[2 + FIELDS.index(field)] = value
    RECORD.pack_into(raw, at, *fields)
    if seal:
        end = records + RECORD.size * columns
        struct.pack_into("<Q", raw, end, tier_digest(bytes(raw[:end])))
    path.write_bytes(bytes(raw))


VALUES = [2**60, 2**63 - 1, -1, -(2**63), 2**31 + 7]


@pytest.mark.parametrize("seal", [False, True])
def test_damaged_records_are_misses_never_crashes(dataset, tmp_path, seal):
    reference = digest(plain(dataset))
    assert digest(loader(dataset, tmp_path / "c")) == reference  # writes every entry
    folder = tmp_path / "c" / "decoded"
    pristine = tmp_path / "pristine"
    shutil.copytree(folder, pristine)
    entries = sorted(pristine.glob("*.sfd"))
    for case, (field, value) in enumerate((f, v) for f in FIELDS for v in VALUES):
        shutil.rmtree(folder)
        shutil.copytree(pristine, folder)
        for k, entry in enumerate(entries):  # a different column in each entry
            damage(folder / entry.name, case + k, field, value, seal)
        ld = loader(dataset, tmp_path / "c")
        assert digest(ld) == reference, (field, value)
        s = ld.stats()
        assert s["decoded_hits"] + s["decoded_misses"] == len(entries), s
        assert s["decoded_corrupt"] == s["decoded_misses"], (field, value, s)
