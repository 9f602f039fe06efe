"""Bad input: a clear exception that names the file, row group or column; never a crash or hang."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import shardfeed

from .conftest import make_table


def write(path: Path, table: pa.Table, row_group_size: int = 100) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, row_group_size=row_group_size)
    return path


def test_missing_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope") as e:
        shardfeed.Loader(tmp_path / "nope")
    assert isinstance(e.value, shardfeed.DatasetNotFoundError)


def test_folder_without_parquet_files(tmp_path):
    (tmp_path / "readme.txt").write_text("hello")
    with pytest.raises(FileNotFoundError, match=r"no Parquet files"):
        shardfeed.Loader(tmp_path)


def test_not_a_parquet_file(tmp_path):
    write(tmp_path / "good.parquet", make_table(0, 50, 0))
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 this is not really parquet")
    with pytest.raises(shardfeed.InvalidDataError, match=r"bad\.parquet"):
        shardfeed.Loader(tmp_path)


def test_truncated_file(tmp_path):
    path = write(tmp_path / "t.parquet", make_table(0, 500, 0))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"t\.parquet"):
        shardfeed.Loader(tmp_path)


def test_corrupt_page_is_raised_at_its_position(tmp_path):
    t = pa.table({"v": np.arange(4000, dtype=np.int64)})
    path = write(tmp_path / "c.parquet", t, row_group_size=1000)
    meta = pq.ParquetFile(path).metadata
    col = meta.row_group(2).column(0)  # damage the pages of row group 2 only
    start = col.dictionary_page_offset or col.data_page_offset
    raw = bytearray(path.read_bytes())
    raw[start : start + col.total_compressed_size] = b"\xff" * col.total_compressed_size
    path.write_bytes(bytes(raw))
    ld = shardfeed.Loader(path, batch_size=500, shuffle=False, output="numpy", num_threads=3)
    got = []
    with pytest.raises(shardfeed.InvalidDataError) as e:
        for batch in ld:
            got.append(batch["v"])
    assert "c.parquet" in str(e.value) and "row group 2" in str(e.value)
    assert "column 'v'" in str(e.value)
    # Everything before the damaged row group was delivered, in order.
    assert np.concatenate(got).tolist() == list(range(2000))


def test_schemas_that_disagree(tmp_path):
    write(tmp_path / "a.parquet", pa.table({"x": [1.0, 2.0], "y": [1, 2]}))
    write(tmp_path / "b.parquet", pa.table({"x": [1.0, 2.0], "y": ["p", "q"]}))
    with pytest.raises(shardfeed.SchemaMismatchError, match=r"b\.parquet.*a\.parquet.*'y'"):
        shardfeed.Loader(tmp_path)


def test_missing_column(tmp_path):
    write(tmp_path / "a.parquet", make_table(0, 50, 0))
    with pytest.raises(KeyError) as e:
        shardfeed.Loader(tmp_path, columns=["x", "nope"])
    assert "column 'nope'" in str(e.value)
    with pytest.raises(shardfeed.ColumnNotFoundError, match="'ghost'"):
        shardfeed.Loader(tmp_path, columns=[], stack={"s": ["f0", "ghost"]})


def test_unsupported_type(tmp_path):
    write(tmp_path / "a.parquet", pa.table({"name": ["a", "b"], "x": [1.0, 2.0]}))
    with pytest.raises(TypeError, match=r"column 'name' has type string"):
        shardfeed.Loader(tmp_path)
    ld = shardfeed.Loader(tmp_path, columns=["x"], batch_size=2, output="numpy")
    assert next(iter(ld))["x"].shape == (2,)
    nested = tmp_path / "nested"
    write(nested / "n.parquet", pa.table({"ll": pa.array([[[1]], [[2]]])}))
    with pytest.raises(shardfeed.UnsupportedTypeError, match="nested"):
        shardfeed.Loader(nested)
    # A Spark table's map keys, or a struct's string field, the model does not use:
    # the error names it by its path and says how to leave it out, which works.
    spark = tmp_path / "spark"
    info = pa.array([{"a": 1, "b": "x"}, {"a": 2, "b": "y"}])
    write(spark / "s.parquet", pa.table({"x": [1.0, 2.0], "info": info}))
    with pytest.raises(
        shardfeed.UnsupportedTypeError, match=r"'info\.b' has type string.*columns="
    ):
        shardfeed.Loader(spark)
    assert shardfeed.Loader(spark, columns=["x", "info.a"], batch_size=2).num_rows == 2
    props = pa.array([[("k", 1)], []], pa.map_(pa.string(), pa.int64()))
    write(spark / "m" / "m.parquet", pa.table({"x": [1.0, 2.0], "props": props}))
    with pytest.raises(shardfeed.UnsupportedTypeError, match=r"'props\.key'.*HashBucket.*columns="):
        shardfeed.Loader(spark / "m")
    assert shardfeed.Loader(spark / "m", columns=["x", "props.value"], batch_size=2).num_rows == 2


def test_zero_row_files_are_skipped(tmp_path):
    write(tmp_path / "a.parquet", make_table(0, 40, 0))
    write(tmp_path / "b_empty.parquet", make_table(0, 0, 0))
    ld = shardfeed.Loader(tmp_path, batch_size=10, shuffle=False, output="numpy", columns=["id"])
    assert ld.num_rows == 40
    assert np.concatenate([b["id"] for b in ld]).tolist() == list(range(40))


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "8"])
def test_bad_batch_size(tmp_path, bad):
    write(tmp_path / "a.parquet", make_table(0, 40, 0))
    with pytest.raises(ValueError, match="batch_size"):
        shardfeed.Loader(tmp_path, batch_size=bad)


def test_an_epoch_of_no_batches_is_a_warning_that_says_why(tmp_path):
    """Legal (the loop then does nothing) but rarely meant: a warning at the line that
    iterates the loader (once), or that makes a TorchDataset, naming the cause.  A loader
    made to look at the data stays quiet."""
    import warnings

    write(tmp_path / "a.parquet", make_table(0, 10, 0))
    cases = [
        (dict(batch_size=64), "10 rows make no full batch of 64 on each of 1 rank"),
        (dict(batch_size=4, world_size=4, rank=3), "no full batch of 4 on each of 4 rank"),
        (dict(batch_size=4, filter=[("label", ">", 10**6)]), "no rows pass the filter"),
    ]
    for kw, why in cases:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            loader = shardfeed.Loader(tmp_path, **kw)
            assert len(loader) == 0 and loader.num_rows >= 0
        with pytest.warns(UserWarning, match=f"every epoch has no batches: .*{why}") as seen:
            assert list(loader) == []
        assert len(seen) == 1 and seen[0].filename == __file__, kw
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert list(loader) == []  # once
    with pytest.warns(UserWarning, match="no full batch of 64") as seen:
        shardfeed.TorchDataset(tmp_path, batch_size=64)
    assert seen[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(list(shardfeed.Loader(tmp_path, batch_size=64, drop_last=False))) == 1


def test_bad_settings(tmp_path):
    write(tmp_path / "a.parquet", make_table(0, 10, 0))
    with pytest.raises(ValueError, match="rank"):
        shardfeed.Loader(tmp_path, rank=3, world_size=2)
    with pytest.raises(ValueError, match="output"):
        shardfeed.Loader(tmp_path, output="tensorflow")
    with pytest.raises(ValueError, match="drop_last"):
        shardfeed.Loader(tmp_path, batch_size=1, world_size=20, rank=0, drop_last=False)
    with pytest.raises(ValueError, match="used twice"):
        shardfeed.Loader(tmp_path, columns=["x"], stack={"x": ["f0"]})


def test_errors_are_shardfeed_errors(tmp_path):
    with pytest.raises(shardfeed.ShardfeedError):
        shardfeed.Loader(tmp_path / "missing")


def test_a_loader_says_it_cannot_be_pickled_or_copied(tmp_path):
    import copy
    import pickle

    write(tmp_path / "a.parquet", make_table(0, 40, 0))
    ld = shardfeed.Loader(tmp_path, batch_size=10)
    for attempt in (pickle.dumps, copy.copy, copy.deepcopy):
        with pytest.raises(TypeError, match=r"Loader cannot be pickled.*TorchDataset"):
            attempt(ld)
    assert len(list(ld)) == 4  # and it still works


def test_a_source_that_is_not_a_regular_file_is_refused_at_once(tmp_path):
    """A FIFO named as the source blocked the open forever (no writer); a device
    would be read without end."""
    fifo = tmp_path / "x.parquet"
    os.mkfifo(fifo)
    with pytest.raises(shardfeed.InvalidArgumentError, match=r"named pipe \(FIFO\)"):
        shardfeed.Loader(fifo, batch_size=1)
    with pytest.raises(shardfeed.InvalidArgumentError, match="character device"):
        shardfeed.Loader("/dev/zero", batch_size=1)
