// What a decoded-tier entry of a row group holds under a layout (internal).
//
// The deterministic part of a row group: each column after the deterministic
// prefix of its transforms, and, for a stack whose member columns have no
// random transform, the stack's row-major matrix itself (before the stack's
// own transforms).  A warm epoch then maps the matrix and gathers rows from
// it: no decode and no transpose.  A column that only feeds such stacks is
// not stored.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <arrow/status.h>

#include "exec/decoded_row_group.h"
#include "shardfeed/decoded_tier.h"
#include "transform/column.h"
#include "transform/layout.h"

namespace shardfeed {

struct TierEntryPlan {
  std::vector<bool> column_stored;  // per Layout::fields
  std::vector<bool> matrix_stored;  // per Layout::outputs (stacks only)
  // Appended to the entry's key when any matrix is stored: what the matrices
  // depend on beyond the columns' key (dtype, width, members, null fills).
  std::string key_suffix;

  bool any_matrix() const;
};

TierEntryPlan PlanTierEntry(const Layout& layout);

// The records of an entry, in order: the stored columns, then the stored
// matrices (each a column of fixed-size lists of the stack's width).
std::vector<DecodedColumn> EntryRecords(const TierEntryPlan& entry,
                                        const std::vector<DecodedColumn>& columns,
                                        const std::vector<DecodedColumn>& matrices);

// Whether loaded records have the count, types and shapes that `entry`
// stores for a row group of `rows` rows (the key says they should; this makes
// sure that no forged or stale entry can make a batch read past a buffer);
// if so, moves them into `columns` (one per field, empty where not stored)
// and `matrices` (one per output, empty where not stored).
bool TakeEntryRecords(std::vector<DecodedColumn>* loaded, const Layout& layout,
                      const TierEntryPlan& entry, int64_t rows, std::vector<DecodedColumn>* columns,
                      std::vector<DecodedColumn>* matrices);

// Records in `decoded` that its columns and matrices map the entry at `path`
// (when any of them does): its damage flag and path.
// `mark`: the tier's EntryChanges mark taken before the entry was loaded.
void MarkMapped(const std::string& path, uint64_t mark, const std::vector<DecodedColumn>& columns,
                const std::vector<DecodedColumn>& matrices, DecodedRowGroup* decoded);

// OK unless `decoded` came mapped from `tier` and lost pages since, or was
// changed in place since (the entry truncated in place, a read error beneath
// it: what was read from it since may be zeros).  Call SeeTierChanges after
// the reads being checked and before this.  Then the tier removes the entry,
// so that the next epoch decodes the row group again, and the StorageError names `context` (the
// file and row group) and the entry.
// Reads the in-place changes to `tier`'s entries queued so far (null: none):
// call it after the reads that MappedIntact is to check.
void SeeTierChanges(DecodedTier* tier);

// `check_size`: its size too (a stat, EntryChanges::ChangedSince), which sees
// a truncation still in progress during the reads; a batch that read many
// entries (kSizeChecksPerBatch) relies on the events alone.
inline constexpr size_t kSizeChecksPerBatch = 32;
arrow::Status MappedIntact(const DecodedRowGroup& decoded, const std::string& context,
                           DecodedTier* tier, bool check_size = true);

}  // namespace shardfeed
