"""A decoded tier warmed elsewhere and mounted read-only: its entries serve, nothing is
written, the row groups it lacks are decoded, and the stream is the same.

A read-only folder is made as a read-only bind mount in a mount namespace of the test's own
(`unshare -m`), so that even root cannot write it and nothing outlives the child process.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import shardfeed

from .conftest import digest

CHILD = textwrap.dedent(
    """
    import json, sys, warnings
    import shardfeed
    from shardfeed import _core
    from shardfeed._options import CacheSettings, Caches
    sys.path.insert(0, sys.argv[4])
    from tests.conftest import digest

    dataset, cache, shuffle = sys.argv[1], sys.argv[2], sys.argv[3]
    out = {}
    ld = shardfeed.Loader(dataset, batch_size=64, columns=["label", "seq"], output="numpy",
                          with_sample_id=True, seed=4,
                          shuffle="global" if shuffle == "global" else True,
                          cache_dir=cache, cache_decoded=True)
    ld.set_epoch(1)
    try:
        out["digest"] = digest(ld)
        stats = ld.stats()
        out.update({k: stats[k] for k in ("decoded_hits", "decoded_misses", "decoded_skipped",
                                          "decoded_stored_bytes")})
        out["decode_seconds"] = stats["stages"]["decode"]["seconds"]
    except shardfeed.StorageError as e:
        out["error"] = str(e)
    tier = _core.open_decoded_tier(cache + "/decoded", 0)
    out["read_only"] = tier.read_only
    try:
        tier.clear()
    except shardfeed.StorageError as e:
        out["clear_error"] = str(e)

    class Remote:  # what Caches.open asks of a dataset
        is_local = False

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        caches = Caches.open(CacheSettings.make(cache, None, True, None), Remote(), 5.0)
    out["remote_files_cache"] = caches.files is not None
    out["warnings"] = [str(w.message) for w in seen]
    print(json.dumps(out))
    """
)


def in_read_only_mount(folder: Path, *args: str) -> dict:
    """Runs CHILD with `folder` mounted read-only over itself, in a namespace of its own."""
    if shutil.which("unshare") is None:
        pytest.fail("the test needs util-linux's unshare (scripts/setup.sh installs it)")
    script = folder.parent / "child.py"
    script.write_text(CHILD)
    mount = (
        f"mount --bind '{folder}' '{folder}' && mount -o remount,bind,ro '{folder}' '{folder}' && "
        f"exec '{sys.executable}' '{script}' " + " ".join(f"'{a}'" for a in args)
    )
    run = subprocess.run(["unshare", "-m", "sh", "-c", mount], capture_output=True, text=True,
                         timeout=300)  # fmt: skip
    if "mount:" in run.stderr or "unshare:" in run.stderr:
        pytest.skip(f"no read-only bind mount here (needs root or user namespaces): {run.stderr}")
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.splitlines()[-1])


def listing(folder: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
    }


def warm(dataset: Path, cache: Path, shuffle: bool | str) -> str:
    """Fills the tier (epoch 0) and returns the digest of epoch 1 from a writable one."""
    ld = shardfeed.Loader(dataset, batch_size=64, columns=["label", "seq"], output="numpy",
                          with_sample_id=True, seed=4, shuffle=shuffle, cache_dir=cache,
                          cache_decoded=True)  # fmt: skip
    for _ in ld:
        pass
    ld.set_epoch(1)
    out = digest(ld)
    ld.close()
    return out


@pytest.mark.parametrize("shuffle", [True, "global"])
def test_a_read_only_tier_serves_its_entries_and_writes_nothing(dataset, tmp_path, shuffle):
    cache = tmp_path / "cache"
    expected = warm(dataset, cache, shuffle)
    before = listing(cache)
    got = in_read_only_mount(cache, str(dataset), str(cache), str(shuffle),
                             str(Path(__file__).parent.parent))  # fmt: skip
    assert got["read_only"] and got["digest"] == expected
    assert got["decoded_misses"] == 0 and got["decode_seconds"] == 0  # nothing decoded
    assert got["decoded_hits"] > 0 and got["decoded_stored_bytes"] == 0
    assert listing(cache) == before  # not a lock, stamp, ledger or temporary file more
    assert "read-only" in got["clear_error"]
    # Remote data: the file cache cannot be made there, so remote files are read uncached.
    assert got["remote_files_cache"] is False
    assert any("is read-only" in w for w in got["warnings"]), got["warnings"]


def test_row_groups_a_read_only_tier_lacks_are_decoded_each_time(dataset, tmp_path):
    cache = tmp_path / "cache"
    expected = warm(dataset, cache, True)
    entries = sorted((cache / "decoded").glob("*.sfd"))
    for entry in entries[::2]:
        entry.unlink()
    lacking = len(entries[::2])
    before = listing(cache)
    got = in_read_only_mount(cache, str(dataset), str(cache), "True",
                             str(Path(__file__).parent.parent))  # fmt: skip
    assert got["digest"] == expected
    assert got["decoded_misses"] == lacking and got["decoded_skipped"] == lacking
    assert listing(cache) == before
    # Global mode cannot hold the row groups it would have stored: an error that says why.
    got = in_read_only_mount(cache, str(dataset), str(cache), "global",
                             str(Path(__file__).parent.parent))  # fmt: skip
    assert "read-only" in got["error"], got
