"""Delta Lake deletion vectors: rows a DELETE marked in the log are never delivered.

No Python package here both writes and reads deletion vectors (deltalake refuses
tables with them), so the tables are made as the Delta protocol says: a table
written by `deltalake`, then a commit that re-adds its files with a
`deletionVector` each, kept inline (Z85) or in `deletion_vector_<uuid>.bin`
files (by relative or absolute path), serialized by `pyroaring` (CRoaring's
portable 64-bit format: array, bitmap and run containers). The reference is
each file read by pyarrow with the deleted positions dropped.
"""

from __future__ import annotations

import json
import struct
import uuid
import zlib
from pathlib import Path
from typing import Any

import deltalake
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pyroaring
import pytest
import shardfeed
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .conftest import digest
from .s3_server import s3_env, s3_server

_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_MAGIC = struct.pack("<I", 1681511377)


def z85(data: bytes) -> str:
    data += b"\0" * (-len(data) % 4)
    out = []
    for i in range(0, len(data), 4):
        v = int.from_bytes(data[i : i + 4], "big")
        group = ""
        for _ in range(5):
            group = _Z85[v % 85] + group
            v //= 85
        out.append(group)
    return "".join(out)


def serialized(deleted: set[int]) -> bytes:
    bitmap = pyroaring.BitMap64(sorted(deleted))
    bitmap.run_optimize()  # run containers where they are smaller
    return _MAGIC + bitmap.serialize()


def write_table(path: Path, sizes: list[list[int]]) -> list[str]:
    """A deltalake table of one file per entry of `sizes` (its row groups' sizes);
    ids count up across files. Its live files' paths, in the log's order."""
    first = 0
    for i, groups in enumerate(sizes):
        ids = np.arange(first, first + sum(groups), dtype=np.int64)
        first += len(ids)
        table = pa.table({"id": ids, "x": (ids % 7).astype(np.float32)})
        deltalake.write_deltalake(str(path), table, mode="append" if i else "error")
    # Rewritten with the row groups asked for (deltalake chooses its own), same names.
    files = [a["add"]["path"] for a in log_actions(path) if "add" in a]
    for groups, name in zip(sizes, files, strict=True):
        table = pq.read_table(path / name)
        writer = pq.ParquetWriter(path / name, table.schema)
        start = 0
        for n in groups:
            writer.write_table(table.slice(start, n), row_group_size=max(n, 1))
            start += n
        writer.close()
    return files


def log_actions(path: Path) -> list[dict[str, Any]]:
    out = []
    for commit in sorted((path / "_delta_log").glob("*.json")):
        out += [json.loads(line) for line in commit.read_text().splitlines() if line]
    return out


def live_adds(path: Path) -> dict[str, dict[str, Any]]:
    """The add action of each live file, by path (the log replayed)."""
    live: dict[str, dict[str, Any]] = {}
    for action in log_actions(path):
        if "add" in action:
            live[action["add"]["path"]] = action["add"]
        if "remove" in action:
            live.pop(action["remove"]["path"], None)
    return live


def delete_rows(path: Path, deleted: dict[str, set[int]], storage: str = "u") -> None:
    """A commit that gives each named file a deletion vector of `deleted[file]`
    (replacing any it had), stored as `storage` says ('i', 'u' or 'p')."""
    live = live_adds(path)
    name = uuid.uuid4()
    prefix = "dv" if storage == "u" else ""
    dv_file = path / prefix / f"deletion_vector_{name}.bin"
    blob = b"\x01"
    actions: list[dict[str, Any]] = [
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7,
                      "readerFeatures": ["deletionVectors"],
                      "writerFeatures": ["deletionVectors"]}},
    ]  # fmt: skip
    for file, rows in sorted(deleted.items()):
        data = serialized(rows)
        dv: dict[str, Any] = {"sizeInBytes": len(data), "cardinality": len(rows)}
        if storage == "i":
            dv |= {"storageType": "i", "pathOrInlineDv": z85(data)}
        else:
            dv["offset"] = len(blob)
            blob += struct.pack(">I", len(data)) + data + struct.pack(">I", zlib.crc32(data))
            if storage == "u":
                dv |= {"storageType": "u", "pathOrInlineDv": prefix + z85(name.bytes)}
            else:
                dv |= {"storageType": "p", "pathOrInlineDv": dv_file.as_uri()}
        old = live[file]
        actions.append({"remove": {"path": file, "dataChange": True, "deletionTimestamp": 1,
                                   "deletionVector": old.get("deletionVector")}})  # fmt: skip
        actions.append({"add": {**old, "deletionVector": dv}})
    if storage != "i":
        dv_file.parent.mkdir(exist_ok=True)
        dv_file.write_bytes(blob)
    version = len(list((path / "_delta_log").glob("*.json")))
    commit = path / "_delta_log" / f"{version:020d}.json"
    commit.write_text("".join(json.dumps(a) + "\n" for a in actions))


def expected_ids(path: Path, deleted: dict[str, set[int]]) -> list[int]:
    ids: list[int] = []
    for file in sorted(live_adds(path)):
        column = pq.read_table(path / file, columns=["id"])["id"].to_pylist()
        gone = deleted.get(file, set())
        ids += [v for i, v in enumerate(column) if i not in gone]
    return sorted(ids)


def delivered(source: Any, **kwargs: Any) -> list[int]:
    loader = shardfeed.Loader(
        source, batch_size=5, columns=["id"], drop_last=False, output="numpy", **kwargs
    )
    return sorted(int(i) for b in loader for i in b["id"])


def deletions(sizes: list[int]) -> st.SearchStrategy[list[set[int]]]:
    """Per file: a few rows, runs, or nearly everything (bitmap containers above
    4,096 values in one 65,536-row block)."""

    def of(n: int) -> st.SearchStrategy[set[int]]:
        some = st.sets(st.integers(0, n - 1), max_size=min(n, 40))
        runs = st.lists(st.tuples(st.integers(0, n - 1), st.integers(1, 3000)), max_size=4).map(
            lambda rs: {r for a, k in rs for r in range(a, min(a + k, n))}
        )
        most = st.integers(0, 997).map(lambda seed: {r for r in range(n) if (r * 7919 + seed) % 5})
        return st.one_of(some, runs, most)

    return st.tuples(*[of(n) for n in sizes]).map(list)


TABLES = st.lists(st.lists(st.integers(1, 5000), min_size=1, max_size=3), min_size=1, max_size=3)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), sizes=TABLES, storage=st.sampled_from("iup"))
def test_deleted_rows_are_never_delivered(tmp_path_factory, data, sizes, storage):
    path = tmp_path_factory.mktemp("dv") / "t"
    files = write_table(path, sizes)
    sets = data.draw(deletions([sum(groups) for groups in sizes]))
    deleted = {f: s for f, s in zip(files, sets, strict=True) if s}
    if deleted:
        delete_rows(path, deleted, storage)
    expected = expected_ids(path, deleted)
    if not expected:
        with pytest.warns(UserWarning, match="deletion vectors delete all"):
            assert delivered(path) == []
        return
    assert delivered(path) == expected
    loader = shardfeed.Loader(path, batch_size=5, columns=["id"], drop_last=False)
    assert loader.num_rows == len(expected)
    assert len(loader) == -(-len(expected) // 5)


@pytest.fixture
def deleted_table(tmp_path: Path) -> tuple[Path, dict[str, set[int]]]:
    path = tmp_path / "t"
    files = write_table(path, [[600, 400], [700], [300, 300, 300]])
    deleted = {files[0]: set(range(100, 700)), files[2]: {0, 5, 299, 300, 899}}
    delete_rows(path, deleted, "u")
    return path, deleted


def test_a_filter_and_deletion_vectors_together(deleted_table):
    path, deleted = deleted_table
    expected = [i for i in expected_ids(path, deleted) if i % 7 in (1, 2)]
    loader = shardfeed.Loader(path, batch_size=5, columns=["id"], drop_last=False,
                              output="numpy", filter=[("x", "in", [1.0, 2.0])])  # fmt: skip
    assert sorted(int(i) for b in loader for i in b["id"]) == expected
    counts = loader.stats()["filter"]
    assert counts["rows_kept"] == len(expected) == loader.num_rows
    # Each row is counted once: pruned, deleted or kept.
    parts = ("partition", "statistics", "rows")
    assert (
        counts["rows"]
        == sum(counts[f"rows_pruned_by_{p}"] for p in parts)
        + counts["rows_deleted"]
        + counts["rows_kept"]
    )
    assert 0 < counts["rows_deleted"] < 605


def test_the_stream_is_one_order_for_any_thread_count_and_after_resume(deleted_table):
    path, deleted = deleted_table
    args = dict(batch_size=64, columns=["id", "x"], seed=3, with_sample_id=True, output="numpy",
                drop_last=False)  # fmt: skip
    streams = [digest(shardfeed.Loader(path, num_threads=t, **args)) for t in (1, 2, 4)]
    assert len(set(streams)) == 1
    loader = shardfeed.Loader(path, **args)
    it = iter(loader)
    head = [next(it) for _ in range(3)]
    state = loader.state_dict()
    resumed = shardfeed.Loader(path, **args)
    resumed.load_state_dict(state)
    assert digest(head + list(resumed)) == streams[0]
    ids = sorted(int(i) for b in shardfeed.Loader(path, **args) for i in b["id"])
    assert ids == expected_ids(path, deleted)


def test_a_later_delete_changes_the_rows_the_fingerprint_and_the_decoded_cache(
    deleted_table, tmp_path
):
    path, deleted = deleted_table
    args = dict(batch_size=5, columns=["id"], drop_last=False, output="numpy",
                cache_dir=tmp_path / "cache", cache_decoded=True)  # fmt: skip
    before = shardfeed.Loader(path, **args)
    for _ in range(2):  # the second epoch from the decoded cache
        assert sorted(int(i) for b in before for i in b["id"]) == expected_ids(path, deleted)
    state = before.state_dict()
    # Row 1 of a file deleted instead of row 0: as many rows in each row group, other ones.
    small = min(deleted, key=lambda f: len(deleted[f]))
    moved = {**deleted, small: (deleted[small] - {0}) | {1}}
    delete_rows(path, moved, "i")
    after = shardfeed.Loader(path, **args)
    for _ in range(2):
        assert sorted(int(i) for b in after for i in b["id"]) == expected_ids(path, moved)
    assert after.fingerprint != before.fingerprint
    with pytest.raises(shardfeed.StateDictError, match="fingerprint"):
        after.load_state_dict(state)


def test_damaged_or_missing_vectors_are_named(deleted_table):
    path, _ = deleted_table
    (dv_file,) = (path / "dv").glob("deletion_vector_*.bin")
    blob = bytearray(dv_file.read_bytes())
    blob[20] ^= 0x10
    dv_file.write_bytes(bytes(blob))
    with pytest.raises(shardfeed.InvalidDataError, match=r"Delta table .*CRC-32"):
        shardfeed.Loader(path, batch_size=4, columns=["id"])
    dv_file.unlink()
    with pytest.raises(shardfeed.DatasetNotFoundError, match=r"deletion_vector_.*does not exist"):
        shardfeed.Loader(path, batch_size=4, columns=["id"])


def test_a_vector_past_the_end_of_its_file_is_named(tmp_path):
    path = tmp_path / "t"
    (file,) = write_table(path, [[10]])
    delete_rows(path, {file: {3, 10}}, "i")
    with pytest.raises(shardfeed.InvalidDataError, match=r"deletes row 10, but the file has 10"):
        shardfeed.Loader(path, batch_size=4, columns=["id"])


def test_info_counts_the_deleted_rows(deleted_table, capsys):
    from shardfeed import cli

    path, deleted = deleted_table
    assert cli.main(["info", str(path)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["rows"] == len(expected_ids(path, deleted))
    assert info["rows_deleted"] == sum(len(s) for s in deleted.values())


def test_a_remote_copy_reads_the_same_rows(deleted_table):
    path, _ = deleted_table
    args = dict(batch_size=16, columns=["id"], seed=2, with_sample_id=True, output="numpy")
    local = shardfeed.Loader(path, **args)
    with s3_server() as server, s3_env(server):
        remote = shardfeed.Loader(server.upload_folder(path, "delta", "t"), **args)
        assert remote.fingerprint == local.fingerprint
        assert digest(remote) == digest(local)


def test_dataloader_workers_deliver_the_loaders_stream(deleted_table):
    import torch

    path, _ = deleted_table
    args = dict(batch_size=16, columns=["id"], seed=4, with_sample_id=True)
    expected = digest(shardfeed.Loader(path, output="torch", **args))
    dataset = shardfeed.TorchDataset(path, **args)
    loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2)
    assert digest(loader) == expected


def test_a_global_shuffle_and_a_cached_filter_follow_the_vectors(deleted_table, tmp_path):
    """Epochs gathered from the decoded tier, and a filter's result kept in cache_dir,
    hold the live rows, before and after a later DELETE."""
    path, deleted = deleted_table
    args = dict(batch_size=10, columns=["id"], output="numpy", drop_last=False,
                cache_dir=tmp_path / "c", cache_decoded=True)  # fmt: skip
    keep_all = [("x", "<", 7.0)]  # x = id % 7: every row passes
    for version in range(2):
        expected = expected_ids(path, deleted)
        for kwargs in ({"shuffle": "global"}, {"filter": keep_all}):
            loader = shardfeed.Loader(path, **args, **kwargs)
            for epoch in range(2):
                loader.set_epoch(epoch)
                assert sorted(int(i) for b in loader for i in b["id"]) == expected
        if version == 0:
            small = min(deleted, key=lambda f: len(deleted[f]))
            deleted = {**deleted, small: (deleted[small] - {0}) | {1}}
            delete_rows(path, deleted, "p")


def test_one_partition_folder_of_a_table_with_vectors(tmp_path):
    path = tmp_path / "t"
    ids = np.arange(300, dtype=np.int64)
    table = pa.table({"id": ids, "x": (ids % 7).astype(np.float32), "k": ids % 3})
    deltalake.write_deltalake(str(path), table, partition_by=["k"])
    files = sorted(a["add"]["path"] for a in log_actions(path) if "add" in a)
    deleted = {files[0]: {0, 1, 50}, files[1]: set(range(10, 90))}
    delete_rows(path, deleted, "u")
    live = expected_ids(path, deleted)
    assert delivered(path) == live
    for k in range(3):
        assert delivered(path / f"k={k}") == [i for i in live if i % 3 == k]
    # Only the vectors of the files read are read: one damaged stops its own partition and
    # the whole table, not another partition or another file named alone.
    dv = live_adds(path)[files[1]]["deletionVector"]
    (bin_file,) = (path / "dv").glob("deletion_vector_*.bin")
    blob = bytearray(bin_file.read_bytes())
    blob[dv["offset"] + 10] ^= 0x01
    bin_file.write_bytes(bytes(blob))
    damaged = files[1].split("/")[0]
    with pytest.raises(shardfeed.InvalidDataError, match="CRC-32"):
        delivered(path)
    with pytest.raises(shardfeed.InvalidDataError, match="CRC-32"):
        delivered(path / damaged)
    intact = files[0].split("/")[0]
    k = int(intact.split("=")[1])
    assert delivered(path / intact) == [i for i in live if i % 3 == k]
    assert delivered([path / files[0]]) == [
        i for i in live if i % 3 == k and i in set(pq.read_table(path / files[0])["id"].to_pylist())
    ]


def test_vectors_kept_in_a_checkpoint_and_files_named_one_by_one(deleted_table):
    """A checkpoint (Parquet, Delta's checkpoint schema: int32 offset and size) in place
    of the commits before it; and the table's live files passed as a list."""
    path, deleted = deleted_table
    expected = expected_ids(path, deleted)
    live = live_adds(path)
    dv_type = pa.struct([("storageType", pa.string()), ("pathOrInlineDv", pa.string()),
                         ("offset", pa.int32()), ("sizeInBytes", pa.int32()),
                         ("cardinality", pa.int64())])  # fmt: skip
    add_type = pa.struct([("path", pa.string()), ("size", pa.int64()),
                          ("deletionVector", dv_type)])  # fmt: skip
    protocol_type = pa.struct([("minReaderVersion", pa.int32()),
                               ("minWriterVersion", pa.int32()),
                               ("readerFeatures", pa.list_(pa.string()))])  # fmt: skip
    meta_type = pa.struct([("id", pa.string()), ("partitionColumns", pa.list_(pa.string())),
                           ("configuration", pa.map_(pa.string(), pa.string()))])  # fmt: skip
    adds = [{"path": p, "size": a["size"], "deletionVector": a.get("deletionVector")}
            for p, a in live.items()]  # fmt: skip
    n = len(adds)
    checkpoint = pa.table({
        "add": pa.array([*adds, None, None], add_type),
        "protocol": pa.array([None] * n + [
            {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"]},
            None], protocol_type),
        "metaData": pa.array([None] * (n + 1) + [
            {"id": "t", "partitionColumns": [], "configuration": []}], meta_type),
    })  # fmt: skip
    commits = sorted((path / "_delta_log").glob("*.json"))
    version = len(commits) - 1
    pq.write_table(checkpoint, path / "_delta_log" / f"{version:020d}.checkpoint.parquet")
    for commit in commits:
        commit.unlink()  # the checkpoint alone says what the table holds
    assert delivered(path) == expected
    assert delivered([path / p for p in sorted(live)]) == expected


def test_a_vocabulary_leaves_out_deleted_rows(tmp_path):
    """Values only deleted rows held (a user erased by a DELETE) are not in the list,
    and counts are over live rows; a partition value whose rows are all deleted too."""
    path = tmp_path / "t"
    ids = np.arange(400, dtype=np.int64)
    users = np.array([f"u{i % 9}" for i in ids])
    users[ids % 100 == 7] = "erased"
    table = pa.table({"id": ids, "user": users, "p": np.where(ids < 200, "a", "b")})
    deltalake.write_deltalake(str(path), table, partition_by=["p"])
    deleted: dict[str, set[int]] = {}
    for file in sorted(live_adds(path)):
        users_in = pq.read_table(path / file, columns=["user"])["user"].to_pylist()
        gone = {i for i, u in enumerate(users_in) if u in ("erased", "u3")}
        if "p=b" in file:
            gone = set(range(len(users_in)))  # the whole partition deleted
        deleted[file] = gone
    delete_rows(path, deleted, "u")
    live = pa.concat_tables(
        pq.read_table(path / f, columns=["user"]).take(
            pa.array(
                [i for i in range(pq.read_metadata(path / f).num_rows) if i not in gone],
                pa.int64(),
            )
        )
        for f, gone in deleted.items()
    )["user"].to_pylist()
    counts: dict[str, int] = {}
    for u in live:
        counts[u] = counts.get(u, 0) + 1
    expected = sorted(counts, key=lambda u: (-counts[u], u))
    assert shardfeed.vocabulary(path, "user") == expected
    assert "erased" not in expected and "u3" not in expected
    assert shardfeed.vocabulary(path, "p") == ["a"]
