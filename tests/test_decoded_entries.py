"""Damaged decoded-tier entries (issue 10): never trusted, never a crash; decoded again.

An entry: "SFDT0003" | u64 key length | key | u64 columns | 80-byte records | u64 header
digest | u64 data digest | buffers.  The cases below set record fields to values that used to
abort or crash the process (rows >= 2^60, offsets of INT64_MAX, ...), both leaving the digests
(the damage a disk does) and re-sealing them (what only a forger could do): either way the
entry must be a miss that is decoded again, with the same stream as without the tier.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import shardfeed
import xxhash

from .conftest import digest
from .test_decoded_cache import loader, plain

ROOT = Path(__file__).resolve().parent.parent
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


# -- an entry that loses pages while mapped ----------------------------------------------

_TRUNCATE_WHILE_MAPPED = r"""
import json, os, sys
from pathlib import Path
import shardfeed
from tests.conftest import digest

data, cache, mode, cut = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
args = dict(batch_size=32, stack={"x": [f"f{i}" for i in range(64)]}, columns=["id"],
            shuffle="global" if mode == "global" else True, seed=3, num_threads=1, prefetch=1,
            cache_dir=cache, cache_decoded=True)
if mode.startswith("torch"):  # the engine in DataLoader worker 0, its batches dealt to both
    import torch

    def make():
        return shardfeed.TorchDataset(data, **args)

    def passes(ds):
        return torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)

    def state(ds, consumed):
        return ds.state_dict(consumed)
else:
    def make():
        return shardfeed.Loader(data, output="numpy", **args)

    def passes(ld):
        return ld

    def state(ld, consumed):
        return ld.state_dict()

first = make()
list(passes(first))  # fills the decoded tier
if mode == "torch_forked_after_mapping":
    # This process maps entries (and installs the SIGBUS handler) before the
    # workers fork; each worker then installs PyTorch's over it.
    warm = shardfeed.Loader(data, output="numpy", **args)
    list(warm)
    list(warm)
first.set_epoch(1)
reference = list(passes(first))  # epoch 1 whole, mapped from the tier
loader = make()
loader.set_epoch(1)
it = iter(passes(loader))
got = [next(it) for _ in range(3)]
for entry in sorted(Path(cache, "decoded").glob("*.sfd")):
    os.truncate(entry, cut)  # another program, in place
error = None
try:
    for batch in it:
        got.append(batch)
except Exception as e:
    error = (type(e).__name__, str(e))
again = make()
again.load_state_dict(state(loader, len(got)))
rest = list(passes(again))
print(json.dumps({
    "error": error, "delivered": len(got), "batches": len(reference),
    "same": digest(got + rest) == digest(reference),
    "misses_after": None if mode.startswith("torch") else again.stats()["decoded_misses"],
}))
"""


@pytest.mark.parametrize("mode", ["window", "global", "torch", "torch_forked_after_mapping"])
@pytest.mark.parametrize("cut", [0, 4096, 70_000])
def test_an_entry_truncated_while_mapped_is_an_error_not_a_crash(tmp_path, mode, cut):
    """An outside program truncates every tier entry in place while an epoch maps them: the
    pages past the new end used to end the process with SIGBUS.  Now the batch that read
    them is not delivered, the epoch raises StorageError naming the row group and the entry,
    and a resume from the state dict gives exactly the rest of the stream.  Also in a
    DataLoader worker, where PyTorch installs a SIGBUS handler of its own first, forked from
    a process that had installed ours already or not."""
    rows = 4 * 2048
    rng = np.random.default_rng(0)
    cols = {f"f{i}": rng.standard_normal(rows).astype(np.float32) for i in range(64)}
    cols["id"] = np.arange(rows)
    data = tmp_path / "data"
    data.mkdir()
    pq.write_table(pa.table(cols), data / "part.parquet", row_group_size=2048)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _TRUNCATE_WHILE_MAPPED,
            str(data),
            str(tmp_path / "c"),
            mode,
            str(cut),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=ROOT,
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["error"] is not None, out  # the epoch's later batches read lost pages
    kind, message = out["error"]
    assert kind == "StorageError", out
    assert "lost pages while it was read" in message and "part.parquet" in message, message
    assert "row group" in message and ".sfd" in message, message
    assert 3 <= out["delivered"] < out["batches"], out
    assert out["same"], out  # nothing delivered was wrong, nothing is lost on resume
    assert mode.startswith("torch") or out["misses_after"] > 0, out  # decoded again


@pytest.mark.parametrize("shuffle", [True, "global"])
@pytest.mark.parametrize("cut", [64, "half"])
def test_an_entry_cut_short_inside_its_last_page_is_an_error_not_zeros(tmp_path, shuffle, cut):
    """Entries smaller than a page, cut short in place mid-epoch: the bytes past the new end
    of a page still mapped read as zeros with no SIGBUS, and were delivered as ids of 0
    (1,984 of 3,000 in one run).  Now the batch that read them is not delivered, and a
    resume from the state dict gives exactly the rest of the stream."""
    data, cache = tmp_path / "data", tmp_path / "cache"
    data.mkdir()
    ids = np.arange(1, 3001, dtype=np.int64)  # none is 0
    pq.write_table(pa.table({"id": ids}), data / "part.parquet", row_group_size=300)
    args = dict(batch_size=64, shuffle=shuffle, seed=3, num_threads=2, output="numpy",
                cache_dir=cache, cache_decoded=True, prefetch=1)  # fmt: skip
    first = shardfeed.Loader(data, **args)
    list(first)  # fills the tier
    reference = list(first)  # an epoch mapped from it
    entries = sorted((cache / "decoded").glob("*.sfd"))
    assert entries and all(e.stat().st_size < 4096 for e in entries)
    loader = shardfeed.Loader(data, **args)
    it = iter(loader)
    got = [next(it)]
    for entry in entries:
        os.truncate(entry, cut if cut == 64 else entry.stat().st_size // 2)
    with pytest.raises(shardfeed.StorageError, match=r"part\.parquet', row group .*\.sfd"):
        for batch in it:
            got.append(batch)
    assert all((b["id"] != 0).all() for b in got)  # nothing delivered was zeros
    again = shardfeed.Loader(data, **args)
    again.load_state_dict(loader.state_dict())
    assert digest(got + list(again)) == digest(reference)
