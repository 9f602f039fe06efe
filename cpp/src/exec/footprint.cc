#include "exec/footprint.h"

#include <pthread.h>

#include <algorithm>
#include <limits>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>

#include <arrow/array.h>
#include <arrow/buffer.h>
#include <arrow/util/byte_size.h>
#include <parquet/metadata.h>
#include <parquet/schema.h>

#include "exec/stack_matrix.h"
#include "exec/tile_read.h"
#include "util/struct_fields.h"

namespace shardfeed {

int64_t DecodedChunkBytes(const parquet::ColumnDescriptor& column, int64_t num_values,
                          int64_t num_rows, int64_t uncompressed) {
  constexpr int64_t kMaxValues = int64_t{1} << 40;
  int64_t n = std::clamp<int64_t>(num_values, 0, kMaxValues);
  // A column that is not repeated has one value per row whatever its footer
  // claims (a corrupt count would book terabytes: no decode ahead would fit).
  if (column.max_repetition_level() == 0) n = std::min(n, std::max<int64_t>(num_rows, 0));
  int64_t width = 0;
  switch (column.physical_type()) {
    case parquet::Type::BOOLEAN:
      width = 1;  // bools decode to a byte each (transform/column.h)
      break;
    case parquet::Type::INT32:
    case parquet::Type::FLOAT:
      width = 4;
      break;
    case parquet::Type::INT64:
    case parquet::Type::DOUBLE:
      width = 8;
      break;
    case parquet::Type::INT96:
      width = 12;
      break;
    case parquet::Type::FIXED_LEN_BYTE_ARRAY:
      width = std::clamp(column.type_length(), 1, 1 << 20);
      break;
    default:
      return std::clamp<int64_t>(uncompressed, 0, kMaxValues) + 8 * n;
  }
  return n * width + (column.max_definition_level() > 0 ? n / 8 + 1 : 0);
}

int64_t LevelBytes(const parquet::ColumnDescriptor& column, int64_t num_values) {
  constexpr int64_t kMaxValues = int64_t{1} << 40;  // as DecodedChunkBytes caps them
  if (column.max_repetition_level() == 0) return 0;
  return 4 * std::clamp<int64_t>(num_values, 0, kMaxValues);
}

namespace {
// Per layout field: the share of a fused stack member's bytes held at once
// while the stack is read; -1 for a field that is not such a member.
std::vector<double> FusedShares(const Layout& layout) {
  std::vector<double> share(layout.fields.size(), -1);
  const auto fused = FusedStacks(layout);
  for (size_t o = 0; o < fused.size(); ++o) {
    if (!fused[o]) continue;
    const auto& sources = layout.outputs[o].sources;
    const double held =
        std::min(1.0, static_cast<double>(kFusedColumns) / static_cast<double>(sources.size()));
    for (int f : sources) share[static_cast<size_t>(f)] = held;
  }
  return share;
}

// Per layout field, what the tile read's choice of it (TileLeaf) depends on
// in the layout: -1 for a field that is not a fused stack member, else its
// transforms, string source, dtypes, stack dtype and fill.  Footprints are
// kept per catalog and these (a pre-buffered row group counts a member once
// only where the tile read takes it).
std::vector<int64_t> TileKeys(const Layout& layout) {
  std::vector<int64_t> keys(layout.fields.size(), -1);
  const auto fused = FusedStacks(layout);
  for (size_t o = 0; o < fused.size(); ++o) {
    if (!fused[o]) continue;
    const auto& plan = layout.outputs[o];
    for (int s : plan.sources) {
      const auto f = static_cast<size_t>(s);
      const bool plain = layout.field_transforms[f].empty() && !layout.field_from_strings[f];
      keys[f] =
          (plain ? 1 : 0) | int64_t{static_cast<int>(layout.field_raw_dtypes[f])} << 1 |
          int64_t{static_cast<int>(layout.field_dtypes[f])} << 9 |
          int64_t{static_cast<int>(plan.matrix_dtype)} << 17 |
          int64_t{layout.field_nulls_to_stack[f] || layout.field_fill_null[f].has_value() ? 1 : 0}
              << 25;
    }
  }
  return keys;
}

// What the stacks' matrices and the objects a row group holds depend on in the
// layout: each stack's dtypes, width and members, and which fields are handed
// out alone.
std::vector<int64_t> ShapeKeys(const Layout& layout) {
  std::vector<int64_t> keys;
  for (const auto& plan : layout.outputs) {
    if (plan.kind != OutputKind::kStack) continue;
    keys.push_back(-1);
    keys.push_back(static_cast<int>(plan.matrix_dtype));
    keys.push_back(static_cast<int>(plan.dtype));
    keys.push_back(plan.width);
    keys.insert(keys.end(), plan.sources.begin(), plan.sources.end());
  }
  keys.push_back(-2);
  for (bool alone : layout.field_used_alone) keys.push_back(alone ? 1 : 0);
  return keys;
}

// Per layout field of a pre-buffered row group (its footer: `meta`): whether
// the tile read takes it, i.e. reads it straight into its stack's matrix with
// no array made (a group of kFusedColumns members is taken only whole).  What
// it does not take is read whole through Arrow's arrays: held twice.
std::vector<bool> TiledFields(const Layout& layout, const FileEntry& file,
                              const std::vector<FlatField>& flat,
                              const parquet::FileMetaData& meta) {
  std::vector<bool> tiled(layout.fields.size(), false);
  const auto fused = FusedStacks(layout);
  for (size_t o = 0; o < fused.size(); ++o) {
    if (!fused[o]) continue;
    const auto& plan = layout.outputs[o];
    const std::vector<int> leaves = TileLeaves(layout, plan, file, flat, meta);
    for (size_t first = 0; first < plan.sources.size(); first += kFusedColumns) {
      const size_t last = std::min(plan.sources.size(), first + kFusedColumns);
      if (!GroupTiled(leaves, first, last)) continue;
      for (size_t c = first; c < last; ++c) tiled[static_cast<size_t>(plan.sources[c])] = true;
    }
  }
  return tiled;
}
}  // namespace

std::vector<RowGroupFootprint> EstimateFootprints(const Catalog& catalog, const Layout& layout) {
  const auto& files = catalog.files();
  const auto& rgs = catalog.row_groups();
  std::vector<RowGroupFootprint> out(rgs.size());
  const std::vector<double> share = FusedShares(layout);
  const bool any_fused = std::any_of(share.begin(), share.end(), [](double v) { return v >= 0; });
  // Per file: its columns as the readers map them (for TileLeaf), made once.
  std::vector<std::optional<parquet::arrow::SchemaManifest>> manifests(files.size());
  std::vector<std::vector<FlatField>> flat(files.size());
  // Per file and leaf column read: the layout field it belongs to.
  std::vector<std::vector<size_t>> field_of_leaf(files.size());
  // Per file: its leaf columns that the layout reads, and which of the
  // layout's fields it lacks (partition columns, columns missing in the file).
  std::vector<std::vector<int>> leaves(files.size());
  std::vector<std::vector<bool>> absent_field(files.size());
  // What a decoded row group holds of objects, whatever its values: a column
  // handed out alone, a stack's matrix (its members' arrays are dropped once it
  // is made) and every field's record.
  std::vector<bool> stack_only(layout.fields.size(), false);
  int64_t held_columns = 0;
  for (const auto& plan : layout.outputs) {
    if (plan.kind != OutputKind::kStack) continue;
    ++held_columns;
    for (int s : plan.sources) {
      const auto f = static_cast<size_t>(s);
      stack_only[f] = !layout.field_used_alone[f];
    }
  }
  for (bool alone : layout.field_used_alone) held_columns += alone ? 1 : 0;
  const int64_t held_objects = held_columns * kColumnOverheadBytes +
                               static_cast<int64_t>(layout.fields.size() * sizeof(DecodedColumn));
  for (size_t f = 0; f < files.size(); ++f) {
    const auto& file = files[f];
    if (!file.metadata) continue;
    const parquet::SchemaDescriptor* schema = file.metadata->schema();
    std::unordered_map<int, size_t> wanted;  // file top-level field -> layout field
    absent_field[f].assign(layout.fields.size(), false);
    for (size_t i = 0; i < layout.fields.size(); ++i) {
      const int field = layout.fields[i];
      const int in_file =
          file.field_map.empty() ? field : file.field_map[static_cast<size_t>(field)];
      if (in_file < 0) {
        absent_field[f][i] = true;
      } else {
        wanted[in_file] = i;
      }
    }
    if (!file.struct_leaves.empty()) {           // fields are structs' fields too: their own leaves
      std::vector<std::pair<int, size_t>> read;  // (leaf, layout field), in leaf order
      for (const auto& [in_file, i] : wanted) {
        if (static_cast<size_t>(in_file) >= file.struct_leaves.size()) continue;
        for (int c : file.struct_leaves[static_cast<size_t>(in_file)]) read.emplace_back(c, i);
      }
      std::sort(read.begin(), read.end());
      for (const auto& [c, i] : read) {
        leaves[f].push_back(c);
        field_of_leaf[f].push_back(i);
      }
      continue;
    }
    for (int c = 0; c < schema->num_columns(); ++c) {
      const int top = schema->group_node()->FieldIndex(*schema->GetColumnRoot(c));
      auto it = wanted.find(top);
      if (it == wanted.end()) continue;
      leaves[f].push_back(c);
      field_of_leaf[f].push_back(it->second);
    }
  }
  for (size_t i = 0; i < rgs.size(); ++i) {
    const auto& entry = rgs[i];
    const auto f = static_cast<size_t>(entry.file);
    auto& fp = out[i];
    const auto absent = std::count(absent_field[f].begin(), absent_field[f].end(), true);
    fp.decoded = static_cast<int64_t>(absent) * 8 * entry.num_rows;
    fp.held_objects = held_objects;
    auto parsed = RowGroupFooter(entry);
    if (!parsed.ok() || (*parsed)->num_row_groups() != 1) continue;
    const auto& meta = *parsed;
    auto rg = meta->RowGroup(0);
    const parquet::SchemaDescriptor* schema = meta->schema();
    std::vector<bool> tiled;
    if (any_fused && PreBuffered(entry.total_bytes) && files[f].metadata) {
      if (!manifests[f]) {
        auto made = MakeManifest(*files[f].metadata);
        if (made.ok()) {
          manifests[f] = std::move(*made);
          flat[f] = FlattenStructs(*manifests[f]);
        }
      }
      if (manifests[f]) tiled = TiledFields(layout, files[f], flat[f], *meta);
    }
    std::vector<int64_t> field_bytes(layout.fields.size(), 0);
    for (size_t k = 0; k < absent_field[f].size(); ++k) {
      if (absent_field[f][k]) field_bytes[k] = 8 * entry.num_rows;  // as in `decoded`
    }
    for (size_t k = 0; k < leaves[f].size(); ++k) {
      const int c = leaves[f][k];
      if (c >= rg->num_columns()) continue;
      auto chunk = rg->ColumnChunk(c);
      // Footer numbers are untrusted: a negative size counts as nothing, a
      // count is capped (an estimate sizes no allocation, but must not overflow).
      fp.read += std::max<int64_t>(chunk->total_compressed_size(), 0);
      const int64_t bytes = DecodedChunkBytes(*schema->Column(c), chunk->num_values(),
                                              entry.num_rows, chunk->total_uncompressed_size());
      fp.decoded += bytes;
      fp.levels += LevelBytes(*schema->Column(c), chunk->num_values());
      const size_t field = field_of_leaf[f][k];
      field_bytes[field] += bytes;
      const double held = share[field];
      // As DecodeRowGroup fuses: every member of a row group too large to
      // pre-buffer, in a pre-buffered one the members the tile read takes.
      if (held >= 0 &&
          (!PreBuffered(entry.total_bytes) || (field < tiled.size() && tiled[field]))) {
        fp.fused += bytes;
        fp.fused_held += static_cast<int64_t>(held * static_cast<double>(bytes));
      } else {
        ++fp.array_chunks;
      }
      ++fp.chunks;
    }
    // The matrices replace the values of the members that feed only stacks;
    // made at their dtype (or the stack transforms' wider one), with members
    // listed twice or in two stacks, they may take more.
    double matrices = 0, members = 0;
    const double rows = static_cast<double>(std::max<int64_t>(entry.num_rows, 0));
    for (const auto& plan : layout.outputs) {
      if (plan.kind != OutputKind::kStack) continue;
      const size_t width = std::max(DTypeSize(plan.matrix_dtype), DTypeSize(plan.dtype));
      matrices += rows * static_cast<double>(plan.width) * static_cast<double>(width);
    }
    for (size_t k = 0; k < field_bytes.size(); ++k) {
      if (stack_only[k]) members += static_cast<double>(field_bytes[k]);
    }
    if (matrices > members) {  // untrusted row counts: saturated, not wrapped
      fp.matrix_extra = static_cast<int64_t>(std::min(matrices - members, 4.0e18));
    }
  }
  return out;
}

namespace {

// The footprints of the latest catalogs, shared by the engines of a process.
struct KeptFootprints {
  struct Entry {
    std::weak_ptr<const Catalog> catalog;
    std::vector<int> fields;
    std::vector<double> shares;      // what fusing depends on (FusedShares)
    std::vector<int64_t> tile_keys;  // and the tile read (TileKeys)
    std::vector<int64_t> shapes;     // and the outputs' shapes (ShapeKeys)
    std::shared_ptr<const std::vector<RowGroupFootprint>> footprints;
  };
  std::mutex mu;
  std::vector<Entry> kept;  // latest last
};

KeptFootprints* Kept() {
  static KeptFootprints* const kept = new KeptFootprints();  // never destroyed: see below
  return kept;
}

// A fork copies the list as it is: its mutex perhaps held by a thread the child
// does not have (an engine being made), the list perhaps half changed.  The
// child (only the forking thread runs there) starts with an empty one; the
// copy is left as it is.
void ForgetKeptInChild() { new (Kept()) KeptFootprints(); }
[[maybe_unused]] const int kAtFork = pthread_atfork(nullptr, nullptr, ForgetKeptInChild);

}  // namespace

std::shared_ptr<const std::vector<RowGroupFootprint>> Footprints(
    const std::shared_ptr<const Catalog>& catalog, const Layout& layout) {
  using Entry = KeptFootprints::Entry;
  const std::vector<double> shares = FusedShares(layout);
  const std::vector<int64_t> tile_keys = TileKeys(layout);
  const std::vector<int64_t> shapes = ShapeKeys(layout);
  constexpr size_t kKept = 8;
  std::mutex& mu = Kept()->mu;
  std::vector<Entry>& kept = Kept()->kept;
  const auto same = [&](const Entry& e) {
    // Owner equality, not the address: a catalog freed and another made at
    // the same address is not a match.
    return !e.catalog.owner_before(catalog) && !catalog.owner_before(e.catalog) &&
           !e.catalog.expired() && e.fields == layout.fields && e.shares == shares &&
           e.tile_keys == tile_keys && e.shapes == shapes;
  };
  {
    std::lock_guard<std::mutex> lock(mu);
    std::erase_if(kept, [](const Entry& e) { return e.catalog.expired(); });
    for (const auto& e : kept) {
      if (same(e)) return e.footprints;
    }
  }
  auto made =
      std::make_shared<const std::vector<RowGroupFootprint>>(EstimateFootprints(*catalog, layout));
  std::lock_guard<std::mutex> lock(mu);
  for (const auto& e : kept) {
    if (same(e)) return e.footprints;  // another thread made it meanwhile
  }
  if (kept.size() >= kKept) kept.erase(kept.begin());
  kept.push_back(Entry{catalog, layout.fields, shares, tile_keys, shapes, made});
  return made;
}

int64_t ReadyBatchCapacity(int64_t batch_bytes, int num_threads, int queue_depth,
                           int64_t memory_limit) {
  int64_t capacity = int64_t{std::max(1, num_threads)} * std::max(1, queue_depth);
  if (memory_limit > 0 && batch_bytes > 0) {
    capacity = std::min(capacity, std::max<int64_t>(1, memory_limit / 4 / batch_bytes));
  }
  return capacity;
}

int64_t EstimateBatchBytes(const std::vector<RowGroupFootprint>& footprints, const Catalog& catalog,
                           int64_t batch_size) {
  // In doubles, saturated: footer sizes are untrusted (no overflowing sum,
  // no cast of a double past int64).
  double bytes = 0, rows = 0;
  for (size_t i = 0; i < footprints.size(); ++i) {
    bytes += static_cast<double>(footprints[i].decoded);
    rows += static_cast<double>(catalog.row_groups()[i].num_rows);
  }
  if (!(rows > 0)) return 0;
  const double estimate = bytes / rows * static_cast<double>(batch_size);
  if (!(estimate > 0)) return 0;
  if (!(estimate < 9.2e18)) return std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(estimate);
}

int64_t ResidentBytes(const DecodedRowGroup& rg) {
  // The engine's buffers are writable; read-only ones are the decoded tier's
  // mapped entries: the page cache's pages, which the kernel can drop.
  const auto own = [](const std::shared_ptr<arrow::Buffer>& b) -> int64_t {
    return b && b->is_mutable() ? b->capacity() : 0;
  };
  int64_t bytes = 0, objects = 0;
  for (const auto& stack : rg.stacks) {
    const int64_t b = own(stack);
    bytes += b;
    objects += b > 0 ? kColumnOverheadBytes : 0;
  }
  for (const auto& column : rg.columns) {
    if (own(column.owned) > 0 || column.array) objects += kColumnOverheadBytes;
    bytes += own(column.owned);
    if (column.array) bytes += arrow::util::TotalBufferSize(*column.array->data());
    if (column.null_rows) bytes += arrow::util::TotalBufferSize(*column.null_rows->data());
    bytes += static_cast<int64_t>(column.nulls.capacity() + 8 * (column.list_starts.capacity() +
                                                                 column.list_lengths.capacity()));
  }
  if (rg.rows) bytes += static_cast<int64_t>(8 * rg.rows->capacity());
  // A row group the decoded tier maps (none of it the engine's) holds the
  // page cache's memory, not the budget's: its objects are not booked either.
  if (bytes > 0) {
    bytes += objects + static_cast<int64_t>(rg.columns.size() * sizeof(DecodedColumn));
  }
  return bytes;
}

int64_t BatchBytes(const Batch& batch) {
  int64_t bytes = 0;
  for (const auto& a : batch.arrays) {
    if (a.buffer) bytes += static_cast<int64_t>(a.buffer->size());
  }
  return bytes;
}

}  // namespace shardfeed
