// Row filters: the DNF form of pyarrow.parquet.read_table(filters=...) and
// Petastorm, applied before planning so that the plan is over the passing rows.
//
// A filter is an OR of ANDs of predicates `column op value(s)`.  As in
// pyarrow, a null passes no comparison (not even !=) but passes "not in",
// which pyarrow computes as not(is_in).  Values
// come already in the column's delivered representation (dates: days since
// the epoch, timestamps: the column's unit since the epoch), as the Python
// layer converts them; integers compare as int64 (uint64 columns as uint64,
// their values given as the int64 of the same bits), floats and decimals as
// float64, strings as UTF-8.
//
// FilteredRows::Make prunes files by their partition values, row groups by
// their column-chunk statistics (a row group is dropped only when no row can
// pass), then reads only the filter columns of the remaining row groups, in
// parallel, and keeps per row group the passing rows (none kept when all or no
// rows pass; else a sorted index list or a bitmap, whichever is smaller).
//
// The rows a Delta deletion vector deletes (FileEntry::deleted) never pass:
// Make leaves them out under any filter, and with an empty spec (no filter)
// keeps every other row, reading nothing.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include <arrow/result.h>
#include <arrow/type_fwd.h>

#include "shardfeed/catalog.h"

namespace shardfeed {

enum class FilterOp { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };

using FilterValue = std::variant<bool, int64_t, double, std::string>;

struct FilterPredicate {
  std::string column;
  FilterOp op = FilterOp::kEq;
  std::vector<FilterValue> values;  // one value, except for in / not in
};

// OR over the outer list, AND over each inner list.
using FilterSpec = std::vector<std::vector<FilterPredicate>>;

struct FilterCounts {
  int64_t files = 0;
  int64_t files_pruned_by_partition = 0;
  int64_t row_groups = 0;
  int64_t row_groups_pruned_by_partition = 0;
  int64_t row_groups_pruned_by_statistics = 0;
  int64_t row_groups_read = 0;  // whose filter columns were read
  int64_t row_groups_kept = 0;  // with at least one passing row
  int64_t rows = 0;
  int64_t rows_pruned_by_partition = 0;
  int64_t rows_pruned_by_statistics = 0;
  int64_t rows_pruned_by_rows = 0;
  int64_t rows_deleted = 0;  // passed the filter, deleted by a Delta deletion vector
  int64_t rows_kept = 0;
  int64_t bytes_read = 0;  // compressed bytes of the filter column chunks read
};

class FilteredRows {
 public:
  // `key`: the filter's canonical text (part of cache keys).  Errors name the
  // column (missing, nested, a value of the wrong type) or the file and row group.
  // An empty `spec`: only the catalog's deleted rows are left out.
  static arrow::Result<std::shared_ptr<const FilteredRows>> Make(const Catalog& catalog,
                                                                 const FilterSpec& spec,
                                                                 std::string key,
                                                                 int num_threads = 8);

  // The checks of Make alone (columns, operators, value types), reading nothing.
  static arrow::Status Check(const Catalog& catalog, const FilterSpec& spec);

  const std::string& key() const { return key_; }
  // Passing rows per catalog row group: the plan's input instead of RowGroupRows().
  const std::vector<int64_t>& pass_rows() const { return pass_rows_; }
  const FilterCounts& counts() const { return counts_; }
  // True when every row of the row group passes (no selection needed).
  bool All(int32_t rg) const;
  // The passing rows of row group `rg` (indices inside it, ascending).
  std::vector<int64_t> Rows(int32_t rg) const;

  // A compact binary image (for the cache) and its validated inverse: null when
  // `bytes` is not an image for `catalog` (wrong size, counts, order: trust no length).
  std::string Serialize() const;
  // 16 hex digits of which rows pass, row group by row group (not how they are
  // stored, nor the counters or key): the same for any copy of the same data, and
  // another when a file's values change which rows pass.
  std::string SelectionDigest() const;
  static std::shared_ptr<const FilteredRows> Deserialize(const Catalog& catalog,
                                                         const std::string& key,
                                                         const std::string& bytes);

 private:
  friend struct FilterRunner;
  std::string key_;
  std::vector<int64_t> pass_rows_;
  std::vector<int64_t> num_rows_;
  // Per row group: empty when all or none pass; else kind 1 = uint32 indices,
  // kind 2 = a bitmap (bit i: row i passes).
  std::vector<uint8_t> kind_;
  std::vector<std::vector<uint32_t>> indices_;
  std::vector<std::vector<uint8_t>> bitmaps_;
  FilterCounts counts_;
};

}  // namespace shardfeed
