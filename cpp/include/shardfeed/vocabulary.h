// Categorical strings: an exact string -> index table for the Vocabulary
// transform, and the one-pass builder of such a list from a dataset column.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/result.h>

#include "shardfeed/catalog.h"

namespace shardfeed {

// An open-addressing table from each of `values` to its position + 1, built
// once per loader.  Probes use StringHash64 (util/hash.h), the hash that
// HashBucket gives strings; a hit is then confirmed by comparing the bytes,
// so a collision never maps one string onto another's index.
class VocabularyTable {
 public:
  // Duplicate values are an error (their index would be ambiguous).
  static arrow::Result<std::shared_ptr<const VocabularyTable>> Make(
      std::vector<std::string> values);

  // 1..size() for a value of the list, 0 otherwise.  `hash` must be
  // StringHash64(value) (callers that hashed already pass it on).
  int64_t Find(std::string_view value, uint64_t hash) const;
  int64_t Find(std::string_view value) const;

  int64_t size() const { return static_cast<int64_t>(values_.size()); }
  const std::vector<std::string>& values() const { return values_; }
  // A stable digest of the list, in order: what cache keys hold instead of it.
  const std::string& digest() const { return digest_; }

 private:
  VocabularyTable() = default;
  std::vector<std::string> values_;
  std::vector<uint64_t> hashes_;  // StringHash64 of each value
  std::vector<int32_t> slots_;    // power-of-two size; -1 empty, else a value index
  std::string digest_;
};

struct VocabularyOptions {
  int64_t min_count = 1;            // values seen fewer times are left out
  std::optional<int64_t> max_size;  // keep the first max_size values
  int num_threads = 4;              // files counted in parallel
};

// The type of the values a vocabulary of a column of `type` holds: its own, a
// list's elements', a dictionary's values'.  Text for string types, bytes for
// binary ones (a UUID's 16 bytes).
const arrow::DataType& VocabularyValueType(const arrow::DataType& type);

// Whether that type is text (string, large_string, string_view), not bytes.
bool VocabularyOfText(const arrow::DataType& type);

// The distinct non-null values of string or binary column `column` of the
// dataset, most frequent first, ties by value (bytewise ascending): the same
// list on every run and with any thread count.  Reads only that column
// (string, binary, their large, view and fixed-size twins, dictionaries of
// those, counted by index, or lists of any of these).
arrow::Result<std::vector<std::string>> BuildVocabulary(const Catalog& catalog,
                                                        const std::string& column,
                                                        const VocabularyOptions& options = {});

}  // namespace shardfeed
