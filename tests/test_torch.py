"""TorchDataset in a DataLoader gives the Loader's stream for any worker count."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import shardfeed  # noqa: E402

from .conftest import digest, log_engine_starts, sample_ids  # noqa: E402

ARGS = dict(
    batch_size=50,
    seed=7,
    stack={"f": [f"f{i}" for i in range(8)]},
    columns=["label", "vec", "seq"],
    with_sample_id=True,
    drop_last=False,
)


def dataloader(ds, workers):
    return torch.utils.data.DataLoader(ds, batch_size=None, num_workers=workers)


def test_same_stream_as_loader_for_0_1_3_workers(dataset):
    reference = digest(shardfeed.Loader(dataset, **ARGS))
    for workers in (0, 1, 3):
        ds = shardfeed.TorchDataset(dataset, **ARGS)
        assert len(ds) == len(shardfeed.Loader(dataset, **ARGS))
        batches = list(dataloader(ds, workers))
        assert isinstance(batches[0]["f"], torch.Tensor)
        assert digest(batches) == reference, workers


def test_a_relative_source_survives_a_chdir_before_the_workers_start(dataset, monkeypatch):
    """Hydra and job launchers change the working folder after the dataset is made: the
    workers reopened 'data' from the new one (DatasetNotFoundError)."""
    reference = digest(shardfeed.Loader(dataset, **ARGS))
    monkeypatch.chdir(dataset.parent)
    ds = shardfeed.TorchDataset(dataset.name, **ARGS)
    loader = shardfeed.Loader(dataset.name, **ARGS)
    monkeypatch.chdir("/")
    assert digest(dataloader(ds, 2)) == reference
    assert digest(loader) == reference


def test_persistent_workers_repeat_the_loaders_stream_pass_after_pass(dataset):
    """With ``persistent_workers=True`` each worker keeps its engine's idle memory from one
    pass to the next (and so does the main process with 0 workers): every pass is still the
    Loader's stream."""
    reference = digest(shardfeed.Loader(dataset, **ARGS))
    for workers in (0, 2):
        ds = shardfeed.TorchDataset(dataset, **ARGS)
        loader = torch.utils.data.DataLoader(
            ds, batch_size=None, num_workers=workers, persistent_workers=workers > 0
        )
        for _ in range(3):
            assert digest(list(loader)) == reference, workers


def test_set_epoch_reaches_the_workers(dataset):
    ld = shardfeed.Loader(dataset, **ARGS)
    ld.set_epoch(2)
    ds = shardfeed.TorchDataset(dataset, **ARGS)
    ds.set_epoch(2)
    assert digest(dataloader(ds, 2)) == digest(ld)


def test_resume_through_the_dataloader(dataset):
    ld = shardfeed.Loader(dataset, **ARGS)
    full = list(ld)
    ds = shardfeed.TorchDataset(dataset, **ARGS)
    ds.load_state_dict(ds.state_dict(batches_consumed=5))
    assert digest(dataloader(ds, 3)) == digest(full[5:])
    # A Loader's own state dict works as well.
    it = iter(ld)
    for _ in range(9):
        next(it)
    ds2 = shardfeed.TorchDataset(dataset, **ARGS)
    ds2.load_state_dict(ld.state_dict())
    assert digest(dataloader(ds2, 2)) == digest(full[9:])


def test_a_resumed_pass_is_the_only_one_resumed(dataset):
    """As with Loader, the pass after load_state_dict is the rest of the epoch and the
    pass after that the whole epoch (it resumed at the saved batch every pass)."""
    ld = shardfeed.Loader(dataset, **ARGS)
    full = digest(ld)
    rest = digest(list(ld)[5:])
    state = ld.state_dict() | {"batches_consumed": 5}
    ld.load_state_dict(state)
    assert [digest(ld), digest(ld)] == [rest, full]
    for workers, persistent in ((0, False), (2, False), (2, True), (3, True)):
        ds = shardfeed.TorchDataset(dataset, **ARGS)
        ds.load_state_dict(state)
        loader = torch.utils.data.DataLoader(
            ds, batch_size=None, num_workers=workers, persistent_workers=persistent
        )
        assert [digest(loader), digest(loader), digest(loader)] == [rest, full, full], workers
        ds.load_state_dict(state)  # and again after a second seek
        assert [digest(loader), digest(loader)] == [rest, full], workers


def test_rank_from_environment(dataset, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "3")
    from_env = sample_ids(shardfeed.Loader(dataset, **ARGS))
    monkeypatch.delenv("RANK")
    monkeypatch.delenv("WORLD_SIZE")
    explicit = sample_ids(shardfeed.Loader(dataset, rank=1, world_size=3, **ARGS))
    assert from_env.tolist() == explicit.tolist()
    ds = shardfeed.TorchDataset(dataset, rank=1, world_size=3, **ARGS)
    assert sample_ids(dataloader(ds, 2)).tolist() == explicit.tolist()


def _loader_stream(dataset, epoch, start=0):
    ld = shardfeed.Loader(dataset, **ARGS)
    ld.set_epoch(epoch)
    return digest(list(ld)[start:])


def test_set_epoch_and_state_reach_persistent_workers(dataset):
    """Persistent workers see the main process's set_epoch and load_state_dict at the
    start of each pass (the numbers live in memory they share)."""
    ds = shardfeed.TorchDataset(dataset, **ARGS)
    loader = torch.utils.data.DataLoader(
        ds, batch_size=None, num_workers=2, persistent_workers=True
    )
    seen = []
    for epoch in (0, 1, 2):
        ds.set_epoch(epoch)
        seen.append(digest(loader))
        assert seen[-1] == _loader_stream(dataset, epoch), epoch
    assert len(set(seen)) == 3
    ds.load_state_dict(ds.state_dict(batches_consumed=5) | {"epoch": 1})
    assert digest(loader) == _loader_stream(dataset, 1, start=5)


def test_spawned_persistent_workers_follow_set_epoch(dataset):
    ds = shardfeed.TorchDataset(dataset, **ARGS)
    ds.set_epoch(1)
    loader = torch.utils.data.DataLoader(
        ds, batch_size=None, num_workers=2, persistent_workers=True, multiprocessing_context="spawn"
    )
    assert digest(loader) == _loader_stream(dataset, 1)
    ds.set_epoch(2)
    assert digest(loader) == _loader_stream(dataset, 2)


def test_a_pickled_copy_keeps_its_own_epoch(dataset):
    import pickle

    ds = shardfeed.TorchDataset(dataset, **ARGS)
    ds.set_epoch(3)
    copy = pickle.loads(pickle.dumps(ds))
    ds.set_epoch(4)  # the copy does not share the original's numbers
    assert digest(copy) == _loader_stream(dataset, 3)


@pytest.mark.parametrize("how", ["pickle", "deepcopy"])
def test_a_copy_resumes_once_and_follows_its_own_set_epoch(dataset, how):
    """A copy (pickle, copy.deepcopy) holds the original's epoch and pending resume in
    numbers of its own: its next pass is the rest of the epoch, the pass after that the
    whole epoch, and its set_epoch reaches its persistent workers."""
    import copy as copying
    import pickle

    def clone(ds):
        return pickle.loads(pickle.dumps(ds)) if how == "pickle" else copying.deepcopy(ds)

    ds = shardfeed.TorchDataset(dataset, **ARGS)
    ds.load_state_dict(ds.state_dict(batches_consumed=5) | {"epoch": 1})
    twin = clone(ds)
    rest, full = _loader_stream(dataset, 1, start=5), _loader_stream(dataset, 1)
    assert [digest(twin), digest(twin)] == [rest, full]
    assert [digest(ds), digest(ds)] == [rest, full]  # the original's resume is its own
    twin = clone(shardfeed.TorchDataset(dataset, **ARGS))
    loader = torch.utils.data.DataLoader(
        twin, batch_size=None, num_workers=2, persistent_workers=True
    )
    for epoch in (0, 2):
        twin.set_epoch(epoch)
        assert digest(loader) == _loader_stream(dataset, epoch), epoch


def test_a_pass_with_more_workers_after_a_resumed_pass_is_the_whole_epoch(dataset):
    """Only the first pass after load_state_dict is resumed, whatever worker counts the
    passes have (a worker that took no part in the resumed pass is not resumed)."""
    ld = shardfeed.Loader(dataset, **ARGS)
    state = ld.state_dict() | {"batches_consumed": 5}
    rest, full = _loader_stream(dataset, 0, start=5), digest(ld)
    for first, second in ((0, 2), (2, 3), (1, 2)):
        ds = shardfeed.TorchDataset(dataset, **ARGS)
        ds.load_state_dict(state)
        assert digest(dataloader(ds, first)) == rest, (first, second)
        assert digest(dataloader(ds, second)) == full, (first, second)


def _resume_in_child(ds, queue):
    ds.load_state_dict(ds.state_dict(batches_consumed=5) | {"epoch": 1})
    queue.put(digest(ds))


def test_processes_given_one_dataset_resume_on_their_own(dataset):
    """Processes started with one TorchDataset (torch.multiprocessing.spawn's pattern, or
    fork) each hold its numbers apart: one's pass does not use up another's resume."""
    import multiprocessing

    ds = shardfeed.TorchDataset(dataset, **ARGS)
    rest = _loader_stream(dataset, 1, start=5)
    for method in ("spawn", "fork"):
        context = multiprocessing.get_context(method)
        queue = context.Queue()
        children = [context.Process(target=_resume_in_child, args=(ds, queue)) for _ in range(2)]
        for child in children:
            child.start()
        got = [queue.get(timeout=120) for _ in children]
        for child in children:
            child.join(timeout=60)
        assert got == [rest, rest], method
    assert digest(ds) == _loader_stream(dataset, 0)  # the parent's numbers are untouched


def _thread_name() -> str:
    import threading

    return threading.current_thread().name  # "shardfeed-early-engine": started ahead


def _slowly(loader):
    import time

    return [b for b in loader if time.sleep(0.0005) is None]  # a step: time to start early


@pytest.mark.parametrize("workers", [0, 2])
def test_the_next_pass_starts_early_in_the_process_that_runs_the_engine(
    dataset, tmp_path, workers, monkeypatch
):
    """Persistent workers (and the main process with none) start the next epoch's engine
    near the end of a pass; each pass is still that epoch's stream.  A worker starts one
    from its second pass on (only a persistent worker runs one); a pass other than the
    predicted one closes that engine and makes its own."""
    from shardfeed import _torch

    log = tmp_path / "engines.txt"
    ds = shardfeed.TorchDataset(dataset, **ARGS)
    ds._settings.extra["start_early"] = True  # whatever the CPUs are doing
    if workers:
        loader = torch.utils.data.DataLoader(
            ds, batch_size=None, num_workers=workers, persistent_workers=True,
            worker_init_fn=log_engine_starts(log, _thread_name),
        )  # fmt: skip
    else:
        monkeypatch.setattr(_torch, "start_engine", _torch.start_engine)  # put back after
        log_engine_starts(log, _thread_name)(0)
        loader = dataloader(ds, 0)
    for epoch in (0, 1, 2, 3, 5):
        ds.set_epoch(epoch)
        assert digest(_slowly(loader)) == _loader_stream(dataset, epoch), epoch
    early = [name == "shardfeed-early-engine" for name in log.read_text().split()]
    # Engines: epoch 0's; 1's (early in the main process: set_epoch says epochs advance;
    # a worker's first pass starts none); 2, 3 and 4 early; 5's, as 4 was predicted;
    # and 5 again, early, as 3 -> 5 predicts the same epoch.
    if workers:
        assert early == [False, False, True, True, True, False, True]
    else:
        assert early == [False, True, True, True, True, False, True]


def test_workers_forked_while_the_main_process_holds_an_early_engine(dataset):
    """A TorchDataset read in the main process (0 workers) has the next pass's engine
    started; DataLoader workers forked then copy it, with threads that live only in the
    main process.  They leave it be (destroying it killed the worker: std::system_error
    joining threads it does not have) and give the stream."""
    ds = shardfeed.TorchDataset(dataset, **ARGS)
    ds._settings.extra["start_early"] = True  # whatever the CPUs are doing
    for epoch in (0, 1):
        ds.set_epoch(epoch)
        _slowly(dataloader(ds, 0))
    assert ds._next._early is not None  # epoch 2's engine, started in this process
    ds.set_epoch(2)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2, timeout=60)
    assert digest(loader) == _loader_stream(dataset, 2)
    assert digest(dataloader(ds, 0)) == _loader_stream(dataset, 2)  # the main process too


def test_a_transform_may_return_views_torch_cannot_take_as_they_are(dataset):
    """A reversed array (negative strides) was refused as 'dtype float32, which this
    torch cannot hold'; it is copied into a contiguous tensor."""
    import numpy as np

    def views(batch):
        batch["r"] = batch["f0"][::-1]
        batch["col"] = np.stack([batch["f0"], batch["f0"]], axis=1)[:, 1]
        return batch

    loader = shardfeed.Loader(dataset, batch_size=16, columns=["f0"], transform=views,
                              output="torch", shuffle=False)  # fmt: skip
    batch = next(iter(loader))
    assert torch.equal(batch["r"], torch.flip(batch["f0"], dims=[0]))
    assert torch.equal(batch["col"], batch["f0"])


def test_a_file_rewritten_before_the_workers_opened_it_is_an_error(tmp_path):
    """The workers read the footers anew: a file rewritten since the dataset was made
    (same size and row groups, new values) passed the fingerprint and was read as if
    it were the old one; as in the main process it is an InvalidDataError."""
    from .test_harden import _rewrite_same_size, _write_plain

    _write_plain(tmp_path / "a.parquet", 0)
    ds = shardfeed.TorchDataset(tmp_path, batch_size=50, output="numpy", shuffle=False)
    _rewrite_same_size(tmp_path / "a.parquet", 1000, keep_mtime=True)
    for workers in (0, 2):
        with pytest.raises(shardfeed.InvalidDataError, match=r"a\.parquet.*changed since"):
            list(dataloader(ds, workers))


def test_a_folder_that_gains_files_keeps_the_streams_files(tmp_path):
    """The workers reopen the dataset: a file added to the folder since the dataset
    was made changed the fingerprint and failed every later pass (StateDictError);
    they read the files the dataset was made on, as a Loader does."""
    from .test_harden import _write_plain

    _write_plain(tmp_path / "a.parquet", 0)
    _write_plain(tmp_path / "b.parquet", 300)
    args = dict(batch_size=50, output="numpy", seed=2, drop_last=False)
    reference = digest(shardfeed.Loader(tmp_path, **args))
    ds = shardfeed.TorchDataset(tmp_path, **args)
    _write_plain(tmp_path / "c.parquet", 600)
    for workers in (0, 2):
        assert digest(dataloader(ds, workers)) == reference
    (tmp_path / "b.parquet").unlink()
    with pytest.raises(shardfeed.ShardfeedError, match=r"b\.parquet.*gone"):
        list(dataloader(ds, 2))


@pytest.mark.parametrize("batch_size", [2**40, 2**62])
def test_a_batch_size_past_the_data_makes_buffers_for_the_data(tmp_path, batch_size):
    """Workers sized their shared-memory slabs by batch_size: 2**40 rows failed in mmap
    (ENOMEM), 2**62 in ftruncate (OverflowError), where the Loader gave one batch."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"x": list(range(10))}), tmp_path / "t.parquet")
    kw = dict(batch_size=batch_size, drop_last=False, shuffle=False, columns=["x"])
    reference = digest(shardfeed.Loader(tmp_path, **kw))
    batches = list(dataloader(shardfeed.TorchDataset(tmp_path, **kw), 2))
    assert [b["x"].tolist() for b in batches] == [list(range(10))]
    assert digest(batches) == reference


def test_set_epoch_of_the_resumed_epoch_keeps_the_resume_in_workers(dataset):
    """load_state_dict then set_epoch(the same epoch), as a training loop does at the top
    of each epoch: the workers go on from the saved batch (once: from batch 0)."""
    ld = shardfeed.Loader(dataset, **ARGS)
    ld.set_epoch(2)
    full = list(ld)
    ds = shardfeed.TorchDataset(dataset, **ARGS)
    ds.set_epoch(2)
    state = ds.state_dict(3)
    again = shardfeed.TorchDataset(dataset, **ARGS)
    again.load_state_dict(state)
    again.set_epoch(2)
    assert digest(list(dataloader(again, 2))) == digest(full[3:])
    again.set_epoch(2)  # a pass began since: the whole epoch
    assert digest(list(dataloader(again, 2))) == digest(full)
