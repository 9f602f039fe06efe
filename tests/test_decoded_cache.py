"""The decoded tier: later epochs map row groups from disk; it never serves stale data."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import shardfeed
from shardfeed.transforms import Clip, GaussianNoise, Standardize

from .conftest import LAYOUT, digest

FEATS = [f"f{i}" for i in range(8)]
N_ROW_GROUPS = 5 + 4 + 4  # conftest.LAYOUT


RECIPE = [
    Standardize("f0", mean=0.5, std=2.0),
    GaussianNoise("f1", std=0.5),
    Clip("f1", min=-1, max=1),
]


def plain(dataset, **kw):
    kw.setdefault("transforms", RECIPE)
    return shardfeed.Loader(
        dataset,
        batch_size=64,
        stack={"feats": FEATS},
        columns=["label", "seq"],
        with_sample_id=True,
        output="numpy",
        seed=4,
        **kw,
    )


def loader(dataset, cache, **kw):
    return plain(dataset, cache_dir=cache, cache_decoded=True, **kw)


def same_streams(
    a: shardfeed.Loader, b: shardfeed.Loader, epochs: int
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Asserts that both give the same stream in each epoch; yields (epoch, a's stats)."""
    for epoch in range(epochs):
        a.set_epoch(epoch)
        b.set_epoch(epoch)
        assert digest(a) == digest(b)
        yield epoch, a.stats()


def test_same_stream_cold_and_warm_and_later_epochs_skip_decoding(dataset, tmp_path):
    cached, reference = loader(dataset, tmp_path), plain(dataset)
    # (Random transforms still vary per epoch: the reference's do.)
    for epoch, s in same_streams(cached, reference, 3):
        if epoch == 0:
            assert s["decoded_misses"] == N_ROW_GROUPS and s["decoded_hits"] == 0
        else:
            assert s["stages"]["decode"]["seconds"] == 0  # nothing was decoded again
            assert s["decoded_hits"] == epoch * N_ROW_GROUPS
    assert (tmp_path / "decoded").stat().st_mode & 0o777 == 0o700
    # A second process (a new loader) starts warm.
    again = loader(dataset, tmp_path)
    reference.set_epoch(0)
    assert digest(again) == digest(reference)
    assert again.stats()["decoded_misses"] == 0


def test_other_columns_or_deterministic_settings_never_hit_stale_entries(dataset, tmp_path):
    list(loader(dataset, tmp_path))
    other = loader(dataset, tmp_path, transforms=[Standardize("f0", mean=0.0, std=2.0)])
    assert digest(other) == digest(
        plain(dataset, transforms=[Standardize("f0", mean=0.0, std=2.0)])
    )
    assert other.stats()["decoded_hits"] == 0


def test_damaged_or_truncated_entries_are_decoded_again(dataset, tmp_path):
    reference = digest(plain(dataset))
    list(loader(dataset, tmp_path))
    files = sorted((tmp_path / "decoded").glob("*.sfd"))
    assert len(files) == N_ROW_GROUPS
    raw = bytearray(files[0].read_bytes())
    raw[-100] ^= 0xFF  # flip a bit in the data
    files[0].write_bytes(bytes(raw))
    files[1].write_bytes(files[1].read_bytes()[:200])  # truncate
    ld = loader(dataset, tmp_path)
    assert digest(ld) == reference
    s = ld.stats()
    assert s["decoded_misses"] == 2 and s["decoded_corrupt"] == 1
    assert digest(loader(dataset, tmp_path)) == reference  # and they were rewritten


def test_limit_is_never_exceeded(dataset, tmp_path):
    limit = 60_000
    ld = loader(dataset, tmp_path, cache_limit_bytes=limit)
    assert digest(ld) == digest(plain(dataset))
    used = sum(f.stat().st_size for f in (tmp_path / "decoded").glob("*.sfd"))
    assert 0 < used <= limit
    assert ld.stats()["decoded_skipped"] > 0


def test_the_limit_holds_for_every_loader_of_the_folder_together(dataset, tmp_path):
    """Loaders that open the folder at once (ranks of a node, jobs sharing a cache_dir) used
    to count only what they found when they opened it plus their own stores: each wrote up
    to the limit.  The folder's count is now shared (tier/usage_ledger.h)."""
    limit = 60_000
    others = [Standardize("f0", mean=0.0, std=3.0 + k) for k in range(3)]
    loaders = [loader(dataset, tmp_path, cache_limit_bytes=limit, transforms=[t]) for t in others]
    for ld, t in zip(loaders, others, strict=True):  # each opened the folder before any stored
        assert digest(ld) == digest(plain(dataset, transforms=[t]))
    used = sum(f.stat().st_size for f in (tmp_path / "decoded").glob("*.sfd"))
    assert 0 < used <= limit
    assert loaders[0].stats()["decoded_skipped"] < N_ROW_GROUPS  # the first one stored some
    assert loaders[-1].stats()["decoded_skipped"] == N_ROW_GROUPS  # the last found no room
    # A loader opened now counts the folder as it is: no room either.
    late = loader(dataset, tmp_path, cache_limit_bytes=limit, transforms=[Clip("f0", min=0)])
    list(late)
    assert late.stats()["decoded_skipped"] == N_ROW_GROUPS


def test_a_killed_writer_leaves_nothing_that_is_served(dataset, tmp_path):
    # A child writes a temp file, then dies before the rename.
    folder = tmp_path / "decoded"
    folder.mkdir(mode=0o700)
    code = (
        f"import os; p = {str(folder)!r} + f'/.tmp-{{os.getpid()}}-1.sfd'; "
        "open(p, 'wb').write(b'SFDT0001garbage'); os._exit(9)"
    )
    subprocess.run([sys.executable, "-c", code], check=False)
    assert len(list(folder.glob(".tmp-*"))) == 1
    ld = loader(dataset, tmp_path)
    assert not list(folder.glob(".tmp-*"))  # removed: its writer is gone
    assert digest(ld) == digest(plain(dataset))


def test_cache_decoded_needs_a_folder(dataset):
    import pytest

    with pytest.raises(ValueError, match="cache_dir"):
        shardfeed.Loader(dataset, cache_decoded=True)
    assert os.path.isdir(dataset)


def test_torch_dataset_workers_share_the_tier(dataset, tmp_path):
    import torch

    ds = shardfeed.TorchDataset(
        dataset,
        batch_size=64,
        stack={"feats": FEATS},
        columns=["label"],
        with_sample_id=True,
        output="numpy",
        seed=4,
        cache_dir=tmp_path,
        cache_decoded=True,
    )
    first = digest(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2))
    second = digest(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2))
    assert first == second
    assert len(list(Path(tmp_path, "decoded").glob("*.sfd"))) == N_ROW_GROUPS


SCALARS = {
    "b": pa.bool_(),
    "i8": pa.int8(),
    "i16": pa.int16(),
    "i32": pa.int32(),
    "i64": pa.int64(),
    "u8": pa.uint8(),
    "u16": pa.uint16(),
    "u32": pa.uint32(),
    "u64": pa.uint64(),
    "f32": pa.float32(),
    "f64": pa.float64(),
}


def every_dtype(root: Path) -> Path:
    """Row groups of 64 rows (buffers end on 64-byte boundaries), values with high bytes set."""
    n = 256
    rng = np.random.default_rng(3)
    cols: dict[str, pa.Array] = {}
    for name, t in SCALARS.items():
        if t == pa.bool_():
            cols[name] = pa.array(rng.integers(0, 2, n) == 1)
        elif pa.types.is_floating(t):
            cols[name] = pa.array(rng.standard_normal(n) * 1e3, t)
        else:
            dtype = t.to_pandas_dtype()
            info = np.iinfo(dtype)
            cols[name] = pa.array(rng.integers(info.min, info.max, n, dtype, endpoint=True), t)
    cols["fixed"] = pa.FixedSizeListArray.from_arrays(pa.array(rng.standard_normal(2 * n)), 2)
    cols["seq"] = pa.array([[-float(i)] * (i % 3 + 1) for i in range(n)], pa.list_(pa.float32()))
    root.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(cols), root / "d.parquet", row_group_size=64)
    return root


NUMERIC = [name for name in SCALARS if name != "b"]


@pytest.mark.parametrize(
    ("column", "stacked"),
    [(c, False) for c in [*SCALARS, "fixed", "seq"]] + [(c, True) for c in NUMERIC],
)
def test_the_tier_hits_for_every_dtype(tmp_path, column, stacked):
    """Issue 10: an entry whose last buffer ended the file lost its last byte to the padding
    (judged corrupt on every load: floats and full-range integers never hit)."""
    data = every_dtype(tmp_path / "data")
    kw: dict[str, Any] = dict(batch_size=50, output="numpy", seed=1, drop_last=False)
    if stacked:
        kw.update(stack={"s": [column]}, columns=[])
    else:
        kw.update(columns=[column])
    reference = shardfeed.Loader(data, **kw)
    cached = shardfeed.Loader(data, cache_dir=tmp_path / "c", cache_decoded=True, **kw)
    for epoch in range(2):
        cached.set_epoch(epoch)
        reference.set_epoch(epoch)
        assert digest(cached) == digest(reference)
    s = cached.stats()
    assert s["decoded_hits"] == 4 and s["decoded_corrupt"] == 0, s
    # A new loader checks every entry's digest again: all hit.
    again = shardfeed.Loader(data, cache_dir=tmp_path / "c", cache_decoded=True, **kw)
    reference.set_epoch(0)
    assert digest(again) == digest(reference)
    s = again.stats()
    assert s["decoded_hits"] == 4 and s["decoded_misses"] == 0 and s["decoded_corrupt"] == 0, s


def test_cache_cli_counts_and_clears_the_decoded_tier(dataset, tmp_path, capsys):
    from shardfeed import cli

    digest(loader(dataset, tmp_path))
    (tmp_path / "decoded" / "notes.txt").write_text("not the tier's")  # left alone
    # Not an entry's name either (once counted and removed as one).
    (tmp_path / "decoded" / "report.sfd").write_text("not the tier's")
    assert cli.main(["cache", "stats", "--cache-dir", str(tmp_path)]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["decoded"]["entries"] == N_ROW_GROUPS and stats["decoded"]["bytes"] > 0
    assert cli.main(["cache", "clear", "--cache-dir", str(tmp_path)]) == 0
    cleared = json.loads(capsys.readouterr().out)
    assert cleared["freed_decoded_bytes"] == stats["decoded"]["bytes"]
    assert cleared["decoded"] == {"dir": stats["decoded"]["dir"], "entries": 0, "bytes": 0}
    assert (tmp_path / "decoded" / "notes.txt").exists()
    assert (tmp_path / "decoded" / "report.sfd").exists()
    # Cleared, the next loader decodes again and gives the same stream.
    again, reference = loader(dataset, tmp_path), plain(dataset)
    assert digest(again) == digest(reference)
    assert again.stats()["decoded_misses"] == N_ROW_GROUPS


def test_a_stack_of_deterministic_columns_is_stored_as_its_matrix(dataset, tmp_path):
    """Issue 11 item 4: when no member of a stack has a random transform, the tier holds the
    stack's row-major matrix (before the stack's own transforms) and not its member columns;
    a warm epoch maps it: no decode, no transpose, the same stream, random stack transforms
    still fresh per epoch."""
    kw: dict[str, Any] = dict(
        transforms=[Standardize("f0", mean=0.5, std=2.0), GaussianNoise("feats", std=0.1)]
    )
    cached, reference = loader(dataset, tmp_path, **kw), plain(dataset, **kw)
    for epoch, s in same_streams(cached, reference, 3):
        if epoch > 0:
            assert s["decoded_hits"] == epoch * N_ROW_GROUPS and s["decoded_corrupt"] == 0
            assert s["stages"]["decode"]["seconds"] == 0
            assert s["stages"]["assemble"]["bytes"] == 0  # no matrix made again

    # The entries: the matrix (rows x 8 float32) next to label and seq, not the 8 member
    # columns too -- against the entries of label and seq alone.
    def tier_bytes(folder: Path) -> int:
        return sum(f.stat().st_size for f in (folder / "decoded").glob("*.sfd"))

    alone = shardfeed.Loader(
        dataset, batch_size=64, columns=["label", "seq"], output="numpy",
        cache_dir=tmp_path / "alone", cache_decoded=True,
    )  # fmt: skip
    list(alone)
    matrix = sum(n for _, n, _ in LAYOUT) * len(FEATS) * 4
    extra = tier_bytes(tmp_path) - tier_bytes(tmp_path / "alone")
    assert matrix <= extra < 1.25 * matrix, (extra, matrix)
    # A member with a random transform: the columns are stored instead (another entry).
    noisy = [Standardize("f0", mean=0.5, std=2.0), GaussianNoise("f3", std=0.1)]
    other = loader(dataset, tmp_path, transforms=noisy)
    assert digest(other) == digest(plain(dataset, transforms=noisy))
    assert other.stats()["decoded_hits"] == 0
    assert other.stats()["stages"]["assemble"]["bytes"] > 0


def test_filtered_row_groups_hit_the_tier(dataset, tmp_path):
    """A filtered row group's entry holds the rows that pass; it used to be checked against
    the whole row group's count, so it never hit."""
    kw: dict[str, Any] = dict(filter=[("label", "=", 1)], drop_last=False)
    cached, reference = loader(dataset, tmp_path, **kw), plain(dataset, **kw)
    *_, (_, s) = same_streams(cached, reference, 2)
    assert s["decoded_hits"] == N_ROW_GROUPS and s["decoded_corrupt"] == 0, s


_SHARER = r"""
import json, sys
import shardfeed
src, cache, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
ld = shardfeed.Loader(src, batch_size=64, stack={"feats": [f"f{i}" for i in range(8)]},
                      columns=["label"], output="numpy", seed=seed, num_threads=2,
                      cache_dir=cache, cache_decoded=True)
ld._settings.extra.update(debug_slow_stage="decode", debug_slow_us=150_000)
ld._settings.extra["start_early"] = False  # a next pass's engine would map the tier too
rows = sum(len(b["label"]) for b in ld)
s = ld.stats()
print(json.dumps({"hits": s["decoded_hits"], "misses": s["decoded_misses"], "rows": rows}))
"""


def test_processes_sharing_the_tier_decode_each_row_group_once(dataset, tmp_path):
    """Issue 12 item 2: ranks or DataLoader workers on a node that share a decoded tier
    decode each row group once (the entry's lock): the others wait and map it."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _SHARER, str(dataset), str(tmp_path), str(seed)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for seed in (1, 2)
    ]
    outs = [json.loads(p.communicate(timeout=300)[0]) for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert sum(o["misses"] for o in outs) == N_ROW_GROUPS, outs
    assert sum(o["hits"] for o in outs) == N_ROW_GROUPS, outs
    assert len(list((tmp_path / "decoded").glob("*.sfd"))) == N_ROW_GROUPS


def test_a_local_rewrite_with_its_mtime_set_back_is_not_served_stale(tmp_path):
    """cp -p, rsync -t and tar x rewrite a file at the same size and restore its mtime:
    its change time (which no one can set back) now keys the tier too."""
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq

    data = tmp_path / "d"
    data.mkdir()
    path = data / "p.parquet"

    def write(value: float) -> None:
        table = pa.table({"v": np.full(100, value, np.float32)})
        pq.write_table(table, path, compression="none", use_dictionary=False)

    def read() -> float:
        loader = shardfeed.Loader(data, batch_size=100, output="numpy",
                                  cache_dir=tmp_path / "cache", cache_decoded=True)  # fmt: skip
        return float(next(iter(loader))["v"][0])

    write(1.0)
    before = os.stat(path)
    assert read() == 1.0
    write(2.0)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(path).st_size == before.st_size
    assert read() == 2.0


@pytest.mark.parametrize("shuffle", [True, "global"])
def test_a_file_replaced_between_epochs_is_an_error_not_its_old_rows(tmp_path, shuffle):
    """The tier's entries are keyed by the file as the loader opened it: a local file
    replaced later (a sync tool's rename) was served from them, old rows and all, where
    an uncached read says the file changed."""
    data = tmp_path / "d"
    data.mkdir()
    for name, base in (("a.parquet", 0.0), ("b.parquet", 100.0)):
        pq.write_table(pa.table({"v": np.arange(base, base + 40, dtype=np.float64)}),
                       data / name, row_group_size=10)  # fmt: skip
    ld = shardfeed.Loader(data, batch_size=8, output="numpy", shuffle=shuffle,
                          cache_dir=tmp_path / "cache", cache_decoded=True)  # fmt: skip
    assert sum(len(b["v"]) for b in ld) == 80
    ld.set_epoch(1)
    assert sum(len(b["v"]) for b in ld) == 80  # from the tier
    new = tmp_path / "new.parquet"
    pq.write_table(pa.table({"v": np.arange(1000.0, 1040.0)}), new, row_group_size=10)
    os.replace(new, data / "b.parquet")
    ld.set_epoch(2)
    with pytest.raises(shardfeed.InvalidDataError, match=r"b\.parquet.*changed"):
        list(ld)


def test_a_fifo_in_place_of_an_entry_is_a_miss_not_a_hang(tmp_path):
    """Opening a FIFO waits for a writer: a cache entry (or its stamp) replaced by one
    hung the next loader, beyond Ctrl-C.  It is a damaged entry: decoded again."""
    data = tmp_path / "a.parquet"
    pq.write_table(pa.table({"x": np.arange(1000.0)}), data, row_group_size=250)
    args = dict(batch_size=100, output="numpy", shuffle=False, cache_dir=tmp_path / "cache",
                cache_decoded=True)  # fmt: skip
    first = np.concatenate([b["x"] for b in shardfeed.Loader(data, **args)])
    entries = sorted((tmp_path / "cache" / "decoded").glob("*.sfd"))
    assert len(entries) == 4
    for entry in entries[:2]:
        entry.unlink()
        os.mkfifo(entry)
    for other in (tmp_path / "cache" / "decoded").iterdir():
        if other.suffix not in (".sfd", ".lock") and other.is_file():
            other.unlink()
            os.mkfifo(other)  # stamps and the like too
    locks = sorted((tmp_path / "cache" / "decoded").glob("????????????????.lock"))
    for lock in locks[2:]:  # an entry's lock file, which is also its verified stamp
        lock.unlink()
        os.mkfifo(lock)
    code = (
        "import sys, numpy as np, shardfeed\n"
        f"ld = shardfeed.Loader({str(data)!r}, batch_size=100, output='numpy', shuffle=False,"
        f" cache_dir={str(tmp_path / 'cache')!r}, cache_decoded=True)\n"
        "x = np.concatenate([b['x'] for b in ld])\n"
        "print(float(x.sum()), ld.stats()['decoded_hits'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    total, hits = out.stdout.split()
    assert float(total) == float(first.sum())
    assert int(hits) <= 2
    for lock in locks[2:]:
        os.unlink(lock)
        os.mkfifo(lock)
    cleared = subprocess.run(
        [sys.executable, "-m", "shardfeed.cli", "cache", "clear", "--cache-dir",
         str(tmp_path / "cache")], capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert cleared.returncode == 0, cleared.stderr
    left = [p for p in (tmp_path / "cache" / "decoded").iterdir() if not p.is_file()]
    assert left == []  # `cache clear` removes what is no file of its own


def test_an_entry_damaged_in_place_while_a_loader_runs_is_decoded_again(tmp_path):
    """The loader that wrote (or checked) an entry remembered it as checked by its
    key and digest alone: bytes overwritten in place between two of its epochs were
    served as data.  It remembers the file's identity too, which the write changed."""
    data = tmp_path / "a.parquet"
    pq.write_table(pa.table({"x": np.arange(1000.0)}), data, row_group_size=250)
    ld = shardfeed.Loader(data, batch_size=100, output="numpy", shuffle=False,
                          cache_dir=tmp_path / "cache", cache_decoded=True)  # fmt: skip
    for epoch in (0, 1):
        ld.set_epoch(epoch)
        assert np.array_equal(np.concatenate([b["x"] for b in ld]), np.arange(1000.0))
    assert ld.stats()["decoded_hits"] == 4
    for entry in (tmp_path / "cache" / "decoded").glob("*.sfd"):
        with open(entry, "r+b") as f:  # inside the data buffer, the header left alone
            f.seek(entry.stat().st_size - 64)
            f.write(b"\x7f" * 8)
    for epoch in (2, 3):
        ld.set_epoch(epoch)
        assert np.array_equal(np.concatenate([b["x"] for b in ld]), np.arange(1000.0))


def test_a_full_tier_makes_room_by_dropping_what_a_rewrite_superseded(tmp_path):
    """Entries of a file's old versions stayed for ever: a tier at its limit stored
    nothing of the rewritten dataset, and every epoch after the rewrite decoded again.
    A full tier now first removes the entries of this dataset's files that changed;
    another dataset's entries in the same folder stay."""
    data, other = tmp_path / "data", tmp_path / "other"
    for folder, seed in ((data, 0), (other, 1)):
        folder.mkdir()
        for i in range(3):
            values = np.random.default_rng([seed, i]).random(600)
            pq.write_table(pa.table({"x": values}), folder / f"p{i}.parquet", row_group_size=200)
    cache = tmp_path / "cache"
    kw = dict(batch_size=100, shuffle=False, output="numpy", cache_dir=cache, cache_decoded=True)
    list(shardfeed.Loader(other, **kw))
    list(shardfeed.Loader(data, **kw))

    def tier_bytes() -> int:
        return sum(f.stat().st_size for f in (cache / "decoded").glob("*.sfd"))

    limit = tier_bytes() + 4_000  # room for what is there and the growth, not for both versions
    for i in range(3):  # rewritten: other values, another size
        values = np.random.default_rng([2, i]).random(700)
        pq.write_table(pa.table({"x": values}), data / f"p{i}.parquet", row_group_size=200)
    ld = shardfeed.Loader(data, cache_limit_bytes=limit, **kw)
    got = np.concatenate([b["x"] for b in ld])
    want = np.concatenate([pq.read_table(data / f"p{i}.parquet")["x"].to_numpy() for i in range(3)])
    assert np.array_equal(got, want)
    assert ld.stats()["decoded_skipped"] == 0
    ld.set_epoch(1)
    assert np.array_equal(np.concatenate([b["x"] for b in ld]), want)
    assert ld.stats()["decoded_hits"] == 12  # every row group of the new version, mapped
    assert tier_bytes() <= limit
    # The other dataset's entries were not touched: all still mapped.
    again = shardfeed.Loader(other, **kw)
    list(again)
    assert again.stats()["decoded_misses"] == 0
