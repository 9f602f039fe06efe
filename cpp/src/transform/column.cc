#include "transform/column.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include <arrow/buffer.h>

#include "util/dtype_dispatch.h"
#include "util/memory.h"

namespace shardfeed {

arrow::Result<uint8_t*> MutableValues(DecodedColumn* c) {
  if (!c->owned || !c->owned->is_mutable()) {
    const auto bytes = static_cast<int64_t>(static_cast<size_t>(c->count) * DTypeSize(c->dtype));
    ARROW_ASSIGN_OR_RAISE(std::shared_ptr<arrow::Buffer> copy,
                          arrow::AllocateBuffer(std::max<int64_t>(bytes, 1), EnginePool()));
    if (bytes > 0) std::memcpy(copy->mutable_data(), c->values, static_cast<size_t>(bytes));
    c->owned = std::move(copy);
    c->values = c->owned->data();
  }
  return c->owned->mutable_data();
}

namespace {

// An integer as another integer type, saturated at its range (no wrap: 300 as int8 is 127).
template <typename Dst, typename Src>
Dst SaturatingIntegerCast(Src v) {
  using Limits = std::numeric_limits<Dst>;
  if (std::cmp_less(v, Limits::lowest())) return Limits::lowest();
  if (std::cmp_greater(v, Limits::max())) return Limits::max();
  return static_cast<Dst>(v);
}

arrow::Status Convert(DecodedColumn* c, DType to, bool saturate) {
  if (to == c->dtype) return arrow::Status::OK();
  const auto bytes = static_cast<int64_t>(static_cast<size_t>(c->count) * DTypeSize(to));
  ARROW_ASSIGN_OR_RAISE(std::shared_ptr<arrow::Buffer> out,
                        arrow::AllocateBuffer(std::max<int64_t>(bytes, 1), EnginePool()));
  VisitDType(c->dtype, [&](auto s) {
    using Src = decltype(s);
    VisitDType(to, [&](auto d) {
      using Dst = decltype(d);
      const auto* src = reinterpret_cast<const Src*>(c->values);
      auto* dst = reinterpret_cast<Dst*>(out->mutable_data());
      for (int64_t i = 0; i < c->count; ++i) {
        if (to == DType::kBool) {
          dst[i] = src[i] != Src{0} ? 1 : 0;
        } else if constexpr (std::is_floating_point_v<Src> && std::is_integral_v<Dst>) {
          // Float to integer: truncate, saturate at the type's range, NaN -> 0.
          dst[i] = SaturatingCast<Dst>(static_cast<double>(src[i]));
        } else if constexpr (std::is_integral_v<Src> && std::is_integral_v<Dst>) {
          dst[i] = saturate && c->dtype != DType::kBool ? SaturatingIntegerCast<Dst>(src[i])
                                                        : static_cast<Dst>(src[i]);
        } else {
          dst[i] = static_cast<Dst>(src[i]);
        }
      }
    });
  });
  c->owned = std::move(out);
  c->values = c->owned->data();
  c->dtype = to;
  return arrow::Status::OK();
}

}  // namespace

arrow::Status ConvertValues(DecodedColumn* c, DType to) { return Convert(c, to, false); }

arrow::Status CastValues(DecodedColumn* c, DType to) { return Convert(c, to, true); }

arrow::Result<DType> BeginFloatMath(DecodedColumn* c) {
  const bool is_float = c->dtype == DType::kFloat32 || c->dtype == DType::kFloat64;
  const DType deliver = c->dtype == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
  ARROW_RETURN_NOT_OK(ConvertValues(c, is_float ? c->dtype : DType::kFloat64));
  return deliver;
}

arrow::Status FillNullValues(DecodedColumn* c, double value) {
  if (!c->has_nulls()) return arrow::Status::OK();
  ARROW_ASSIGN_OR_RAISE(uint8_t * values, MutableValues(c));
  VisitDType(c->dtype, [&](auto t) {
    using T = decltype(t);
    auto* typed = reinterpret_cast<T*>(values);
    const T fill = StoredValue<T>(c->dtype, value);
    for (int64_t i = 0; i < c->count; ++i) {
      if (c->nulls[static_cast<size_t>(i)]) typed[i] = fill;
    }
  });
  c->nulls.clear();
  return arrow::Status::OK();
}

}  // namespace shardfeed
