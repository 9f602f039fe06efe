"""Every argument and every state-dict field is checked, with a message naming it.

Wrong types raise ArgumentTypeError (a TypeError, and an InvalidArgumentError for
code that catches those), wrong values InvalidArgumentError (a ValueError), bad
state dicts StateDictError; all before a file is read or an engine starts.
"""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import shardfeed
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shardfeed import _core
from shardfeed.transforms import Log1p

from .conftest import digest

torch = pytest.importorskip("torch")

HERE = object()  # stands for the dataset's path in a parameter list

# (arguments, exception, text the message must contain)
TYPE_ERRORS: list[tuple[dict[str, Any], str]] = [
    ({"source": None}, "source"),
    ({"source": 42}, "source"),
    ({"source": ""}, "source"),
    ({"source": b"data"}, "source"),
    ({"source": [HERE, 3]}, "source"),
    ({"source": [HERE, None]}, "source"),
    ({"source": [""]}, "source"),
    ({"columns": "id"}, "columns"),
    ({"columns": ["id", 3]}, "columns"),
    ({"batch_size": True}, "batch_size"),
    ({"batch_size": 64.0}, "batch_size"),
    ({"shuffle": 1}, "shuffle"),
    ({"shuffle": "yes"}, "shuffle"),
    ({"seed": 1.0}, "seed"),
    ({"seed": "0"}, "seed"),
    ({"rank": 0.5, "world_size": 2}, "rank"),
    ({"rank": True, "world_size": 2}, "rank"),
    ({"rank": 0, "world_size": 2.0}, "world_size"),
    ({"drop_last": None}, "drop_last"),
    ({"num_threads": 2.5}, "num_threads"),
    ({"num_threads": True}, "num_threads"),
    ({"num_threads": "2"}, "num_threads"),
    ({"stack": ["f0"]}, "stack"),
    ({"stack": {"x": "f0"}}, "stack"),
    ({"stack": {"x": ["f0", 1]}}, "stack"),
    ({"output": 3}, "output"),
    ({"shuffle_window": "4"}, "shuffle_window"),
    ({"shuffle_window": 4.0}, "shuffle_window"),
    ({"prefetch": "8"}, "prefetch"),
    ({"prefetch": False}, "prefetch"),
    ({"with_sample_id": 0}, "with_sample_id"),
    ({"fill_null": "zero"}, "fill_null"),
    ({"fill_null": True}, "fill_null"),
    ({"transforms": Log1p("x")}, "transforms"),
    ({"transforms": "Log1p"}, "transforms"),
    ({"transforms": [1]}, "transforms"),
    ({"transform": 3}, "transform"),
    ({"cache_dir": 3}, "cache_dir"),
    ({"cache_dir": ""}, "cache_dir"),
    ({"cache_limit_bytes": 1.5}, "cache_limit_bytes"),
    ({"cache_limit_bytes": True}, "cache_limit_bytes"),
    ({"cache_decoded": 1}, "cache_decoded"),
    ({"prefetch_bytes": "1"}, "prefetch_bytes"),
]

VALUE_ERRORS: list[tuple[dict[str, Any], str]] = [
    ({"source": []}, "source"),
    ({"batch_size": 0}, "batch_size"),
    ({"batch_size": -3}, "batch_size"),
    ({"batch_size": 2**64}, "batch_size"),
    ({"seed": -1}, "seed"),
    ({"seed": 2**64}, "seed"),
    ({"rank": 2, "world_size": 2}, "rank"),
    ({"rank": -1, "world_size": 2}, "rank"),
    ({"rank": 0, "world_size": 0}, "world_size"),
    ({"num_threads": 0}, "num_threads"),
    ({"num_threads": 10**6}, "num_threads"),
    ({"num_threads": 2**40}, "num_threads"),
    ({"output": "tensorflow"}, "output"),
    ({"shuffle_window": 0}, "shuffle_window"),
    ({"prefetch": 0}, "prefetch"),
    ({"prefetch": 2**40}, "prefetch"),
    ({"cache_limit_bytes": -1}, "cache_limit_bytes"),
    ({"prefetch_bytes": -1}, "prefetch_bytes"),
    ({"cache_decoded": True}, "cache_dir"),
]


@pytest.fixture(params=["Loader", "TorchDataset"])
def cls(request: pytest.FixtureRequest) -> Any:
    return getattr(shardfeed, request.param)


def make(cls: Any, dataset: Path, kw: dict[str, Any]) -> Any:
    kw = dict(kw)
    source = kw.pop("source", dataset)
    if isinstance(source, list):
        source = [dataset if s is HERE else s for s in source]
    kw.setdefault("output", "numpy")
    return cls(source, **kw)


@pytest.mark.parametrize(("kw", "name"), TYPE_ERRORS, ids=repr)
def test_wrong_types_raise_type_errors_naming_the_argument(cls, dataset, kw, name):
    with pytest.raises(TypeError, match=name) as info:
        make(cls, dataset, kw)
    assert isinstance(info.value, shardfeed.ArgumentTypeError)


@pytest.mark.parametrize(("kw", "name"), VALUE_ERRORS, ids=repr)
def test_wrong_values_raise_value_errors_naming_the_argument(cls, dataset, kw, name):
    with pytest.raises(shardfeed.InvalidArgumentError, match=name) as info:
        make(cls, dataset, kw)
    assert not isinstance(info.value, TypeError)


@pytest.mark.parametrize(
    ("var", "value"),
    [("RANK", "one"), ("WORLD_SIZE", "2.5"), ("WORLD_SIZE", "1_0"), ("RANK", "\u0661"),
     ("WORLD_SIZE", "99999999999999999999"), ("RANK", "-99999999999999999999")],
)  # fmt: skip
def test_bad_rank_environment_names_the_variable(dataset, monkeypatch, var, value):
    """int() took "1_0" (as 10) and Arabic-Indic digits; a value past int64 was a
    nanobind TypeError that named neither."""
    monkeypatch.setenv(var, value)
    other = "WORLD_SIZE" if var == "RANK" else "RANK"
    monkeypatch.setenv(other, "4" if other == "WORLD_SIZE" else "0")
    with pytest.raises(shardfeed.InvalidArgumentError, match=var) as info:
        shardfeed.Loader(dataset)
    assert not isinstance(info.value, TypeError)


def test_world_size_from_the_environment_without_a_rank_is_refused(dataset, monkeypatch):
    """Each such process was rank 0: all of them read the same slice."""
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.delenv("RANK", raising=False)
    with pytest.raises(shardfeed.InvalidArgumentError, match="WORLD_SIZE='2' is given but no rank"):
        shardfeed.Loader(dataset)
    monkeypatch.delenv("WORLD_SIZE")
    with pytest.raises(shardfeed.InvalidArgumentError, match="world_size=3 is given but no rank"):
        shardfeed.Loader(dataset, world_size=3)
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert shardfeed.Loader(dataset, rank=1).state_dict()["settings"]["rank"] == 1  # said: fine
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert shardfeed.Loader(dataset).state_dict()["settings"]["rank"] == 0  # one rank: it is 0
    monkeypatch.setenv("WORLD_SIZE", " 2 ")
    monkeypatch.setenv("RANK", "+1")
    assert shardfeed.Loader(dataset).state_dict()["settings"]["world_size"] == 2


def test_byte_counts_in_strings_are_exact():
    """They went through a float: "9007199254740993" was ...992, and 2**63 - 1 was
    refused as 2**63."""
    from shardfeed._check import check_bytes

    assert check_bytes("m", "9007199254740993") == 9007199254740993
    assert check_bytes("m", str(2**63 - 1)) == 2**63 - 1
    assert check_bytes("m", "1.5GiB") == 3 * 2**29
    assert check_bytes("m", "0.1KB") == 100
    assert check_bytes("m", "7EiB") == 7 << 60 and check_bytes("m", "1.5PiB") == 3 << 49
    with pytest.raises(shardfeed.InvalidArgumentError, match="does not fit"):
        check_bytes("m", "8EiB")
    with pytest.raises(shardfeed.InvalidArgumentError, match="does not fit"):
        check_bytes("m", str(2**63))


def test_a_cache_dir_that_is_a_file_is_refused_even_for_local_data(cls, dataset, tmp_path):
    """Issue 10: local data never uses the file cache, so the mistake went unnoticed."""
    not_a_folder = tmp_path / "cache"
    not_a_folder.write_text("")
    with pytest.raises(shardfeed.InvalidArgumentError, match=r"cache_dir.*not a folder"):
        make(cls, dataset, {"cache_dir": not_a_folder})
    # Below a file, however deep, it cannot be made: the same mistake, and the file named
    # (it was a StorageError from the decoded tier's first write, or nothing for local data).
    for below in (not_a_folder / "sub", not_a_folder / "a" / "b"):
        for decoded in (False, True):
            with pytest.raises(
                shardfeed.InvalidArgumentError, match=rf"cannot be made: '{not_a_folder}' is a file"
            ):
                make(cls, dataset, {"cache_dir": below, "cache_decoded": decoded})


def test_a_path_with_a_nul_is_refused_and_nothing_is_made(cls, dataset, tmp_path):
    """The system reads a path only up to a NUL: "cache\0x" made the folder "cache"."""
    cut = tmp_path / "cache"
    with pytest.raises(shardfeed.InvalidArgumentError, match=r"cache_dir .* NUL character"):
        make(cls, dataset, {"cache_dir": f"{cut}\0x", "cache_decoded": True})
    assert not cut.exists()
    with pytest.raises(shardfeed.InvalidArgumentError, match=r"source .* NUL character"):
        cls(f"{dataset}\0x")
    with pytest.raises(shardfeed.InvalidArgumentError, match=r"source .* NUL character"):
        cls([dataset, f"{dataset}\0x"])


def test_a_cache_dir_the_caches_cannot_use_is_named_as_the_setting(dataset, tmp_path):
    """It named the lock file inside it ('cannot open .../decoded/shardfeed.lock')."""
    (tmp_path / "decoded" / "shardfeed.lock").mkdir(parents=True)  # as unwritable as a RO mount
    with pytest.raises(shardfeed.StorageError, match=r"cache_dir '.*' cannot be used"):
        shardfeed.Loader(dataset, cache_dir=tmp_path, cache_decoded=True)


def test_numpy_integers_and_path_lists_are_accepted(dataset):
    files = sorted(p for p in dataset.rglob("*.parquet"))
    ld = shardfeed.Loader(
        files, batch_size=np.int64(64), seed=np.uint64(3), num_threads=np.int32(2),
        shuffle=np.bool_(True), output="numpy", fill_null=np.float32(0),
    )  # fmt: skip
    assert digest(ld) == digest(shardfeed.Loader(dataset, batch_size=64, seed=3, output="numpy"))


def test_defaults_come_from_the_core_and_both_classes_share_them():
    plan, engine = _core.PlanOptions(), _core.EngineOptions()
    for cls in (shardfeed.Loader, shardfeed.TorchDataset):
        p = inspect.signature(cls).parameters
        assert p["batch_size"].default == plan.batch_size == 1024
        # None: chosen from memory_limit (PlanMemory); the core's 4 is the unlimited one.
        assert p["shuffle_window"].default is None
        assert p["memory_limit"].default == engine.memory_limit == 384 << 20
        assert p["prefetch"].default == engine.queue_depth == 8
        assert p["prefetch_bytes"].default == engine.prefetch_bytes == 256 << 20
        assert p["shuffle_window"].kind is inspect.Parameter.KEYWORD_ONLY
        assert p["output"].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert inspect.signature(shardfeed.Loader) == inspect.signature(shardfeed.TorchDataset)


def test_positional_arguments_keep_their_order(dataset):
    by_position = shardfeed.Loader(dataset, ["id"], 64, True, 5, 0, 1, True, 2, None, "numpy")
    by_name = shardfeed.Loader(
        dataset, columns=["id"], batch_size=64, seed=5, num_threads=3, output="numpy"
    )
    assert digest(by_position) == digest(by_name)


# -- state dicts -------------------------------------------------------------------------


def small(cls: Any, dataset: Path) -> Any:
    return cls(dataset, batch_size=100, seed=1, columns=["id"], output="numpy")


@pytest.fixture(scope="module")
def saved(dataset: Path) -> str:
    """A valid state dict (2 batches into epoch 0), as JSON."""
    ld = small(shardfeed.Loader, dataset)
    it = iter(ld)
    next(it), next(it)
    return json.dumps(ld.state_dict())


FIELDS = ["version", "epoch", "seed", "batches_consumed", "fingerprint", "settings"]

_deep: list[Any] = []
for _ in range(5000):
    _deep = [_deep]

BAD_FIELDS: list[tuple[str, Any]] = [
    ("epoch", -1),
    ("epoch", 2**70),
    ("epoch", "1"),
    ("epoch", 1.0),
    ("epoch", True),
    ("epoch", None),
    ("batches_consumed", "2"),
    ("batches_consumed", 2.0),
    ("batches_consumed", -1),
    ("batches_consumed", 10**6),
    ("batches_consumed", None),
    ("seed", "1"),
    ("seed", -1),
    ("settings", []),
    ("settings", None),
    ("settings", "batch_size=100"),
    ("fingerprint", 5),
    ("fingerprint", None),
    ("version", 2),
    ("version", "1"),
    ("version", True),
    ("version", None),
    # Nested past the recursion limit: named, not a RecursionError from its repr.
    *[(name, _deep) for name in ("version", "epoch", "seed", "batches_consumed", "fingerprint")],
    # Past 4300 digits, an int's repr raises: named too.
    *[(name, 10**5000) for name in ("version", "epoch", "seed", "batches_consumed")],
]


@pytest.mark.parametrize(
    ("field", "value"),
    BAD_FIELDS,
    ids=lambda v: "deep" if v is _deep else "huge" if v == 10**5000 else repr(v),
)
def test_bad_state_dict_fields_are_named(cls, dataset, saved, field, value):
    state = json.loads(saved)
    state[field] = value
    with pytest.raises(shardfeed.StateDictError, match=field):
        small(cls, dataset).load_state_dict(state)


def _nested(depth: int) -> list[Any]:
    out: list[Any] = []
    for _ in range(depth):
        out = [out]
    return out


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("batch_size", np.array([64, 64]), "settings.batch_size' holds a ndarray"),
        ("transforms", np.zeros(3), "settings.transforms' holds a ndarray"),
        ("columns", _nested(5000), "settings.columns' is nested deeper"),
        ("columns", {1: "x"}, "settings.columns' has a key 1"),
        ("columns", {10**5000: "x"}, "settings.columns' has a key an integer of 16610 bits"),
    ],
    ids=["array", "array-list", "deep", "int-key", "huge-key"],
)
def test_tampered_settings_are_named(cls, dataset, saved, key, value, match):
    """Settings hold what JSON does: anything else is named, not a raw ValueError or
    RecursionError from comparing it."""
    state = json.loads(saved)
    state["settings"][key] = value
    with pytest.raises(shardfeed.StateDictError, match=match):
        small(cls, dataset).load_state_dict(state)


@pytest.mark.parametrize("field", FIELDS)
def test_missing_state_dict_fields_are_named(cls, dataset, saved, field):
    state = json.loads(saved)
    del state[field]
    with pytest.raises(shardfeed.StateDictError, match=field):
        small(cls, dataset).load_state_dict(state)


@pytest.mark.parametrize("state", [None, [], "state", 3])
def test_a_state_dict_must_be_a_dict(cls, dataset, state):
    with pytest.raises(shardfeed.StateDictError, match="dict"):
        small(cls, dataset).load_state_dict(state)


def test_a_refused_state_dict_leaves_the_loader_as_it_was(dataset, saved):
    ld = small(shardfeed.Loader, dataset)
    full = digest(ld)
    state = json.loads(saved)
    state["batches_consumed"] = -1
    with pytest.raises(shardfeed.StateDictError):
        ld.load_state_dict(state)
    assert ld.epoch == 0 and digest(ld) == full


@pytest.mark.parametrize(
    ("epoch", "error"),
    [("1", TypeError), (1.5, TypeError), (True, TypeError), (None, TypeError),
     (-1, ValueError), (2**64, ValueError)],
    ids=repr,
)  # fmt: skip
def test_set_epoch_checks_its_argument(cls, dataset, epoch, error):
    ds = small(cls, dataset)
    with pytest.raises(error, match="epoch"):
        ds.set_epoch(epoch)
    assert ds.epoch == 0


def test_torch_state_dict_checks_batches_consumed(dataset, saved):
    ds = small(shardfeed.TorchDataset, dataset)
    with pytest.raises(TypeError, match="batches_consumed"):
        ds.state_dict("3")
    with pytest.raises(ValueError, match="batches_consumed"):
        ds.state_dict(len(ds) + 1)
    assert ds.state_dict(2) == json.loads(saved)  # the Loader's state, field for field


# Any JSON value in any field: loading either succeeds (the value was valid) or raises
# StateDictError, never another exception and never a crash (design invariant 8).
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=6,
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(field=st.sampled_from(FIELDS), value=json_values)
def test_any_field_value_is_loaded_or_refused_cleanly(dataset, saved, field, value):
    state = json.loads(saved)
    state[field] = value
    ld = small(shardfeed.Loader, dataset)
    try:
        ld.load_state_dict(state)
    except shardfeed.StateDictError as e:
        assert field in str(e) or "seed" in str(e) or "settings" in str(e)


def test_a_fraction_of_a_byte_is_refused_and_a_cache_dir_may_start_with_a_tilde(
    dataset, tmp_path, monkeypatch
):
    """memory_limit="0.5B" became 0, which means no limit; cache_dir="~/c" made a folder
    named "~" in the working directory."""
    with pytest.raises(shardfeed.InvalidArgumentError, match="at least one byte"):
        shardfeed.Loader(dataset, memory_limit="0.5B")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    loader = shardfeed.Loader(dataset, batch_size=64, cache_dir="~/c", cache_decoded=True)
    sum(1 for _ in loader)
    assert (tmp_path / "c").is_dir() and not (tmp_path / "~").exists()


def test_a_missing_output_library_is_said_when_the_loader_is_made(dataset, monkeypatch):
    """It was a bare ModuleNotFoundError at the first batch."""
    from shardfeed import _options

    monkeypatch.setattr(_options, "_missing", lambda module: module == "jax")
    with pytest.raises(shardfeed.InvalidArgumentError, match=r"output='jax' needs jax"):
        shardfeed.Loader(dataset, output="jax")
    shardfeed.Loader(dataset, output="numpy")
    monkeypatch.undo()
    monkeypatch.setitem(sys.modules, "jax", None)  # what a blocked import looks like
    assert _options._missing("jax")


def test_a_rank_from_the_environment_out_of_range_names_the_variables(dataset, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with pytest.raises(shardfeed.InvalidArgumentError, match=r"RANK='1' and WORLD_SIZE=None"):
        shardfeed.Loader(dataset)
    assert len(shardfeed.Loader(dataset, rank=0, world_size=1)) > 0


def test_a_world_size_given_against_the_environments_world_is_refused(dataset, monkeypatch):
    """world_size=4 with RANK=1 of WORLD_SIZE=2 was taken as rank 1 of 4: ranks 2 and 3
    never run, and half the data is never read. A rank given against it is named as given."""
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    other_world = (r"world_size=4 is given, but the rank would come from the environment, "
                   r"RANK='1' and WORLD_SIZE='2', whose world has 2")  # fmt: skip
    with pytest.raises(shardfeed.InvalidArgumentError, match=other_world):
        shardfeed.Loader(dataset, world_size=4)
    assert shardfeed.Loader(dataset, world_size=2)._settings.rank == 1  # the same world
    assert shardfeed.Loader(dataset, rank=0, world_size=4)._settings.rank == 0  # both given
    with pytest.raises(shardfeed.InvalidArgumentError,
                       match=r"rank 5 is not in \[0, world_size 2\): from the environment, "
                             r"RANK='1' and WORLD_SIZE='2'; rank= given"):  # fmt: skip
        shardfeed.Loader(dataset, rank=5)
    for bad in (0, -1):  # no world to agree with: the value's own error
        with pytest.raises(shardfeed.InvalidArgumentError, match=rf"world_size.*{bad}"):
            shardfeed.Loader(dataset, world_size=bad)
        with pytest.raises(shardfeed.InvalidArgumentError) as err:
            shardfeed.Loader(dataset, world_size=bad)
        assert "whose world has" not in str(err.value)


def test_world_size_1_alone_is_the_whole_dataset_even_under_torchrun(dataset, monkeypatch):
    """An evaluation loader inside a torchrun job (RANK=1, WORLD_SIZE=2) that asks for
    world_size=1 took rank 1 from the environment and failed."""
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    whole = shardfeed.Loader(dataset, world_size=1, output="numpy")
    assert (whole._settings.rank, whole._settings.world_size) == (0, 1)
    monkeypatch.delenv("RANK")
    monkeypatch.delenv("WORLD_SIZE")
    assert digest(whole) == digest(shardfeed.Loader(dataset, output="numpy"))


@pytest.mark.parametrize("boundaries", [0.5, "abc", [None, 1], [True, 2.0], {"a": 1}])
def test_bucketize_boundaries_of_the_wrong_type(dataset, boundaries):
    from shardfeed.transforms import Bucketize

    with pytest.raises(shardfeed.ArgumentTypeError, match=r"Bucketize on column 'f0'"):
        shardfeed.Loader(dataset, columns=["f0"], transforms=[Bucketize("f0", boundaries)])


@pytest.mark.parametrize(
    ("kw", "error"),
    [
        ({"seed": -1}, shardfeed.InvalidArgumentError),
        ({"epoch": 2**64}, shardfeed.InvalidArgumentError),
        ({"stream": -1}, shardfeed.InvalidArgumentError),
        ({"seed": 1.5}, shardfeed.ArgumentTypeError),
    ],
)
def test_sample_generators_check_their_key(kw, error):
    """Both say what is wrong, in the engine's 64-bit unsigned range (sample_rng took
    seed=-1, sample_uniform raised nanobind's 'incompatible function arguments')."""
    args = {"seed": 0, "epoch": 0} | kw
    for make in (shardfeed.sample_rng, shardfeed.sample_uniform):
        with pytest.raises(error, match=next(iter(kw))):
            make(np.arange(3), **args)
    with pytest.raises(shardfeed.ArgumentTypeError, match="size"):
        shardfeed.sample_uniform(np.arange(3), seed=0, epoch=0, size=2.5)


def test_sample_ids_must_be_integers_one_per_sample():
    """A float id was cut (1.5 drew as 1), a string parsed, a 2-D array flattened and
    None a builtin TypeError naming nothing."""
    u = shardfeed.sample_uniform
    for ids in (np.array([1.5]), np.array(["1"]), None, [True, False]):
        with pytest.raises(shardfeed.ArgumentTypeError, match="sample ids must be integers"):
            u(ids, seed=0, epoch=0)
        with pytest.raises(shardfeed.ArgumentTypeError, match="sample ids must be integers"):
            shardfeed.sample_rng(ids, seed=0, epoch=0)
    with pytest.raises(shardfeed.InvalidArgumentError, match="1-D"):
        u(np.arange(4).reshape(2, 2), seed=0, epoch=0)
    with pytest.raises(shardfeed.InvalidArgumentError, match=r"\[0, 2\*\*63\)"):
        u(np.array([-1]), seed=0, epoch=0)
    assert u([], seed=0, epoch=0).shape == (0, 1)
    np.testing.assert_array_equal(u([3, 4], 0, 0), u(np.array([3, 4], np.uint32), 0, 0))


def test_messages_name_the_setting_and_its_real_range(dataset):
    cases = [
        ({"world_size": 0}, shardfeed.InvalidArgumentError, "world_size must be at least 1, got 0"),
        ({"remote_timeout": -1}, shardfeed.InvalidArgumentError, r"got -1$"),
        ({"batch_size": 2**63}, shardfeed.InvalidArgumentError, "does not fit in a signed 64-bit"),
        ({"partitioning": 1}, shardfeed.ArgumentTypeError, "partitioning must be one of"),
        ({"filter": "x"}, shardfeed.ArgumentTypeError, "filter must be a non-empty list"),
        ({"filter": 5}, shardfeed.ArgumentTypeError, "filter must be a non-empty list"),
        ({"stack": {"": ["f0"]}}, shardfeed.InvalidArgumentError, "must not be empty"),
        ({"transforms": [Log1p(None)]}, shardfeed.ArgumentTypeError, "column must be a column"),
    ]
    for kw, error, match in cases:
        with pytest.raises(error, match=match):
            shardfeed.Loader(dataset, **kw)
    from shardfeed.transforms import Standardize

    with pytest.raises(shardfeed.InvalidArgumentError, match=r"1-D list .* shape \(2, 1\)"):
        Standardize("x", mean=np.zeros((2, 1)))


@pytest.mark.parametrize("bad", [[("label", "~", 1)], [("label", "in", 1)], [("label", "in", [])]])
def test_a_malformed_filter_is_named_before_the_source_is_opened(bad):
    with pytest.raises(shardfeed.InvalidArgumentError, match="filter on column 'label'"):
        shardfeed.Loader("/no/such/source", filter=bad)


def test_stats_have_the_file_cache_keys_for_local_data_too(dataset):
    stats = shardfeed.Loader(dataset).stats()
    for key in ("remote_bytes", "cache_hits", "cache_misses", "cache_bytes", "evictions",
                "prefetch_wait_seconds"):  # fmt: skip
        assert stats[key] == 0, key


def test_num_rows_counts_the_rows_the_filter_keeps(dataset, table):
    kept = sum(v < 100 for v in table.column("id").to_pylist())
    loader = shardfeed.Loader(dataset, filter=[("id", "<", 100)], batch_size=10, drop_last=False)
    assert loader.num_rows == kept == loader.stats()["filter"]["rows_kept"]
    assert sum(len(b["id"]) for b in loader) == kept


def test_the_public_names_are_the_documented_ones():
    """dir() shows __all__ (TorchDataset, loaded lazily, too) and no helper imports
    (it showed Any, annotations and pyarrow); submodules are listed once imported."""
    names = {n for n in dir(shardfeed) if not n.startswith("_")}
    public = {n for n in names if not inspect.ismodule(getattr(shardfeed, n))}
    assert public == set(shardfeed.__all__) - {"transforms"}, public ^ set(shardfeed.__all__)


def test_a_bool_fill_for_every_column_says_how_to_fill_bool_columns(dataset):
    for value in (True, False, np.bool_(True)):
        with pytest.raises(shardfeed.ArgumentTypeError, match=r"as \{column: (True|False)\}"):
            shardfeed.Loader(dataset, fill_null=value)


def test_a_fill_past_float64_is_named_not_an_overflow(dataset):
    """fill_null=10**400 raised a bare OverflowError from float()."""
    with pytest.raises(shardfeed.InvalidArgumentError, match="no exact float64 value"):
        shardfeed.Loader(dataset, fill_null=10**400)
    # A 64-bit integer float64 does not hold: the rule is said (the README's too).
    with pytest.raises(shardfeed.InvalidArgumentError, match=r"fill values are float64"):
        shardfeed.Loader(dataset, fill_null={"label": 2**64 - 1})


def test_a_fill_out_of_an_integer_columns_range_is_shown_as_the_integer(tmp_path):
    pq.write_table(pa.table({"i": pa.array([1, None], pa.int64())}), tmp_path / "i.parquet")
    with pytest.raises(shardfeed.InvalidArgumentError, match=r"fill value 9223372036854775808 is"):
        shardfeed.Loader(tmp_path, fill_null=2**63)
