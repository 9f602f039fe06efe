// What the engine's memory budget books, estimated from the footers before
// anything is read, and measured once it exists (internal).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include <parquet/schema.h>

#include "exec/decoded_row_group.h"
#include "shardfeed/batch.h"
#include "shardfeed/catalog.h"
#include "transform/layout.h"

namespace shardfeed {

struct RowGroupFootprint {
  int64_t read = 0;     // compressed bytes of the column chunks decoded
  int64_t decoded = 0;  // their uncompressed bytes (partition columns: 8 per row)
  int64_t chunks = 0;   // column chunks read
  // Of `decoded`: the members of fused stacks (FusedStacks), and the part of
  // them held at once while they are read (kFusedColumns members per stack).
  int64_t fused = 0;
  int64_t fused_held = 0;
  // What stack matrices take beyond the decoded bytes of the members they
  // replace (a float64 matrix of float32 members: as much again).
  int64_t matrix_extra = 0;
  // Objects a decoded row group holds besides its values: kColumnOverheadBytes
  // a column handed out alone and a stack matrix, and each field's record.
  int64_t held_objects = 0;
  // Column chunks read whole through Arrow's arrays (not by the tile read, nor
  // a few at a time into a stack): their objects while the decode runs.
  int64_t array_chunks = 0;
  // Repeated columns' levels, which Arrow's reader holds while it builds their
  // lists (LevelBytes): only while the decode runs, not in `decoded`.
  int64_t levels = 0;
};

// A repeated column's levels while Arrow decodes it: an int16 of each kind
// per value (a 40 MB float32 list chunk peaked 135 MiB in Arrow's pool, against
// 83 MiB booked without them); 0 for a column that is not repeated.
int64_t LevelBytes(const parquet::ColumnDescriptor& column, int64_t num_values);

// Column chunks at most this large (compressed, the whole row group) are
// read in one coalesced, pre-buffered pass; larger ones through a small
// buffer per column, page by page, so that a large row group is not held
// twice, compressed and decoded.  (Without either, Arrow reads every column
// chunk whole before decoding the first.)
inline constexpr int64_t kPreBufferMaxBytes = int64_t{64} << 20;
inline constexpr int64_t kStreamBufferBytes = int64_t{64} << 10;
inline bool PreBuffered(int64_t row_group_bytes) { return row_group_bytes <= kPreBufferMaxBytes; }

// A column chunk's bytes once decoded, from its footer entry: its values at
// their width in memory (the encoded size in the footer says little: a
// dictionary or RLE of repeated values is far smaller than the arrays it
// decodes to), plus a null bitmap where values may be null; variable-length
// values their encoded bytes and an offset each.  Footer numbers are
// untrusted: a column that is not repeated counts at most `num_rows` values,
// a repeated one at most 2^40, negative sizes as nothing.
int64_t DecodedChunkBytes(const parquet::ColumnDescriptor& column, int64_t num_values,
                          int64_t num_rows, int64_t uncompressed);

// Per catalog row group, the bytes of the layout's columns, from the footers.
std::vector<RowGroupFootprint> EstimateFootprints(const Catalog& catalog, const Layout& layout);

// EstimateFootprints, computed once per catalog and set of columns in a
// process: it walks every column chunk's footer entry (millions on a large
// dataset), and every epoch's engine, every DataLoader worker's and
// PlanMemory ask for it.  The few latest results are kept while their
// catalog lives.
std::shared_ptr<const std::vector<RowGroupFootprint>> Footprints(
    const std::shared_ptr<const Catalog>& catalog, const Layout& layout);

// What a decoded column holds besides its values: Arrow's array and buffer
// objects and the allocator's rounding of small buffers.  Nothing beside
// megabytes of values, but a table of 10-row row groups held about 1.2 KB per
// column that was not booked: a window of thousands of such row groups
// passed the limit 30 times over.
inline constexpr int64_t kColumnOverheadBytes = 1536;

// What decoding one row group holds at its peak: the pre-buffered compressed
// chunks (or a stream buffer per chunk), Arrow's arrays and the stack matrix
// made from them -- of a fused stack's members only the few read at once.
inline int64_t DecodeReservation(const RowGroupFootprint& f, int64_t row_group_bytes) {
  return (PreBuffered(row_group_bytes) ? f.read : f.chunks * kStreamBufferBytes) + 2 * f.decoded -
         f.fused + f.fused_held + f.matrix_extra + f.held_objects +
         f.array_chunks * kColumnOverheadBytes + f.levels;
}

// Built batches the engine keeps at most: N * queue_depth, fewer when they
// would take more than a quarter of the memory limit (at least one).
int64_t ReadyBatchCapacity(int64_t batch_bytes, int num_threads, int queue_depth,
                           int64_t memory_limit);

// The least memory_limit whose default shuffle window (PlanMemory) is
// `target` row groups of `cost_mean` bytes each; 0 when there are none, the
// int64 maximum when it is past that (defined in memory_plan.cc).
int64_t LeastLimitForWindow(int64_t target, double cost_mean);

// Bytes of one batch of `batch_size` rows, from the mean decoded row.
int64_t EstimateBatchBytes(const std::vector<RowGroupFootprint>& footprints, const Catalog& catalog,
                           int64_t batch_size);

// Bytes a decoded row group holds (its buffers, counted once each; not the
// decoded tier's mapped entries).
int64_t ResidentBytes(const DecodedRowGroup& rg);

// Bytes of a batch's buffers.
int64_t BatchBytes(const Batch& batch);

}  // namespace shardfeed
