#include "exec/assemble.h"

#include <algorithm>

#if defined(__SSE2__)
#include <emmintrin.h>
#include <xmmintrin.h>
#endif

#include <arrow/buffer.h>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>

#include "shardfeed/status.h"
#include "util/dtype_dispatch.h"

namespace shardfeed {

namespace {

// An output buffer; out of memory names the batch and the output.
arrow::Result<std::shared_ptr<OutputBuffer>> NewBuffer(int64_t elements, DType dtype,
                                                       const std::string& output,
                                                       int64_t batch_index,
                                                       const std::shared_ptr<OutputArena>& arena) {
  auto buffer = OutputBuffer::Make(static_cast<size_t>(elements) * DTypeSize(dtype), arena);
  if (!buffer.ok()) {
    return WithContext(buffer.status(),
                       "batch " + std::to_string(batch_index) + ", output '" + output + "'");
  }
  return buffer;
}

// out[i * stride] = column[slot[i]][row[i]] for one column, converting Src -> Dst.
template <typename Src, typename Dst>
void GatherStrided(const GatherInput& in, int source, Dst* out, int64_t stride) {
  std::vector<const Src*> base(in.slots.size());
  for (size_t s = 0; s < in.slots.size(); ++s) {
    base[s] =
        reinterpret_cast<const Src*>(in.slots[s]->columns[static_cast<size_t>(source)].values);
  }
  const size_t n = in.slot.size();
  for (size_t i = 0; i < n; ++i) {
    out[static_cast<int64_t>(i) * stride] =
        static_cast<Dst>(base[static_cast<size_t>(in.slot[i])][in.row[i]]);
  }
}

// Copies each sample's row of a row-major [rows, width] matrix.
void GatherRows(const GatherInput& in, size_t output, size_t row_bytes, uint8_t* out) {
  const auto source = [&](size_t i) {
    const auto& matrix = *in.slots[static_cast<size_t>(in.slot[i])]->stacks[output];
    return matrix.data() + static_cast<size_t>(in.row[i]) * row_bytes;
  };
  // The rows are scattered: fetching a few rows ahead hides each one's
  // latency, which the hardware prefetcher cannot guess.
  constexpr size_t kAhead = 4;
  const size_t n = in.slot.size();
  for (size_t i = 0; i < n; ++i) {
    if (i + kAhead < n) {
      const uint8_t* next = source(i + kAhead);
      for (size_t b = 0; b < row_bytes; b += 64) __builtin_prefetch(next + b);
    }
    std::memcpy(out + i * row_bytes, source(i), row_bytes);
  }
}

// dst[r * width + c] = column c, row r, converted to Dst; tiled so that the
// strided writes of a tile stay in cache while each column is read in order.
template <typename Src, typename Dst>
void TransposeColumn(const uint8_t* values, int64_t rows, int64_t width, int64_t c, Dst* dst) {
  const auto* src = reinterpret_cast<const Src*>(values);
  for (int64_t r = 0; r < rows; ++r) dst[r * width + c] = static_cast<Dst>(src[r]);
}

void GatherFixedList(const GatherInput& in, const OutputPlan& plan, uint8_t* out) {
  const size_t bytes = static_cast<size_t>(plan.width) * DTypeSize(plan.dtype);
  for (size_t i = 0; i < in.slot.size(); ++i) {
    const auto& column =
        in.slots[static_cast<size_t>(in.slot[i])]->columns[static_cast<size_t>(plan.sources[0])];
    std::memcpy(out + i * bytes, column.values + static_cast<size_t>(in.row[i]) * bytes, bytes);
  }
}

// A padded list output this many times its values is mostly padding; below
// kPaddingAllowed bytes it is allocated whatever the limit.
constexpr double kMostlyPadding = 8;
constexpr double kPaddingAllowed = 16 << 20;

std::string MiB(double bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f MiB", bytes / (1 << 20));
  return text;
}

// The error for a padded list output larger than the memory limit.
arrow::Status PaddedTooLarge(const GatherInput& in, const OutputPlan& plan, int64_t batch_index,
                             size_t longest, int64_t max_len, double values_bytes,
                             const AssembleLimits& limits) {
  const auto& slot = *in.slots[static_cast<size_t>(in.slot[longest])];
  const int64_t row = in.row[longest];
  const int64_t file_row = slot.rows ? (*slot.rows)[static_cast<size_t>(row)] : row;
  std::string where;
  if (limits.row_group_name) {
    where = limits.row_group_name(slot.index);
  } else {
    where = "row group ";
    where += std::to_string(slot.index);
  }
  const auto n = static_cast<int64_t>(in.slot.size());
  const double padded = static_cast<double>(n) * static_cast<double>(max_len) *
                        static_cast<double>(DTypeSize(plan.dtype));
  std::string message = "batch ";
  message += std::to_string(batch_index);
  message += ", output '";
  message += plan.name;
  message += "': its lists are padded to the longest, ";
  message += std::to_string(max_len);
  message += " elements (";
  message += where;
  message += ", row ";
  message += std::to_string(file_row);
  message += "), which makes a [";
  message += std::to_string(n);
  message += ", ";
  message += std::to_string(max_len);
  message += "] array of ";
  message += MiB(padded);
  message += ", more than memory_limit (";
  message += MiB(static_cast<double>(limits.memory_limit));
  message += ") for one output, while its lists hold ";
  message += MiB(values_bytes);
  message +=
      ". Raise memory_limit (None: no limit), lower batch_size, or leave the column out "
      "with columns=[...]";
  return Error(ErrorKind::kInvalidArgument, std::move(message));
}

arrow::Status GatherList(const GatherInput& in, const OutputPlan& plan, Batch* batch,
                         const std::shared_ptr<OutputArena>& arena, const AssembleLimits& limits) {
  const size_t n = in.slot.size();
  const size_t elem = DTypeSize(plan.dtype);
  ARROW_ASSIGN_OR_RAISE(auto lengths, NewBuffer(static_cast<int64_t>(n), DType::kInt64, plan.name,
                                                batch->index, arena));
  auto* len = lengths->As<int64_t>();
  int64_t max_len = 0;
  size_t longest = 0;
  double total = 0;
  for (size_t i = 0; i < n; ++i) {
    const auto& column =
        in.slots[static_cast<size_t>(in.slot[i])]->columns[static_cast<size_t>(plan.sources[0])];
    len[i] = column.list_lengths[static_cast<size_t>(in.row[i])];
    total += static_cast<double>(len[i]);
    if (len[i] > max_len) {
      max_len = len[i];
      longest = i;
    }
  }
  // Refused: an array over the limit that is mostly padding (a limit below
  // what the values themselves need only slows the stream, as elsewhere).
  const double padded =
      static_cast<double>(n) * static_cast<double>(max_len) * static_cast<double>(elem);
  if (limits.memory_limit > 0 && padded > static_cast<double>(limits.memory_limit) &&
      padded > kPaddingAllowed && padded > kMostlyPadding * total * static_cast<double>(elem)) {
    return PaddedTooLarge(in, plan, batch->index, longest, max_len,
                          total * static_cast<double>(elem), limits);
  }
  ARROW_ASSIGN_OR_RAISE(auto values, NewBuffer(static_cast<int64_t>(n) * max_len, plan.dtype,
                                               plan.name, batch->index, arena));
  std::memset(values->data(), 0, values->size());  // padding is zero
  for (size_t i = 0; i < n; ++i) {
    const auto& column =
        in.slots[static_cast<size_t>(in.slot[i])]->columns[static_cast<size_t>(plan.sources[0])];
    const int64_t start = column.list_starts[static_cast<size_t>(in.row[i])];
    std::memcpy(values->data() + i * static_cast<size_t>(max_len) * elem,
                column.values + static_cast<size_t>(start) * elem,
                static_cast<size_t>(len[i]) * elem);
  }
  batch->arrays.push_back({plan.name, plan.dtype, {static_cast<int64_t>(n), max_len}, values});
  batch->arrays.push_back(
      {plan.name + "_lengths", DType::kInt64, {static_cast<int64_t>(n)}, lengths});
  return arrow::Status::OK();
}

}  // namespace

#if defined(__SSE2__)
namespace {

// Rows r..r+3 of columns c..c+3 (4-byte values), written to the four rows
// of dst (row stride `width`) at column c by `store` (_mm_storeu_ps or
// _mm_stream_ps): a 4x4 block moved with SSE, the bits never converted.
template <typename Store>
inline void Block4x4(const std::vector<const uint32_t*>& cols, int64_t c, int64_t r, int64_t width,
                     uint32_t* dst, Store store) {
  auto col = [&](int64_t k) {
    return reinterpret_cast<const float*>(cols[static_cast<size_t>(c + k)]) + r;
  };
  __m128 x0 = _mm_loadu_ps(col(0)), x1 = _mm_loadu_ps(col(1));
  __m128 x2 = _mm_loadu_ps(col(2)), x3 = _mm_loadu_ps(col(3));
  _MM_TRANSPOSE4_PS(x0, x1, x2, x3);
  auto* out = reinterpret_cast<float*>(dst + r * width + c);
  store(out, x0);
  store(out + width, x1);
  store(out + 2 * width, x2);
  store(out + 3 * width, x3);
}

}  // namespace

// Columns of 4-byte values, rows [r0, r1) -> row-major: 4x4 blocks, the
// edges one value at a time.
void Transpose4Byte(const std::vector<const uint32_t*>& cols, int64_t r0, int64_t r1, int64_t width,
                    uint32_t* dst) {
  const auto w = static_cast<int64_t>(cols.size());
  const auto store = [](float* p, __m128 v) { _mm_storeu_ps(p, v); };
  int64_t c = 0;
  for (; c + 4 <= w; c += 4) {
    int64_t r = r0;
    for (; r + 4 <= r1; r += 4) Block4x4(cols, c, r, width, dst, store);
    for (; r < r1; ++r) {
      for (int64_t k = 0; k < 4; ++k) {
        dst[r * width + c + k] = cols[static_cast<size_t>(c + k)][r];
      }
    }
  }
  for (; c < w; ++c) {
    for (int64_t r = r0; r < r1; ++r) dst[r * width + c] = cols[static_cast<size_t>(c)][r];
  }
}

// The same for a few columns (a fused stack's 16 at a time) into a matrix
// larger than the caches: four rows at a time, each row's segment written
// whole with non-temporal stores, so its lines are not read from memory
// before being overwritten (16 of 256 float32 columns, 68,750 rows, one core:
// 6.2 GB/s against 4.7 for the tiled kernel).  dst and width * 4 must be
// 16-byte aligned.
void Transpose4ByteStreaming(const std::vector<const uint32_t*>& cols, int64_t rows, int64_t width,
                             uint32_t* dst) {
  const auto w = static_cast<int64_t>(cols.size());
  const auto stream = [](float* p, __m128 v) { _mm_stream_ps(p, v); };
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    int64_t c = 0;
    for (; c + 4 <= w; c += 4) Block4x4(cols, c, r, width, dst, stream);
    for (; c < w; ++c) {
      for (int64_t k = 0; k < 4; ++k)
        dst[(r + k) * width + c] = cols[static_cast<size_t>(c)][r + k];
    }
  }
  _mm_sfence();  // the streamed stores are visible before the matrix is handed on
  for (; r < rows; ++r) {
    for (int64_t c = 0; c < w; ++c) dst[r * width + c] = cols[static_cast<size_t>(c)][r];
  }
}
#endif

arrow::Status TransposeStack(const Layout& layout, const OutputPlan& plan,
                             const std::vector<DecodedColumn>& columns, int64_t rows, uint8_t* out,
                             size_t first, size_t last, int64_t matrix_rows) {
  if (matrix_rows < 0) matrix_rows = rows;
  // 16 rows: the tile's output (16 rows of the matrix) is contiguous and
  // stays in L1 while the columns are read, each source line whole (256 rows
  // wrote 1 KB-strided rows, which share a few L1 sets: 4.3 against 5.2 GB/s
  // for 68,750 x 256 float32 into reused memory, one core).
  constexpr int64_t kTileRows = 16;
  last = std::min(last, plan.sources.size());
  if (first >= last) return arrow::Status::OK();
#if defined(__SSE2__)
  bool same = DTypeSize(plan.matrix_dtype) == 4;
  for (size_t c = first; c < last; ++c) {
    same = same && layout.field_dtypes[static_cast<size_t>(plan.sources[c])] == plan.matrix_dtype;
  }
  if (same) {
    std::vector<const uint32_t*> cols;
    for (size_t c = first; c < last; ++c) {
      cols.push_back(
          reinterpret_cast<const uint32_t*>(columns[static_cast<size_t>(plan.sources[c])].values));
    }
    // Members [first, last) are the columns from `first` on of each row.
    auto* dst = reinterpret_cast<uint32_t*>(out) + first;
    constexpr int64_t kStreamAbove = int64_t{8} << 20;  // bytes: past the caches
    // A fused stack's slab (kFusedColumns members) or narrower: the streaming kernel.
    if (last - first <= kFusedColumns && matrix_rows * plan.width * 4 >= kStreamAbove &&
        reinterpret_cast<uintptr_t>(dst) % 16 == 0 && plan.width % 4 == 0) {
      Transpose4ByteStreaming(cols, rows, plan.width, dst);
      return arrow::Status::OK();
    }
    for (int64_t r0 = 0; r0 < rows; r0 += kTileRows) {
      Transpose4Byte(cols, r0, std::min(rows, r0 + kTileRows), plan.width, dst);
    }
    return arrow::Status::OK();
  }
#endif
  VisitDType(plan.matrix_dtype, [&](auto d) {
    using Dst = decltype(d);
    auto* dst = reinterpret_cast<Dst*>(out);
    for (int64_t r0 = 0; r0 < rows; r0 += kTileRows) {
      const int64_t tile = std::min(kTileRows, rows - r0);
      for (size_t c = first; c < last; ++c) {
        const auto source = static_cast<size_t>(plan.sources[c]);
        VisitDType(layout.field_dtypes[source], [&](auto s) {
          using Src = decltype(s);
          TransposeColumn<Src, Dst>(columns[source].values + r0 * sizeof(Src), tile, plan.width,
                                    static_cast<int64_t>(c), dst + r0 * plan.width);
        });
      }
    }
  });
  return arrow::Status::OK();
}

arrow::Result<std::shared_ptr<Batch>> Assemble(const Layout& layout, const GatherInput& in,
                                               int64_t batch_index,
                                               const std::shared_ptr<OutputArena>& arena,
                                               const AssembleLimits& limits) {
  auto batch = std::make_shared<Batch>();
  batch->index = batch_index;
  const auto n = static_cast<int64_t>(in.slot.size());
  batch->num_rows = n;
  for (const auto& plan : layout.outputs) {
    switch (plan.kind) {
      case OutputKind::kScalar: {
        ARROW_ASSIGN_OR_RAISE(auto buffer, NewBuffer(n, plan.dtype, plan.name, batch_index, arena));
        VisitDType(plan.dtype, [&](auto t) {
          using T = decltype(t);
          GatherStrided<T, T>(in, plan.sources[0], buffer->As<T>(), 1);
        });
        batch->arrays.push_back({plan.name, plan.dtype, {n}, buffer});
        break;
      }
      case OutputKind::kStack: {
        ARROW_ASSIGN_OR_RAISE(auto buffer,
                              NewBuffer(n * plan.width, plan.dtype, plan.name, batch_index, arena));
        const size_t output = static_cast<size_t>(&plan - layout.outputs.data());
        GatherRows(in, output, static_cast<size_t>(plan.width) * DTypeSize(plan.dtype),
                   buffer->data());
        batch->arrays.push_back({plan.name, plan.dtype, {n, plan.width}, buffer});
        break;
      }
      case OutputKind::kFixedList: {
        ARROW_ASSIGN_OR_RAISE(auto buffer,
                              NewBuffer(n * plan.width, plan.dtype, plan.name, batch_index, arena));
        GatherFixedList(in, plan, buffer->data());
        std::vector<int64_t> shape{n, plan.width};
        if (!plan.inner_shape.empty()) {
          shape.resize(1);
          shape.insert(shape.end(), plan.inner_shape.begin(), plan.inner_shape.end());
        }
        batch->arrays.push_back({plan.name, plan.dtype, std::move(shape), buffer});
        break;
      }
      case OutputKind::kList:
        ARROW_RETURN_NOT_OK(GatherList(in, plan, batch.get(), arena, limits));
        break;
      case OutputKind::kSampleId: {
        ARROW_ASSIGN_OR_RAISE(auto buffer,
                              NewBuffer(n, DType::kInt64, plan.name, batch_index, arena));
        auto* ids = buffer->As<int64_t>();
        for (int64_t i = 0; i < n; ++i) {
          // The natural-order id: with a filter, of the row the slot kept.
          const auto& slot = *in.slots[static_cast<size_t>(in.slot[static_cast<size_t>(i)])];
          const int64_t row = in.row[static_cast<size_t>(i)];
          ids[i] = slot.first_row + (slot.rows ? (*slot.rows)[static_cast<size_t>(row)] : row);
        }
        batch->arrays.push_back({plan.name, DType::kInt64, {n}, buffer});
        break;
      }
    }
  }
  return batch;
}

}  // namespace shardfeed
