// Dispatch on DType to the C++ storage type (internal).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include <arrow/util/float16.h>

#include "shardfeed/batch.h"

namespace shardfeed {

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

// double -> T without undefined behaviour: integers truncate and saturate, NaN -> 0.
template <typename T>
T SaturatingCast(double v) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else {
    if (std::isnan(v)) return T{0};
    if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) {
      return std::numeric_limits<T>::lowest();
    }
    if (v >= static_cast<double>(std::numeric_limits<T>::max())) {
      return std::numeric_limits<T>::max();
    }
    return static_cast<T>(v);
  }
}

// `v` as a value of `dtype` in its storage type T (VisitDType's): a bool 0 or 1,
// a float16 its bits (a plain cast would store the number as bits: 1.0 as
// 0x0001), anything else SaturatingCast.
template <typename T>
T StoredValue(DType dtype, double v) {
  if (dtype == DType::kBool) return T(v != 0 ? 1 : 0);
  if constexpr (std::is_same_v<T, uint16_t>) {
    if (dtype == DType::kFloat16) return arrow::util::Float16(static_cast<float>(v)).bits();
  }
  return SaturatingCast<T>(v);
}

}  // namespace shardfeed
