#include "transform/stack.h"

#include <cmath>

#include "shardfeed/rng.h"
#include "shardfeed/status.h"
#include "transform/normal.h"
#include "util/dtype_dispatch.h"

namespace shardfeed {

namespace {

bool TakesSettings(TransformOp op) {
  switch (op) {
    case TransformOp::kFillNull:
    case TransformOp::kClip:
    case TransformOp::kStandardize:
    case TransformOp::kGaussianNoise:
    case TransformOp::kRandomMask:
      return true;
    default:
      return false;
  }
}

std::string What(const TransformSpec& t, const std::string& stack) {
  return std::string(TransformOpName(t.op)) + " on stack '" + stack + "'";
}

// Checks the lengths of the per-feature settings.
arrow::Status CheckLengths(const TransformSpec& t, const std::string& stack, size_t features) {
  for (const auto* values : {&t.a_values, &t.b_values}) {
    if (values->empty()) continue;
    if (!TakesSettings(t.op)) {
      return Error(ErrorKind::kInvalidArgument, What(t, stack) + ": takes no per-feature settings");
    }
    if (values->size() != features) {
      return Error(ErrorKind::kInvalidArgument, What(t, stack) + ": per-feature settings have " +
                                                    std::to_string(values->size()) +
                                                    " values, the stack has " +
                                                    std::to_string(features) + " features");
    }
  }
  return arrow::Status::OK();
}

// Transform `t` with feature j's settings as its scalar ones.
TransformSpec ForFeature(const TransformSpec& t, size_t j) {
  TransformSpec one;
  one.op = t.op;
  one.column = t.column;
  one.a = t.a_values.empty() ? t.a : t.a_values[j];
  one.b = t.b_values.empty() ? t.b : t.b_values[j];
  one.n = t.n;
  one.dtype = t.dtype;
  return one;
}

// Feature j's setting, for every j.
std::vector<double> PerFeature(const std::vector<double>& values, double scalar, int64_t width) {
  if (!values.empty()) return values;
  return std::vector<double>(static_cast<size_t>(width), scalar);
}

arrow::Status Standardize(const TransformSpec& t, DecodedColumn* m) {
  ARROW_ASSIGN_OR_RAISE(const DType deliver, BeginFloatMath(m));
  ARROW_ASSIGN_OR_RAISE(uint8_t * values, MutableValues(m));
  const int64_t width = m->list_size;
  const auto mean = PerFeature(t.a_values, t.a, width);
  // Divides, as the column transform does, so both give the same values.
  const auto sigma = PerFeature(t.b_values, t.b, width);
  VisitDType(m->dtype, [&](auto z) {
    using T = decltype(z);
    if constexpr (std::is_floating_point_v<T>) {
      auto* x = reinterpret_cast<T*>(values);
      for (int64_t i = 0; i < m->count; i += width) {
        for (int64_t j = 0; j < width; ++j) {
          x[i + j] = static_cast<T>((static_cast<double>(x[i + j]) - mean[j]) / sigma[j]);
        }
      }
    }
  });
  return ConvertValues(m, deliver);
}

arrow::Status Clip(const TransformSpec& t, DecodedColumn* m) {
  ARROW_ASSIGN_OR_RAISE(uint8_t * values, MutableValues(m));
  const int64_t width = m->list_size;
  const auto min = PerFeature(t.a_values, t.a, width);
  const auto max = PerFeature(t.b_values, t.b, width);
  VisitDType(m->dtype, [&](auto z) {
    using T = decltype(z);
    std::vector<T> lo(static_cast<size_t>(width)), hi(static_cast<size_t>(width));
    for (size_t j = 0; j < lo.size(); ++j) std::tie(lo[j], hi[j]) = ClipBounds<T>(min[j], max[j]);
    auto* x = reinterpret_cast<T*>(values);
    for (int64_t i = 0; i < m->count; i += width) {
      for (int64_t j = 0; j < width; ++j) x[i + j] = std::clamp(x[i + j], lo[j], hi[j]);
    }
  });
  return arrow::Status::OK();
}

// Streams of rows [0, rows): f(rng, first element of the row).
template <typename F>
void ForEachRow(size_t position, const RandomKey& key, int64_t first_row,
                const std::vector<int64_t>* selected, int64_t rows, int64_t width, F&& f) {
  const uint64_t purpose = static_cast<uint64_t>(Purpose::kTransformBase) + position;
  for (int64_t r = 0; r < rows; ++r) {
    CounterRng rng(key.seed, key.epoch, purpose, RowId(first_row, selected, r));
    f(rng, r * width);
  }
}

arrow::Status GaussianNoise(const TransformSpec& t, size_t position, const RandomKey& key,
                            int64_t first_row, int64_t rows, DecodedColumn* m,
                            const std::vector<int64_t>* selected) {
  ARROW_ASSIGN_OR_RAISE(const DType deliver, BeginFloatMath(m));
  ARROW_ASSIGN_OR_RAISE(uint8_t * values, MutableValues(m));
  const int64_t width = m->list_size;
  const auto sigma = PerFeature(t.a_values, t.a, width);
  VisitDType(m->dtype, [&](auto z) {
    using T = decltype(z);
    if constexpr (std::is_floating_point_v<T>) {
      auto* x = reinterpret_cast<T*>(values);
      // Feature j takes the row's j-th normal.
      ForEachRow(position, key, first_row, selected, rows, width, [&](CounterRng& rng, int64_t i) {
        Bits32 bits(rng);
        for (int64_t j = 0; j < width; ++j) {
          x[i + j] =
              static_cast<T>(static_cast<double>(x[i + j]) + sigma[j] * StandardNormal(bits));
        }
      });
    }
  });
  return ConvertValues(m, deliver);
}

arrow::Status RandomMask(const TransformSpec& t, size_t position, const RandomKey& key,
                         int64_t first_row, int64_t rows, DecodedColumn* m,
                         const std::vector<int64_t>* selected) {
  ARROW_ASSIGN_OR_RAISE(uint8_t * values, MutableValues(m));
  const int64_t width = m->list_size;
  // Masked when a 32-bit draw is below probability * 2^32.
  std::vector<uint64_t> below(static_cast<size_t>(width));
  const auto probability = PerFeature(t.a_values, t.a, width);
  for (size_t j = 0; j < below.size(); ++j) {
    below[j] = static_cast<uint64_t>(std::ceil(std::ldexp(probability[j], 32)));
  }
  const auto fill = PerFeature(t.b_values, t.b, width);
  VisitDType(m->dtype, [&](auto z) {
    using T = decltype(z);
    std::vector<T> value(static_cast<size_t>(width));
    for (size_t j = 0; j < value.size(); ++j) {
      value[j] = StoredValue<T>(m->dtype, fill[j]);
    }
    auto* x = reinterpret_cast<T*>(values);
    // One draw per feature, masked or not, so feature j always takes draw j.
    ForEachRow(position, key, first_row, selected, rows, width, [&](CounterRng& rng, int64_t i) {
      Bits32 bits(rng);
      for (int64_t j = 0; j < width; ++j) {
        if (bits.Next() < below[j]) x[i + j] = value[j];
      }
    });
  });
  return arrow::Status::OK();
}

}  // namespace

arrow::Result<DType> StackTransformedType(const TransformSpec& t, DType in,
                                          const std::string& stack,
                                          const std::vector<std::string>& features) {
  ARROW_RETURN_NOT_OK(CheckLengths(t, stack, features.size()));
  const std::string what = What(t, stack);
  if (t.a_values.empty() && t.b_values.empty()) {
    return TransformedType(t, in, ColumnShape::kFixedList, false, &what);
  }
  DType out = in;
  for (size_t j = 0; j < features.size(); ++j) {
    const std::string feature =
        what + ", feature " + std::to_string(j) + " (column '" + features[j] + "')";
    ARROW_ASSIGN_OR_RAISE(
        out, TransformedType(ForFeature(t, j), in, ColumnShape::kFixedList, false, &feature));
  }
  return out;
}

arrow::Result<std::vector<double>> StackFillValues(const TransformSpec& t, DType dtype,
                                                   const std::string& stack,
                                                   const std::vector<std::string>& features) {
  ARROW_RETURN_NOT_OK(CheckLengths(t, stack, features.size()));
  const std::string what = What(t, stack);
  auto fill = PerFeature(t.a_values, t.a, static_cast<int64_t>(features.size()));
  for (size_t j = 0; j < features.size(); ++j) {
    ARROW_RETURN_NOT_OK(CheckFillValue(
        fill[j], dtype,
        what + ", feature " + std::to_string(j) + " (column '" + features[j] + "')"));
  }
  return fill;
}

arrow::Status ApplyStackTransform(const TransformSpec& t, size_t position, const RandomKey& key,
                                  int64_t first_row, int64_t rows, DecodedColumn* m,
                                  const std::vector<int64_t>* selected) {
  switch (t.op) {
    case TransformOp::kStandardize:
      return Standardize(t, m);
    case TransformOp::kClip:
      return Clip(t, m);
    case TransformOp::kGaussianNoise:
      return GaussianNoise(t, position, key, first_row, rows, m, selected);
    case TransformOp::kRandomMask:
      return RandomMask(t, position, key, first_row, rows, m, selected);
    default:
      // One setting for every element: the column transform does it.
      return ApplyTransform(t, position, key, first_row, rows, m, selected);
  }
}

}  // namespace shardfeed
