// Type rules and execution of push-down transforms (internal).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <arrow/result.h>
#include <arrow/status.h>

#include "shardfeed/rng.h"
#include "shardfeed/transform.h"
#include "transform/column.h"

namespace shardfeed {

enum class ColumnShape { kScalar, kFixedList, kList };

// The element type after `t`, given the type before it; checks the settings.
// Every error names the transform and the column.
// `what` replaces "<Op> on column '<column>'" at the head of error messages.
arrow::Result<DType> TransformedType(const TransformSpec& t, DType in, ColumnShape shape,
                                     bool from_strings, const std::string* what = nullptr);

// Float transforms keep float64 and turn everything else into float32.
inline DType FloatOf(DType t) { return t == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32; }

// Clip's bounds in the type T: for integers the integers inside [min, max],
// saturated to T's range (so 64-bit integers keep every bit).
template <typename T>
std::pair<T, T> ClipBounds(double min, double max) {
  if constexpr (std::is_floating_point_v<T>) {
    return {static_cast<T>(min), static_cast<T>(max)};
  } else {
    auto inside = [](double v, bool up) {
      const double r = up ? std::ceil(v) : std::floor(v);
      if (r <= static_cast<double>(std::numeric_limits<T>::lowest())) {
        return std::numeric_limits<T>::lowest();
      }
      if (r >= static_cast<double>(std::numeric_limits<T>::max())) {
        return std::numeric_limits<T>::max();
      }
      return static_cast<T>(r);
    };
    const T lo = inside(min, true);
    return {lo, std::max(lo, inside(max, false))};
  }
}

// OK when `value` is a value of `dtype`: for integers an integer in range,
// for bool 0 or 1, for floats any number in range (rounded to the nearest)
// or NaN; else InvalidArgument "<what>: ...".
arrow::Status CheckFillValue(double value, DType dtype, const std::string& what);

struct RandomKey {
  uint64_t seed = 0;
  uint64_t epoch = 0;
};

// The natural-order id of row r (see ApplyTransform).
inline uint64_t RowId(int64_t first_row, const std::vector<int64_t>* selected, int64_t r) {
  return static_cast<uint64_t>(first_row + (selected ? (*selected)[static_cast<size_t>(r)] : r));
}

// Applies transform number `position` of the list to one row group's column.
// `first_row` is the natural-order id of row 0 (random transforms key on it);
// with `selected` (the rows a filter kept), row r's id is first_row + (*selected)[r],
// so a sample's augmentation does not depend on the filter.
arrow::Status ApplyTransform(const TransformSpec& t, size_t position, const RandomKey& key,
                             int64_t first_row, int64_t rows, DecodedColumn* column,
                             const std::vector<int64_t>* selected = nullptr);

}  // namespace shardfeed
