"""shardfeed.vocabulary: the list of values for a Vocabulary transform (private)."""

from __future__ import annotations

from ._check import INT32, check_int, check_opt_int, check_source, check_str
from ._options import Source, default_threads, open_dataset


def vocabulary(
    source: Source,
    column: str,
    min_count: int = 1,
    max_size: int | None = None,
    *,
    num_threads: int | None = None,
) -> list[str | bytes]:
    """The distinct values of a string or binary column, most frequent first.

    One pass in C++ over only that column of every row group (files counted in
    parallel).  Ties are broken by value, bytewise ascending (code point order),
    so the list is the same on every run and with any ``num_threads``; nulls are
    not counted.  Pass the result to ``transforms.Vocabulary(column, values)``,
    which maps ``values[k]`` to ``k + 1`` (like NVTabular's Categorify).

    Args:
        source: as for ``Loader``: a directory, a file, or a list of files.
        column: a string, large_string, string_view or dictionary<string>
            column (pandas and polars categoricals): values are ``str`` (a
            value that is not UTF-8, which Parquet does not check, is its
            ``bytes``); a binary, fixed_size_binary (UUIDs, hashes) or other binary column:
            values are ``bytes``; or a list of them (its elements are counted;
            null lists and elements are not).
        min_count: values seen fewer times are left out.
        max_size: keep at most this many (the most frequent) values.
        num_threads: files counted at once (default: the CPU count, at most 16).

    Raises ColumnNotFoundError for a column not in the dataset,
    UnsupportedTypeError for a column that holds neither strings nor bytes,
    InvalidArgumentError for min_count < 1 or max_size < 0.
    """
    sources = check_source(source)
    name = check_str("column", column)
    count = check_int("min_count", min_count)
    size = check_opt_int("max_size", max_size)
    threads = check_opt_int("num_threads", num_threads, INT32)
    dataset = open_dataset(sources)
    values: list[str | bytes] = dataset.vocabulary(
        name, count, size, default_threads() if threads is None else threads
    )
    return values
