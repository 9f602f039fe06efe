"""The storage layer's cache folders: private modes, refusal of folders others
control, and the temp-file protocol across PID namespaces."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import shardfeed
from shardfeed import _core

from .conftest import digest

N_ROW_GROUPS = 5 + 4 + 4  # conftest.LAYOUT


def loader(dataset: Path, cache: Path | None = None) -> shardfeed.Loader:
    return shardfeed.Loader(
        dataset,
        batch_size=64,
        columns=["label", "seq"],
        with_sample_id=True,
        output="numpy",
        seed=4,
        cache_dir=cache,
        cache_decoded=cache is not None,
    )


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_folders_and_entries_are_private_whatever_the_umask(dataset, tmp_path):
    cache = tmp_path / "made" / "by" / "us"
    old = os.umask(0)
    try:
        assert digest(loader(dataset, cache)) == digest(loader(dataset))
    finally:
        os.umask(old)
    for folder in (tmp_path / "made", tmp_path / "made" / "by", cache, cache / "decoded"):
        assert mode(folder) == 0o700, folder
    entries = list((cache / "decoded").iterdir())
    assert len([e for e in entries if e.suffix == ".sfd"]) == N_ROW_GROUPS
    for entry in entries:
        assert mode(entry) == 0o600, entry


@pytest.mark.parametrize("kind", ["decoded", "files"])
def test_a_folder_others_can_write_is_refused(tmp_path, kind):
    folder = tmp_path / "cache" / kind
    folder.mkdir(parents=True)
    folder.chmod(0o777)
    with pytest.raises(shardfeed.InvalidArgumentError, match="writable by group or others") as e:
        if kind == "decoded":
            _core.open_decoded_tier(str(folder), 0)
        else:
            _core.open_file_cache(str(folder), 0)
    assert str(folder) in str(e.value)
    folder.chmod(0o700)
    if kind == "decoded":  # accepted once it is private again
        _core.open_decoded_tier(str(folder), 0)
    else:
        _core.open_file_cache(str(folder), 0)


def test_a_folder_of_another_user_is_refused(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("chown to another user needs root")
    folder = tmp_path / "theirs"
    folder.mkdir(mode=0o700)
    os.chown(folder, 12345, 12345)
    with pytest.raises(shardfeed.InvalidArgumentError, match="owned by another user"):
        _core.open_decoded_tier(str(folder), 0)


# A process in its own PID namespace: it first holds an in-progress temp file
# by the protocol of storage/temp_file.h (named with its pid, as pid-based
# cleaners expected), waits for the other process, then runs a real loader on
# the shared decoded tier (whose Open cleans temps of dead writers) and checks
# that its temp survived.
WORKER = textwrap.dedent(
    """
    import fcntl, json, os, sys, time
    import shardfeed
    dataset, folder, me, other = sys.argv[1:5]
    lock = os.open(folder + "/decoded/shardfeed.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(lock, fcntl.LOCK_SH)  # the creation lock, shared among writers
    temp = f"{folder}/decoded/.tmp-{os.getpid()}-inflight.sfd"
    fd = os.open(temp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.close(lock)
    open(f"{folder}/{me}.ready", "w").write(str(os.getpid()))
    deadline = time.monotonic() + 60
    while not os.path.exists(f"{folder}/{other}.ready"):
        assert time.monotonic() < deadline, "the other process never started"
        time.sleep(0.01)
    ld = shardfeed.Loader(dataset, batch_size=64, columns=["label", "seq"],
                          with_sample_id=True, output="numpy", seed=4,
                          cache_dir=folder, cache_decoded=True)
    import hashlib
    h = hashlib.sha256()
    for batch in ld:
        for name in sorted(batch):
            h.update(name.encode()); h.update(batch[name].tobytes())
    survived = os.path.exists(temp)
    os.unlink(temp)
    os.close(fd)
    s = ld.stats()
    print(json.dumps({"pid": os.getpid(), "survived": survived, "digest": h.hexdigest(),
                      "corrupt": s["decoded_corrupt"]}))
    """
)


def unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-p", "-f", "true"], capture_output=True, check=False)
    return probe.returncode == 0


def test_processes_in_separate_pid_namespaces_share_a_cache_folder(dataset, tmp_path):
    if not unshare_works():
        pytest.skip("needs `unshare -p -f` (util-linux, and root or user namespaces)")
    cache = tmp_path / "cache"
    _core.open_decoded_tier(str(cache / "decoded"), 0)
    # Different pids in each namespace: each worker's pid names no process in
    # the other namespace (a pid-based cleaner there would think it dead).
    starts = {"a": 1, "b": 6}
    procs = {}
    for me, other in (("a", "b"), ("b", "a")):
        burn = "/bin/true; " * starts[me]
        # Not the last command, so that sh forks it instead of exec'ing it.
        script = f'{burn}{sys.executable} -c "$0" "$@"; exit $?'
        cmd = [
            "unshare",
            "-p",
            "-f",
            "sh",
            "-c",
            script,
            WORKER,
            str(dataset),
            str(cache),
            me,
            other,
        ]
        procs[me] = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    results = {}
    for me, proc in procs.items():
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
        results[me] = json.loads(out.strip().splitlines()[-1])
    assert results["a"]["pid"] != results["b"]["pid"]
    for r in results.values():
        assert r["survived"], "a cleaner removed a live writer's temp file"
        assert r["corrupt"] == 0
    assert results["a"]["digest"] == results["b"]["digest"]
    # Both left valid entries: a third process is served entirely from them.
    again = loader(dataset, cache)
    assert digest(again) == digest(loader(dataset))
    s = again.stats()
    assert s["decoded_hits"] == N_ROW_GROUPS and s["decoded_corrupt"] == 0
    assert not list((cache / "decoded").glob(".tmp-*"))
