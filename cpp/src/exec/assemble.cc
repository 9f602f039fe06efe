#include "exec/assemble.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <string>

#include "shardfeed/status.h"

namespace shardfeed {

namespace {

// Calls f(T{}) with the C++ storage type of `t` (bool as uint8_t, float16 as its bits).
template <typename F>
decltype(auto) VisitDType(DType t, F&& f) {
  switch (t) {
    case DType::kBool:
    case DType::kUInt8:
      return f(uint8_t{});
    case DType::kInt8:
      return f(int8_t{});
    case DType::kInt16:
      return f(int16_t{});
    case DType::kInt32:
      return f(int32_t{});
    case DType::kInt64:
      return f(int64_t{});
    case DType::kUInt16:
    case DType::kFloat16:
      return f(uint16_t{});
    case DType::kUInt32:
      return f(uint32_t{});
    case DType::kUInt64:
      return f(uint64_t{});
    case DType::kFloat32:
      return f(float{});
    case DType::kFloat64:
      return f(double{});
  }
  return f(uint8_t{});
}

std::shared_ptr<OutputBuffer> NewBuffer(int64_t elements, DType dtype) {
  return std::make_shared<OutputBuffer>(static_cast<size_t>(elements) * DTypeSize(dtype));
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

// A stack whose columns all have storage type T: row-major writes, one sample at a time.
template <typename T>
void GatherUniformStack(const GatherInput& in, const std::vector<int>& sources, T* out) {
  const size_t width = sources.size();
  std::vector<const T*> base(in.slots.size() * width);
  for (size_t s = 0; s < in.slots.size(); ++s) {
    for (size_t c = 0; c < width; ++c) {
      base[s * width + c] =
          reinterpret_cast<const T*>(in.slots[s]->columns[static_cast<size_t>(sources[c])].values);
    }
  }
  const size_t n = in.slot.size();
  for (size_t i = 0; i < n; ++i) {
    const T* const* cols = &base[static_cast<size_t>(in.slot[i]) * width];
    const int64_t r = in.row[i];
    T* dst = out + i * width;
    for (size_t c = 0; c < width; ++c) dst[c] = cols[c][r];
  }
}

void GatherFixedList(const GatherInput& in, const OutputPlan& plan, uint8_t* out) {
  const size_t bytes = static_cast<size_t>(plan.width) * DTypeSize(plan.dtype);
  for (size_t i = 0; i < in.slot.size(); ++i) {
    const auto& column =
        in.slots[static_cast<size_t>(in.slot[i])]->columns[static_cast<size_t>(plan.sources[0])];
    std::memcpy(out + i * bytes, column.values + static_cast<size_t>(in.row[i]) * bytes, bytes);
  }
}

void GatherList(const GatherInput& in, const OutputPlan& plan, Batch* batch) {
  const size_t n = in.slot.size();
  const size_t elem = DTypeSize(plan.dtype);
  auto lengths = NewBuffer(static_cast<int64_t>(n), DType::kInt64);
  auto* len = lengths->As<int64_t>();
  int64_t max_len = 0;
  for (size_t i = 0; i < n; ++i) {
    const auto& column =
        in.slots[static_cast<size_t>(in.slot[i])]->columns[static_cast<size_t>(plan.sources[0])];
    len[i] = column.list_lengths[static_cast<size_t>(in.row[i])];
    max_len = std::max(max_len, len[i]);
  }
  auto values = NewBuffer(static_cast<int64_t>(n) * max_len, plan.dtype);
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
}

}  // namespace

arrow::Result<std::shared_ptr<Batch>> Assemble(const Layout& layout, const GatherInput& in,
                                               int64_t batch_index) {
  auto batch = std::make_shared<Batch>();
  batch->index = batch_index;
  const auto n = static_cast<int64_t>(in.slot.size());
  batch->num_rows = n;
  try {
    for (const auto& plan : layout.outputs) {
      switch (plan.kind) {
        case OutputKind::kScalar: {
          auto buffer = NewBuffer(n, plan.dtype);
          VisitDType(plan.dtype, [&](auto t) {
            using T = decltype(t);
            GatherStrided<T, T>(in, plan.sources[0], buffer->As<T>(), 1);
          });
          batch->arrays.push_back({plan.name, plan.dtype, {n}, buffer});
          break;
        }
        case OutputKind::kStack: {
          auto buffer = NewBuffer(n * plan.width, plan.dtype);
          bool uniform = true;
          for (int source : plan.sources) {
            uniform &= layout.field_dtypes[static_cast<size_t>(source)] == plan.dtype;
          }
          if (uniform) {
            VisitDType(plan.dtype, [&](auto t) {
              using T = decltype(t);
              GatherUniformStack<T>(in, plan.sources, buffer->As<T>());
            });
          } else {
            VisitDType(plan.dtype, [&](auto d) {
              using Dst = decltype(d);
              for (size_t c = 0; c < plan.sources.size(); ++c) {
                const int source = plan.sources[c];
                VisitDType(layout.field_dtypes[static_cast<size_t>(source)], [&](auto s) {
                  using Src = decltype(s);
                  GatherStrided<Src, Dst>(in, source, buffer->As<Dst>() + c, plan.width);
                });
              }
            });
          }
          batch->arrays.push_back({plan.name, plan.dtype, {n, plan.width}, buffer});
          break;
        }
        case OutputKind::kFixedList: {
          auto buffer = NewBuffer(n * plan.width, plan.dtype);
          GatherFixedList(in, plan, buffer->data());
          batch->arrays.push_back({plan.name, plan.dtype, {n, plan.width}, buffer});
          break;
        }
        case OutputKind::kList:
          GatherList(in, plan, batch.get());
          break;
        case OutputKind::kSampleId: {
          auto buffer = NewBuffer(n, DType::kInt64);
          auto* ids = buffer->As<int64_t>();
          for (int64_t i = 0; i < n; ++i) {
            ids[i] = in.slots[static_cast<size_t>(in.slot[static_cast<size_t>(i)])]->first_row +
                     in.row[static_cast<size_t>(i)];
          }
          batch->arrays.push_back({plan.name, DType::kInt64, {n}, buffer});
          break;
        }
      }
    }
  } catch (const std::bad_alloc&) {
    return arrow::Status::OutOfMemory("cannot allocate batch ", batch_index);
  }
  return batch;
}

}  // namespace shardfeed
