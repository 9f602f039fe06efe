"""DataLoader workers hand batches to the main process through shared slabs: the
stream is the Loader's, a batch the main process holds is never overwritten, and
whatever does not fit the slabs still arrives (pickled by torch)."""

from __future__ import annotations

import collections
import gc
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import shardfeed  # noqa: E402
from shardfeed import _shm  # noqa: E402

from .conftest import digest, log_engine_starts  # noqa: E402

ARGS = dict(
    batch_size=10,
    seed=3,
    stack={"f": [f"f{i}" for i in range(8)]},
    columns=["label", "vec", "seq"],
    with_sample_id=True,
    drop_last=False,
)


def dataloader(ds, workers, **kw):
    return torch.utils.data.DataLoader(ds, batch_size=None, num_workers=workers, **kw)


def counts():
    return dict(_shm.RECEIVED)


def test_held_batches_are_never_overwritten(dataset):
    """The main process keeps the last 12 batches; each batch's bytes when it is let go
    are the bytes it arrived with, and the batches are the Loader's, in order."""
    reference = [digest([b]) for b in shardfeed.Loader(dataset, **ARGS)]
    before = counts()
    held: collections.deque = collections.deque()
    arrived = []
    for batch in dataloader(shardfeed.TorchDataset(dataset, **ARGS), 2):
        arrived.append(digest([batch]))
        held.append((batch, arrived[-1]))
        if len(held) > 12:
            old, was = held.popleft()
            assert digest([old]) == was
    for old, was in held:
        assert digest([old]) == was
    assert arrived == reference
    # Every batch's tensors (sample_id, label, vec, seq, seq_lengths, f) came through
    # the slabs.
    assert counts()["shared"] - before["shared"] >= len(arrived) * len(held[0][0])


def test_batches_kept_forever_still_arrive(dataset):
    """Holding every batch exhausts the slabs; the rest come pickled, same stream."""
    reference = digest(shardfeed.Loader(dataset, **ARGS))
    before = counts()
    batches = list(dataloader(shardfeed.TorchDataset(dataset, **ARGS), 2))
    assert digest(batches) == reference
    after = counts()
    assert after["shared"] > before["shared"]


def test_persistent_workers_reuse_their_slabs(dataset):
    """Batches dropped as they come: pass after pass the stream is the Loader's and the
    workers make no new slabs after the first pass."""
    reference = digest(shardfeed.Loader(dataset, **ARGS))
    loader = dataloader(shardfeed.TorchDataset(dataset, **ARGS), 2, persistent_workers=True)
    slabs = []
    for _ in range(3):
        before = counts()
        assert digest(loader) == reference
        assert counts()["pickled"] == before["pickled"]  # all of it through the slabs
        gc.collect()
        slabs.append(sum(len(peer.slabs) for peer in list(_shm._PEERS.values())))
    # A miss (more batches in flight than the arena holds: timing) grows the arena, so
    # the count may rise; without reuse it would rise by a slab a batch.
    assert 1 <= slabs[0] <= slabs[1] <= slabs[2] <= 64


def _mapped_slab_bytes() -> int:
    total = 0
    with open("/proc/self/maps") as maps:
        for line in maps:
            if "memfd:shardfeed" in line:
                start, end = line.split()[0].split("-")
                total += int(end, 16) - int(start, 16)
    return total


@pytest.mark.parametrize("persistent", [False, True])
def test_a_dropped_dataloaders_slabs_are_unmapped(dataset, persistent):
    """Its workers gone and its batches freed, the main process kept their slabs mapped
    (their memory held) until another DataLoader's worker sent a batch."""
    loader = dataloader(shardfeed.TorchDataset(dataset, **ARGS), 2, persistent_workers=persistent)
    batch = None
    for _ in range(2):
        for batch in loader:  # noqa: B007 (the last one is held)
            pass
    assert _shm._PEERS and _mapped_slab_bytes() > 0
    del loader, batch  # the workers exit, then the last batch goes
    gc.collect()
    assert not _shm._PEERS and _mapped_slab_bytes() == 0  # (earlier tests' went too)


def test_transform_outputs_are_copied_into_reused_slabs(dataset):
    """A Python transform's new tensor is copied into a slab of the worker that made it
    (one memcpy, slabs reused pass after pass); a non-contiguous one is made contiguous
    first (torch and jax take no negative strides), so it travels the same way.  The
    stream is what 0 workers give."""

    def transform(batch):
        out = dict(batch)
        out["f"] = batch["f"] * 2
        out["ft"] = batch["f"].T  # a view, not contiguous
        return out

    args = dict(ARGS, transform=transform)
    reference = digest(dataloader(shardfeed.TorchDataset(dataset, **args), 0))
    loader = dataloader(shardfeed.TorchDataset(dataset, **args), 2, persistent_workers=True)
    slabs = []
    for _ in range(3):  # 175 batches a pass: more than a worker has slabs for, unless reused
        before = counts()
        batches = 0
        for batch in loader:
            assert digest([batch]) == digest([batch])  # readable
            batches += 1
        after = counts()
        assert after["pickled"] - before["pickled"] == 0  # "ft" too is contiguous now
        assert after["shared"] - before["shared"] == batches * len(batch)
        gc.collect()
        slabs.append(sum(len(peer.slabs) for peer in list(_shm._PEERS.values())))
    # Two copies a batch, 525 batches: with no slab reused there would be one slab a
    # copy until the last one (MAX_SLABS), then pickles.  How many a worker needs at
    # once depends on how many batches are in flight (timing), so only bounded.
    assert slabs[0] >= 1
    assert slabs[2] <= 64
    assert digest(dataloader(shardfeed.TorchDataset(dataset, **args), 2)) == reference


def test_without_shared_memory_batches_go_torchs_way(dataset, monkeypatch):
    reference = digest(shardfeed.Loader(dataset, **ARGS))
    monkeypatch.setattr(_shm, "sender", lambda: None)  # the workers are forked after this
    before = counts()
    assert digest(dataloader(shardfeed.TorchDataset(dataset, **ARGS), 2)) == reference
    assert counts()["shared"] == before["shared"]


def test_a_custom_collate_fn_sees_a_dict(dataset):
    """collate_fn runs in the worker on the batch (a dict); what it returns is sent."""
    seen = []

    def collate(batch):
        assert isinstance(batch, dict)
        return {k: v for k, v in batch.items() if k != "seq"}

    reference = [
        {k: v for k, v in b.items() if k != "seq"} for b in shardfeed.Loader(dataset, **ARGS)
    ]
    got = dataloader(shardfeed.TorchDataset(dataset, **ARGS), 2, collate_fn=collate)
    for batch in got:
        seen.append(batch)
    assert digest(seen) == digest(reference)


def test_breaking_off_and_starting_again(dataset):
    """An iterator dropped mid-pass leaves nothing stuck: the next pass is whole."""
    reference = digest(shardfeed.Loader(dataset, **ARGS))
    ds = shardfeed.TorchDataset(dataset, **ARGS)
    loader = dataloader(ds, 2, persistent_workers=True)
    it = iter(loader)
    first = [next(it) for _ in range(5)]
    del it
    assert digest(loader) == reference
    assert all(np.isfinite(b["f"].numpy()).all() for b in first)


@pytest.mark.parametrize("workers", [2, 3])
def test_one_engine_decodes_for_every_worker(dataset, tmp_path, workers):
    """Worker 0 runs the only engine of a pass; every worker still yields its own
    batches (j mod k), so the stream is the Loader's, pass after pass."""
    reference = digest(shardfeed.Loader(dataset, **ARGS))
    log = tmp_path / "engines.txt"
    ds = shardfeed.TorchDataset(dataset, **ARGS)
    loader = dataloader(
        ds, workers, persistent_workers=True, worker_init_fn=log_engine_starts(log, os.getpid)
    )
    for passes in (1, 2):
        assert digest(loader) == reference
        started = log.read_text().split()
        assert len(started) == passes and len(set(started)) == 1


def test_more_workers_than_batches(dataset):
    args = dict(ARGS, batch_size=1000)  # 2 batches, 3 workers: one gets none
    reference = digest(shardfeed.Loader(dataset, **args))
    assert digest(dataloader(shardfeed.TorchDataset(dataset, **args), 3)) == reference


def test_a_damaged_row_group_is_raised_by_the_dataloader_after_what_came_before(tmp_path):
    """The engine's error reaches the main process whichever worker owned the batch,
    after every batch before it; no worker hangs."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "c.parquet"
    pq.write_table(pa.table({"v": np.arange(4000, dtype=np.int64)}), path, row_group_size=1000)
    col = pq.ParquetFile(path).metadata.row_group(2).column(0)
    start = col.dictionary_page_offset or col.data_page_offset
    raw = bytearray(path.read_bytes())
    raw[start : start + col.total_compressed_size] = b"\xff" * col.total_compressed_size
    path.write_bytes(bytes(raw))
    args = dict(batch_size=250, shuffle=False, output="numpy")
    for workers in (2, 3):
        got = []
        with pytest.raises(shardfeed.InvalidDataError, match=r"c\.parquet.*row group 2"):
            for batch in dataloader(shardfeed.TorchDataset(path, **args), workers):
                got.append(batch["v"].numpy())
        assert np.concatenate(got).tolist() == list(range(2000)), workers


@pytest.mark.parametrize("context", ["spawn", "forkserver"])
def test_spawned_workers(dataset, context):
    """Workers started with spawn or forkserver (the dataset pickled, not forked) find
    each other too, and persistent ones follow set_epoch."""
    ds = shardfeed.TorchDataset(dataset, **ARGS)
    loader = dataloader(ds, 2, multiprocessing_context=context, persistent_workers=True)
    for epoch in (0, 1):
        reference = shardfeed.Loader(dataset, **ARGS)
        reference.set_epoch(epoch)
        ds.set_epoch(epoch)
        assert digest(loader) == digest(reference), epoch


@pytest.mark.parametrize("victim", [0, 1])
def test_a_killed_worker_is_an_error_not_a_hang(dataset, victim):
    """SIGKILL of worker 0 (the engine's) or of another worker mid-pass: the main
    process raises (torch's worker watchdog) instead of waiting for batches that
    will never come, and a new pass over the same dataset is whole."""
    import os
    import signal

    reference = digest(shardfeed.Loader(dataset, **ARGS))
    ds = shardfeed.TorchDataset(dataset, **ARGS)
    it = iter(dataloader(ds, 2, timeout=60))
    first = [next(it) for _ in range(3)]
    # Not while the victim holds the lock of torch's done event (workers poll it):
    # the main process takes that lock too, and would wait for it forever (seen
    # once in CI). Holding it here, the kill cannot land inside it.
    # (torch's SIGCHLD handler may raise as soon as the worker dies.)
    with pytest.raises(RuntimeError, match="DataLoader worker"):
        with it._workers_done_event._cond:
            os.kill(it._workers[victim].pid, signal.SIGKILL)
        for _ in it:
            pass
    del it
    assert digest(first) == digest(list(shardfeed.Loader(dataset, **ARGS))[:3])
    assert digest(dataloader(ds, 2)) == reference


def _to_bfloat16(batch):
    out = dict(batch)
    out["h"] = torch.from_numpy(batch["f"]).to(torch.bfloat16)  # numpy has no bfloat16
    return out


def test_a_dtype_numpy_lacks_still_travels_shared(dataset):
    before = counts()
    batches = 0
    for batch in dataloader(shardfeed.TorchDataset(dataset, **ARGS, transform=_to_bfloat16), 2):
        assert batch["h"].dtype == torch.bfloat16
        assert torch.equal(batch["h"], batch["f"].to(torch.bfloat16))
        batches += 1
    after = counts()
    assert after["pickled"] == before["pickled"]
    assert after["shared"] - before["shared"] == batches * 7


def test_worker_0_refuses_an_oversized_handshake_without_reading_it():
    """Anything local can connect to an abstract socket: worker 0 checks the user and
    bounds the handshake before it unpickles anything, and carries on."""
    import socket
    import struct

    from shardfeed import _fanout

    sender = _shm.sender()
    if sender is None:
        pytest.skip("no memfd_create here")
    leader = _fanout.Leader(sender, 2, f"\0shardfeed-test-{id(sender)}", ("h",))
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    theirs.sendall(struct.pack("<Q", 1 << 63))  # a length no one should allocate
    leader._admit(ours)
    assert leader._conns == {}
    assert ours.fileno() == -1  # closed
    theirs.close()
    leader._listener.close()


def test_out_of_order_delivery_still_gives_every_batch_once(dataset):
    """DataLoader(in_order=False) lets timing pick the order (README); the batches are
    still the Loader's, each once."""
    import inspect

    if "in_order" not in inspect.signature(torch.utils.data.DataLoader).parameters:
        pytest.skip("this torch has no in_order")
    reference = sorted(digest([b]) for b in shardfeed.Loader(dataset, **ARGS))
    got = dataloader(shardfeed.TorchDataset(dataset, **ARGS), 2, in_order=False)
    assert sorted(digest([b]) for b in got) == reference


def _slow_to_take_descriptors(worker_id: int) -> None:
    """Worker 1 takes each descriptor it is sent half a second late (a preempted
    process on a busy node)."""
    if worker_id == 1:
        import time
        from multiprocessing import resource_sharer

        original = resource_sharer.DupFd.detach

        def detach(self):  # type: ignore[no-untyped-def]
            time.sleep(0.5)
            return original(self)

        resource_sharer.DupFd.detach = detach  # type: ignore[method-assign]


def test_a_short_epoch_survives_a_slow_follower(dataset):
    """Three batches, two workers: DataLoader shuts worker 0 down once its own share
    of an iterable dataset ends, and worker 1 then could not take the slab
    descriptors worker 0 had sent it (FanoutError, FileNotFoundError).  Worker 0
    now ends its pass only after worker 1 closed its end."""
    args = dict(ARGS, batch_size=600)
    reference = digest(shardfeed.Loader(dataset, **args))
    for persistent in (False, True):
        loader = dataloader(
            shardfeed.TorchDataset(dataset, **args),
            2,
            worker_init_fn=_slow_to_take_descriptors,
            persistent_workers=persistent,
        )
        assert digest(loader) == reference


def _as_pair(batch):
    return (batch["f"], batch["label"])


def test_a_transform_returning_a_tuple_travels_as_with_one_worker(dataset):
    """output="numpy" hands a transform's non-dict result on as it is; with two or
    more workers it was made a dict (a ValueError, or another batch)."""
    args = dict(ARGS, output="numpy", transform=_as_pair)
    streams = []
    for workers in (0, 2):
        got = list(dataloader(shardfeed.TorchDataset(dataset, **args), workers))
        assert all(isinstance(b, (tuple, list)) and len(b) == 2 for b in got)
        streams.append([(np.asarray(f).tobytes(), np.asarray(y).tobytes()) for f, y in got])
    assert streams[0] == streams[1]
