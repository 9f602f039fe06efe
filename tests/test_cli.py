"""The command line: `shardfeed info` and `shardfeed demo`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import shardfeed
from shardfeed import cli


def test_info_prints_the_catalog(dataset, capsys):
    assert cli.main(["info", str(dataset)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["files"] == 3 and info["rows"] == 1745
    assert info["schema"]["vec"] == "fixed_size_list<element: float>[4]"
    assert len(info["fingerprint"]) == 32


def test_info_reports_bad_input_without_a_traceback(tmp_path, capsys):
    assert cli.main(["info", str(tmp_path / "missing")]) == 2
    assert "DatasetNotFoundError" in capsys.readouterr().err


def test_bad_settings_are_errors_not_tracebacks(dataset, capsys):
    """A setting out of range is an error that names it (exit status 2), whether the
    command line or the library refuses it; the catalog is not printed as if fine."""
    import pytest

    for argv in (
        ["info", str(dataset), "--batch-size", "0"],
        ["info", str(dataset), "--memory-limit", "lots"],
        ["profile", str(dataset), "--batches", "-3"],
        ["profile", str(dataset), "--step-ms", "-1"],
        ["profile", str(dataset), "--step-ms", "nan"],
        ["profile", str(dataset), "--step-ms", "inf"],
        ["profile", str(dataset), "--step-ms", "1e300"],
        ["profile", str(dataset), "--batches", "3", "--stack", "f*"],
        ["demo", "--epochs", "0"],
    ):
        try:
            status = cli.main(argv)
        except SystemExit as e:  # argparse's own refusal
            status = e.code
        err = capsys.readouterr().err
        assert status == 2, argv
        assert argv[-2].lstrip("-").split("-")[0] in err.replace("_", "-"), (argv, err)
        assert "Traceback" not in err
    with pytest.raises(SystemExit):
        cli.main(["profile", str(dataset), "--batches", "many"])
    # A pattern that matches nothing is named as a pattern (once: "column 'zz*' is not in
    # the dataset").
    assert cli.main(["info", str(dataset), "--batch-size", "8", "--stack", "x=zz*"]) == 2
    assert "pattern 'zz*' matches no column" in capsys.readouterr().err


def test_demo_trains_and_prints_the_same_order_fingerprint_twice(tmp_path, capsys):
    assert cli.main(["demo", "--data-dir", str(tmp_path / "demo"), "--epochs", "2"]) == 0
    first = capsys.readouterr().out
    assert cli.main(["demo", "--data-dir", str(tmp_path / "demo"), "--epochs", "2",
                     "--threads", "1"]) == 0  # fmt: skip
    second = capsys.readouterr().out

    def fingerprint(out: str) -> str:
        (line,) = [line for line in out.splitlines() if "fingerprint" in line]
        return line.split()[-1]

    assert fingerprint(first) == fingerprint(second)
    assert "rows/s" in first and "wait" in first


def test_a_trace_that_cannot_be_written_fails_before_the_run(dataset, capsys, tmp_path):
    assert cli.main(["profile", str(dataset), "--trace", str(tmp_path / "no" / "t.json")]) == 2
    out, err = capsys.readouterr()
    assert out == ""  # no report: the profile did not run
    assert "cannot write the trace" in err


def test_a_failed_profile_keeps_the_trace_there_and_leaves_none_new(dataset, capsys, tmp_path):
    kept = tmp_path / "kept.json"
    kept.write_text('{"traceEvents": []}')
    fresh = tmp_path / "fresh.json"
    for trace in (kept, fresh):
        assert cli.main(["profile", str(dataset), "--columns", "nope", "--trace", str(trace)]) == 2
        assert "ColumnNotFoundError" in capsys.readouterr().err
    assert kept.read_text() == '{"traceEvents": []}' and not fresh.exists()


def test_an_interrupted_command_says_so_without_a_traceback(dataset, capsys, monkeypatch):
    def interrupted(args: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_run_profile", interrupted)
    assert cli.main(["profile", str(dataset)]) == 130
    assert capsys.readouterr().err == "shardfeed: interrupted\n"


def _command(dataset: object, **popen: Any) -> tuple[int, str]:
    """`shardfeed info DATASET` in a process of its own: (status, stderr)."""
    with subprocess.Popen([sys.executable, "-m", "shardfeed.cli", "info", str(dataset)],
                          stderr=subprocess.PIPE, text=True, **popen) as p:  # fmt: skip
        if p.stdout is not None:
            p.stdout.close()  # the reader is gone before the output comes (`| head -0`)
        err = p.stderr.read() if p.stderr else ""
        return p.wait(timeout=120), err


def test_where_the_output_cannot_go_is_said_without_a_traceback(dataset):
    """A reader that left (`| head -1`): quiet, status 1; a full disk: said, status 1;
    standard output closed (`>&-`): said, status 2, not a silent 0 with the output lost."""
    status, err = _command(dataset, stdout=subprocess.PIPE)
    assert (status, err) == (1, "")
    with open("/dev/full", "w") as full:
        status, err = _command(dataset, stdout=full)
    assert status == 1 and "No space left on device" in err and "Traceback" not in err
    status, err = _command(dataset, preexec_fn=lambda: os.close(1))
    assert status == 2 and err == "shardfeed: standard output is closed\n"


def test_bad_command_lines_exit_2_and_say_why(dataset, tmp_path, capsys):
    """Each is the user's mistake: status 2 and a message on stderr, never status 0 or 1."""
    assert cli.main(["info", str(dataset), "--filter", "notjson"]) == 2
    assert "--filter is not JSON" in capsys.readouterr().err
    # Columns asked for that do not load: the catalog is printed, then the error.
    assert cli.main(["info", str(dataset), "--columns", "nope"]) == 2
    out, err = capsys.readouterr()
    assert json.loads(out)["rows"] > 0 and "ColumnNotFoundError" in err
    # A batch larger than the dataset: nothing to profile, said so (no verdict of nothing).
    assert cli.main(["profile", str(dataset), "--batch-size", "100000000"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "nothing to profile" in err and "no full batch" in err


def test_cache_stats_and_clear_never_create_the_folder(tmp_path, capsys):
    typo = tmp_path / "typo" / "cache"
    for action in ("stats", "clear"):
        assert cli.main(["cache", action, "--cache-dir", str(typo)]) == 2
        assert "no such folder" in capsys.readouterr().err
    assert not (tmp_path / "typo").exists()
    (tmp_path / "a-file").write_text("")
    assert cli.main(["cache", "stats", "--cache-dir", str(tmp_path / "a-file")]) == 2
    assert "is not a folder" in capsys.readouterr().err
    # A folder that exists: inspected and cleared as it is, its tiers' folders not made.
    empty = tmp_path / "empty"
    empty.mkdir()
    for action in ("stats", "clear"):
        assert cli.main(["cache", action, "--cache-dir", str(empty)]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["files"]["entries"] == 0 and report["decoded"]["bytes"] == 0
        assert report.get("freed_bytes", 0) == 0
    assert list(empty.iterdir()) == []


def test_cache_clear_and_stats_refuse_a_source(dataset, tmp_path, capsys):
    """clear empties the whole folder, every dataset's entries: a SOURCE, which reads as
    'only this one', is refused before anything is cleared."""
    cache = tmp_path / "cache"
    loader = shardfeed.Loader(dataset, batch_size=100, columns=["label"], output="numpy",
                              cache_dir=cache, cache_decoded=True)  # fmt: skip
    assert sum(1 for _ in loader) > 0
    loader.close()
    assert cli.main(["cache", "stats", "--cache-dir", str(cache)]) == 0
    before = json.loads(capsys.readouterr().out)["decoded"]["entries"]
    assert before > 0
    for action in ("clear", "stats"):
        assert cli.main(["cache", action, str(dataset), "--cache-dir", str(cache)]) == 2
        err = capsys.readouterr().err
        assert f"cache {action} takes no SOURCE" in err and "whole --cache-dir" in err
    assert cli.main(["cache", "stats", "--cache-dir", str(cache)]) == 0
    assert json.loads(capsys.readouterr().out)["decoded"]["entries"] == before


def test_the_commands_take_sources_as_the_loader_does(dataset, tmp_path, capsys):
    """A URI typed with a space, and a glob: what Loader accepts, info accepts."""
    import shutil

    odd = tmp_path / "city=New York"
    shutil.copytree(dataset, odd)
    assert cli.main(["info", f"file://{odd}"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == 1745
    assert cli.main(["info", f"{dataset}/*.parquet"]) == 0
    assert json.loads(capsys.readouterr().out)["files"] == 2


def test_profile_takes_the_loader_settings_a_real_table_needs(tmp_path, capsys):
    """A table with nulls, a partition folder and a short tail: `profile` runs on it with
    the settings a Loader would need (a fill value, a filter, the last batch kept)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for day, n in (("2024-01-01", 300), ("2024-01-02", 250)):
        folder = tmp_path / "t" / f"day={day}"
        folder.mkdir(parents=True)
        values = [None if i % 7 == 0 else float(i) for i in range(n)]
        pq.write_table(pa.table({"x": values}), folder / "part-0.parquet", row_group_size=100)
    source = str(tmp_path / "t")

    def profiled(*argv: str) -> tuple[int, dict, str]:
        status = cli.main(["profile", source, "--batch-size", "64", "--json", *argv])
        out, err = capsys.readouterr()
        return status, (json.loads(out) if status == 0 else {}), err

    status, _, err = profiled("--columns", "x")
    assert status == 2 and "InvalidDataError" in err and "null" in err
    status, report, _ = profiled("--columns", "x", "--fill-null", "0", "--keep-last")
    assert status == 0 and report["rows"] == 550 and report["batches"] == 9
    status, report, _ = profiled("--columns", "x", "--fill-null", '{"x": -1}')
    assert status == 0 and report["rows"] == 8 * 64  # the partial batch dropped
    status, report, _ = profiled(
        "--columns", "x", "--fill-null", "0", "--keep-last",
        "--filter", '[["day", "=", "2024-01-02"]]',
    )  # fmt: skip
    assert status == 0 and report["rows"] == 250
    # Without partitioning `day` is no column, so a filter on it is refused by name.
    status, _, err = profiled(
        "--columns", "x", "--fill-null", "0", "--no-partitioning",
        "--filter", '[["day", "=", "2024-01-02"]]',
    )  # fmt: skip
    assert status == 2 and "day" in err
    status, _, err = profiled("--fill-null", "zero")
    assert status == 2 and "--fill-null is not JSON" in err


def test_a_table_without_columns_is_described_not_refused(tmp_path, capsys):
    """`info` on a file with no columns exited 2 with "no columns selected", naming neither
    the file nor the cause; a Loader said the same."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    import pytest
    import shardfeed

    path = tmp_path / "nocols.parquet"
    pq.write_table(pa.table({"a": [1, 2]}).select([]), path)
    assert cli.main(["info", str(path)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["schema"] == {}
    assert "InvalidDataError" in info["plan"]["error"] and "no columns" in info["plan"]["error"]
    with pytest.raises(shardfeed.InvalidDataError, match="the dataset has no columns"):
        shardfeed.Loader(path)
    ok = tmp_path / "ok.parquet"
    pq.write_table(pa.table({"a": [1, 2]}), ok)
    with pytest.raises(shardfeed.InvalidArgumentError, match=r"columns=\[\] and no stack"):
        shardfeed.Loader(ok, columns=[])


def test_info_and_profile_read_the_footers_once(dataset, monkeypatch, capsys):
    """info printed the catalog and the plan from three catalogs of the same files (every
    footer read three times: 19 s against 6 for a Loader at 100k files): one now."""
    from shardfeed import _core

    made = []
    real = _core.Dataset

    def counting(*args, **kwargs):
        made.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(_core, "Dataset", counting)
    assert cli.main(["info", str(dataset), "--stack", "x=f*", "--columns", "label"]) == 0
    assert json.loads(capsys.readouterr().out)["plan"]["batches"] > 0
    assert len(made) == 1
    made.clear()
    assert (
        cli.main(["profile", str(dataset), "--batch-size", "100", "--batches", "3", "--json"]) == 0
    )
    assert json.loads(capsys.readouterr().out)["batches"] == 3
    assert len(made) == 1
    made.clear()
    # Outside the commands, each Loader opens its own (files may change between them).
    shardfeed.Loader(dataset, columns=["label"])
    shardfeed.Loader(dataset, columns=["label"])
    assert len(made) == 2
