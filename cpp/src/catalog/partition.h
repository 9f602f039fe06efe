// Hive partitions: `key=value` folder names below the dataset root (internal).
//
// As Hive, Spark and pyarrow.dataset read them: every folder component of a
// file's path relative to the root that has the form key=value names one
// partition key; values are URL-decoded; __HIVE_DEFAULT_PARTITION__ is null.
// A key is int64 when every non-null value of it in the dataset is an integer,
// else string.  All files must have the same keys in the same order.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <arrow/result.h>
#include <arrow/type_fwd.h>

namespace shardfeed {

// (key, value) pairs of one relative path's folders, in path order; a null
// value stands for __HIVE_DEFAULT_PARTITION__.
using PartitionPairs = std::vector<std::pair<std::string, std::optional<std::string>>>;

// Decodes %XX escapes (a malformed escape is kept as it is, as Hive does).
std::string UrlDecode(const std::string& text);

// The key=value folder components of `rel_path` (the file name itself is not a folder).
PartitionPairs ParseHivePath(const std::string& rel_path);

struct PartitionTable {
  std::shared_ptr<arrow::Schema> schema;  // one field per key: int64 or string, nullable
  // Per file (in the order given), one scalar per key: the typed value or a null scalar.
  std::vector<std::vector<std::shared_ptr<arrow::Scalar>>> values;
};

// Types the keys of `files` (relative paths, in catalog order) and their values;
// an error names two files whose keys differ.  Where `empty_is_null[i]`, an
// empty value ("k=") of file i is null (a Delta table's rule); else it is "",
// as pyarrow.dataset reads it.
arrow::Result<PartitionTable> InferPartitions(const std::vector<std::string>& rel_paths,
                                              const std::vector<bool>& empty_is_null = {});

// The same from each file's pairs as given (`pairs[i]` those of `rel_paths[i]`,
// which names it in errors).
arrow::Result<PartitionTable> InferPartitions(const std::vector<std::string>& rel_paths,
                                              std::vector<PartitionPairs> pairs);

}  // namespace shardfeed
