#include "transform/transform.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <limits>
#include <numbers>
#include <sstream>
#include <type_traits>

#include "shardfeed/rng.h"
#include "shardfeed/status.h"
#include "transform/vocabulary.h"
#include "util/dtype_dispatch.h"
#include "util/number_text.h"

namespace shardfeed {

namespace {

struct OpName {
  TransformOp op;
  const char* name;
};
constexpr OpName kOps[] = {
    {TransformOp::kCast, "Cast"},
    {TransformOp::kFillNull, "FillNull"},
    {TransformOp::kClip, "Clip"},
    {TransformOp::kStandardize, "Standardize"},
    {TransformOp::kLog1p, "Log1p"},
    {TransformOp::kHashBucket, "HashBucket"},
    {TransformOp::kBucketize, "Bucketize"},
    {TransformOp::kGaussianNoise, "GaussianNoise"},
    {TransformOp::kRandomMask, "RandomMask"},
    {TransformOp::kRandomCrop, "RandomCrop"},
    {TransformOp::kVocabulary, "Vocabulary"},
};

bool IsFloat(DType t) { return t == DType::kFloat32 || t == DType::kFloat64; }
bool IsInteger(DType t) { return !IsFloat(t) && t != DType::kFloat16 && t != DType::kBool; }

uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// Calls f(i, value&) for every element, as double, writing the result back.
template <typename F>
arrow::Status MapValues(DecodedColumn* c, F&& f) {
  ARROW_ASSIGN_OR_RAISE(uint8_t * values, MutableValues(c));
  VisitDType(c->dtype, [&](auto t) {
    using T = decltype(t);
    auto* typed = reinterpret_cast<T*>(values);
    for (int64_t i = 0; i < c->count; ++i)
      typed[i] = static_cast<T>(f(i, static_cast<double>(typed[i])));
  });
  return arrow::Status::OK();
}

// Calls f(rng, element index) for every element of every row, with the row's
// own random stream.
template <typename F>
void ForEachRowElement(const DecodedColumn& c, const RandomKey& key, size_t position,
                       int64_t first_row, const std::vector<int64_t>* selected, int64_t rows,
                       F&& f) {
  const uint64_t purpose = static_cast<uint64_t>(Purpose::kTransformBase) + position;
  for (int64_t r = 0; r < rows; ++r) {
    CounterRng rng(key.seed, key.epoch, purpose, RowId(first_row, selected, r));
    int64_t begin = r, end = r + 1;
    if (c.list_size > 0) {
      begin = r * c.list_size;
      end = begin + c.list_size;
    } else if (!c.list_lengths.empty()) {
      begin = c.list_starts[static_cast<size_t>(r)];
      end = begin + c.list_lengths[static_cast<size_t>(r)];
    }
    for (int64_t i = begin; i < end; ++i) f(rng, i);
  }
}

}  // namespace

arrow::Status CheckFillValue(double value, DType dtype, const std::string& what) {
  std::ostringstream shown;
  shown.precision(17);
  if (std::trunc(value) == value && std::fabs(value) < 1e21) {
    shown << std::fixed << std::setprecision(0);  // 9223372036854775808, not 9.2e+18
  }
  shown << value;
  auto fail = [&](const std::string& why) {
    return Error(ErrorKind::kInvalidArgument, what + ": fill value " + shown.str() + " " + why);
  };
  if (dtype == DType::kBool) {
    if (value == 0 || value == 1) return arrow::Status::OK();
    return fail("is not a bool (0, 1, True or False)");
  }
  if (std::isnan(value)) {
    if (IsFloat(dtype) || dtype == DType::kFloat16) return arrow::Status::OK();
    return fail(std::string("(NaN) is not a value of ") + DTypeName(dtype));
  }
  if (dtype == DType::kFloat16) {
    if (std::isinf(value) || std::fabs(value) <= 65504.0) return arrow::Status::OK();
    return fail("is out of the range of float16");
  }
  return VisitDType(dtype, [&](auto z) -> arrow::Status {
    using T = decltype(z);
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isinf(value) || std::fabs(value) <= std::numeric_limits<T>::max()) {
        return arrow::Status::OK();
      }
      return fail(std::string("is out of the range of ") + DTypeName(dtype));
    } else {
      if (value != std::trunc(value)) {
        return fail(std::string("is not an integer, so ") + DTypeName(dtype) +
                    " cannot hold it exactly");
      }
      // 2^63 and 2^64 are exact doubles: the bounds compare without rounding.
      const double lo = static_cast<double>(std::numeric_limits<T>::lowest());
      const double hi_exclusive = std::ldexp(1.0, std::numeric_limits<T>::digits);
      if (value < lo || value >= hi_exclusive) {
        return fail(std::string("is out of the range of ") + DTypeName(dtype) + " [" +
                    std::to_string(std::numeric_limits<T>::lowest()) + ", " +
                    std::to_string(std::numeric_limits<T>::max()) + "]");
      }
      return arrow::Status::OK();
    }
  });
}

arrow::Result<TransformOp> ParseTransformOp(const std::string& name) {
  for (const auto& op : kOps) {
    if (name == op.name) return op.op;
  }
  return Error(ErrorKind::kInvalidArgument, "unknown transform '" + name + "'");
}

const char* TransformOpName(TransformOp op) {
  for (const auto& o : kOps) {
    if (o.op == op) return o.name;
  }
  return "?";
}

bool IsRandom(TransformOp op) {
  return op == TransformOp::kGaussianNoise || op == TransformOp::kRandomMask ||
         op == TransformOp::kRandomCrop;
}

arrow::Result<DType> TransformedType(const TransformSpec& t, DType in, ColumnShape shape,
                                     bool from_strings, const std::string* what_override) {
  const std::string what =
      what_override ? *what_override
                    : std::string(TransformOpName(t.op)) + " on column '" + t.column + "'";
  auto invalid = [&](const std::string& why) {
    return Error(ErrorKind::kInvalidArgument, what + ": " + why);
  };
  auto unsupported = [&](const std::string& why) {
    return Error(ErrorKind::kUnsupportedType, what + ": " + why);
  };
  const bool takes_strings = t.op == TransformOp::kHashBucket || t.op == TransformOp::kVocabulary;
  if (from_strings && !takes_strings) {
    return unsupported("a string column must first go through HashBucket or Vocabulary");
  }
  if (!from_strings && t.op == TransformOp::kVocabulary) {
    return unsupported(std::string("needs a string column (as its first transform), not ") +
                       DTypeName(in));
  }
  if (in == DType::kFloat16 && t.op != TransformOp::kFillNull) {
    return unsupported("float16 columns take no transform but FillNull");
  }
  switch (t.op) {
    case TransformOp::kCast:
      if (t.dtype == DType::kFloat16) return unsupported("cannot cast to float16");
      return t.dtype;
    case TransformOp::kFillNull:
      ARROW_RETURN_NOT_OK(CheckFillValue(t.a, in, what));
      return in;
    case TransformOp::kClip: {
      if (std::isnan(t.a) || std::isnan(t.b)) return invalid("bounds must not be NaN");
      if (t.a > t.b) return invalid("min > max");
      if (!IsInteger(in) && in != DType::kBool) return in;
      // An integer (or bool) column: some value of its type must lie in
      // [min, max], or every value would be clamped to one outside it.  The
      // type's values are [least, top): top is exact in a double (2^63 for
      // int64), where the largest value is not.
      const auto [least, top] =
          in == DType::kBool ? std::pair(0.0, 2.0) : VisitDType(in, [](auto z) {
            using T = decltype(z);
            return std::pair(static_cast<double>(std::numeric_limits<T>::min()),
                             std::ldexp(1.0, std::numeric_limits<T>::digits));
          });
      const double lo = std::ceil(t.a), hi = std::floor(t.b);
      if (lo > hi || lo >= top || hi < least) {
        return invalid(std::string("[")
                           .append(NumberText(t.a))
                           .append(", ")
                           .append(NumberText(t.b))
                           .append("] holds no ")
                           .append(DTypeName(in))
                           .append(" value"));
      }
      return in;
    }
    case TransformOp::kStandardize:
      if (!std::isfinite(t.b))
        return invalid(std::string("std must be finite, got ").append(NumberText(t.b)));
      if (!(t.b > 0)) return invalid("std must be > 0");
      // A subnormal std puts every value past float64's range, or near it.
      if (t.b < std::numeric_limits<double>::min()) {
        return invalid(std::string("std must be at least 2.2e-308, got ").append(NumberText(t.b)));
      }
      if (!std::isfinite(t.a)) return invalid("mean must be finite");
      return FloatOf(in);
    case TransformOp::kLog1p:
      return FloatOf(in);
    case TransformOp::kHashBucket:
      if (t.n < 1) return invalid("num_buckets must be >= 1");
      if (!from_strings && !IsInteger(in)) {
        return unsupported(std::string("needs integer or string ids, not ") + DTypeName(in));
      }
      return DType::kInt64;
    case TransformOp::kBucketize:
      if (t.boundaries.empty()) return invalid("boundaries must not be empty");
      for (size_t i = 0; i < t.boundaries.size(); ++i) {
        if (std::isnan(t.boundaries[i])) return invalid("boundaries must not be NaN");
        if (i > 0 && !(t.boundaries[i] > t.boundaries[i - 1])) {
          return invalid("boundaries must be strictly increasing");
        }
      }
      return DType::kInt64;
    case TransformOp::kGaussianNoise:
      if (!std::isfinite(t.a))
        return invalid(std::string("std must be finite, got ").append(NumberText(t.a)));
      if (!(t.a >= 0)) return invalid("std must be >= 0");
      return FloatOf(in);
    case TransformOp::kRandomMask:
      if (!(t.a >= 0 && t.a <= 1)) return invalid("probability must be in [0, 1]");
      // The mask value is written into the column's own type, as FillNull's is.
      ARROW_RETURN_NOT_OK(CheckFillValue(t.b, in, what));
      return in;
    case TransformOp::kRandomCrop:
      if (shape != ColumnShape::kList) return unsupported("needs a variable-length list column");
      if (t.n < 1) return invalid("length must be >= 1");
      return in;
    case TransformOp::kVocabulary:
      if (!t.vocabulary) return invalid("no values");
      return DType::kInt64;
  }
  return invalid("unknown transform");
}

namespace {

// Clip in the column's own type, so 64-bit integers keep every bit.
// Bucketize of integers, compared as integers (through float64, values past
// 2^53 would round): a boundary b is <= an integer v exactly when ceil(b) is.
// Bucket indices replace the values in int64 (uint64 in place: converting it
// to int64 first would wrap the values past 2^63).
template <typename T>
void BucketizeAs(const std::vector<double>& boundaries, T* values, int64_t count) {
  std::vector<T> thresholds;  // non-decreasing: strictly increasing b, ceil(b)
  for (double b : boundaries) {
    const double c = std::ceil(b);
    if (c <= static_cast<double>(std::numeric_limits<T>::min())) {
      thresholds.push_back(std::numeric_limits<T>::min());  // <= every value
    } else if (c >= std::ldexp(1.0, std::numeric_limits<T>::digits)) {
      break;  // above every value, as every later boundary is
    } else {
      thresholds.push_back(static_cast<T>(c));
    }
  }
  auto* out = reinterpret_cast<int64_t*>(values);
  static_assert(sizeof(T) == sizeof(int64_t));
  for (int64_t i = 0; i < count; ++i) {
    out[i] = std::upper_bound(thresholds.begin(), thresholds.end(), values[i]) - thresholds.begin();
  }
}

arrow::Status BucketizeIntegers(const std::vector<double>& boundaries, DecodedColumn* c) {
  if (c->dtype != DType::kUInt64) ARROW_RETURN_NOT_OK(ConvertValues(c, DType::kInt64));
  ARROW_ASSIGN_OR_RAISE(uint8_t * values, MutableValues(c));
  if (c->dtype == DType::kUInt64) {
    BucketizeAs(boundaries, reinterpret_cast<uint64_t*>(values), c->count);
  } else {
    BucketizeAs(boundaries, reinterpret_cast<int64_t*>(values), c->count);
  }
  c->dtype = DType::kInt64;
  return arrow::Status::OK();
}

arrow::Status ClipValues(const TransformSpec& t, DecodedColumn* c) {
  ARROW_ASSIGN_OR_RAISE(uint8_t * values, MutableValues(c));
  VisitDType(c->dtype, [&](auto z) {
    using T = decltype(z);
    const auto [lo, hi] = ClipBounds<T>(t.a, t.b);
    auto* typed = reinterpret_cast<T*>(values);
    for (int64_t i = 0; i < c->count; ++i) typed[i] = std::clamp(typed[i], lo, hi);
  });
  return arrow::Status::OK();
}

arrow::Status AddGaussianNoise(const TransformSpec& t, size_t position, const RandomKey& key,
                               int64_t first_row, int64_t rows, DecodedColumn* c,
                               const std::vector<int64_t>* selected) {
  ARROW_ASSIGN_OR_RAISE(const DType deliver, BeginFloatMath(c));
  ARROW_ASSIGN_OR_RAISE(uint8_t * values, MutableValues(c));
  VisitDType(c->dtype, [&](auto z) {
    using T = decltype(z);
    auto* typed = reinterpret_cast<T*>(values);
    // Box-Muller: each pair of uniforms gives two normals (cos and sin), used
    // for consecutive elements of a row; the row's stream is its own.
    double spare = 0;
    bool have_spare = false;
    int64_t row_of_spare = -1;
    ForEachRowElement(
        *c, key, position, first_row, selected, rows, [&](CounterRng& rng, int64_t i) {
          const auto row = static_cast<int64_t>(rng.id());
          if (have_spare && row_of_spare == row) {
            typed[i] = static_cast<T>(static_cast<double>(typed[i]) + t.a * spare);
            have_spare = false;
            return;
          }
          // (t.a * radius) * cos(angle): kept in this order, so that the
          // values stay bit for bit those of earlier versions.
          const double u1 = 1.0 - rng.Uniform(), u2 = rng.Uniform();
          const double radius = std::sqrt(-2.0 * std::log(u1));
          const double angle = 2 * std::numbers::pi * u2;
          typed[i] = static_cast<T>(static_cast<double>(typed[i]) + t.a * radius * std::cos(angle));
          spare = radius * std::sin(angle);
          have_spare = true;
          row_of_spare = row;
        });
  });
  return ConvertValues(c, deliver);
}

void RandomCrop(const TransformSpec& t, size_t position, const RandomKey& key, int64_t first_row,
                int64_t rows, DecodedColumn* c, const std::vector<int64_t>* selected) {
  const uint64_t purpose = static_cast<uint64_t>(Purpose::kTransformBase) + position;
  for (int64_t r = 0; r < rows; ++r) {
    auto& len = c->list_lengths[static_cast<size_t>(r)];
    if (len <= t.n) continue;
    CounterRng rng(key.seed, key.epoch, purpose, RowId(first_row, selected, r));
    const auto offset = static_cast<int64_t>(rng.Bounded(static_cast<uint64_t>(len - t.n + 1)));
    c->list_starts[static_cast<size_t>(r)] += offset;
    len = t.n;
  }
}

}  // namespace

arrow::Status ApplyTransform(const TransformSpec& t, size_t position, const RandomKey& key,
                             int64_t first_row, int64_t rows, DecodedColumn* c,
                             const std::vector<int64_t>* selected) {
  switch (t.op) {
    case TransformOp::kCast:
      return CastValues(c, t.dtype);
    case TransformOp::kFillNull:
      return FillNullValues(c, t.a);
    case TransformOp::kClip:
      return ClipValues(t, c);
    case TransformOp::kStandardize: {
      ARROW_ASSIGN_OR_RAISE(const DType deliver, BeginFloatMath(c));
      ARROW_RETURN_NOT_OK(MapValues(c, [&](int64_t, double v) { return (v - t.a) / t.b; }));
      return ConvertValues(c, deliver);
    }
    case TransformOp::kLog1p: {
      ARROW_ASSIGN_OR_RAISE(const DType deliver, BeginFloatMath(c));
      ARROW_RETURN_NOT_OK(MapValues(c, [&](int64_t, double v) { return std::log1p(v); }));
      return ConvertValues(c, deliver);
    }
    case TransformOp::kHashBucket: {
      const auto n = static_cast<uint64_t>(t.n);
      if (!c->from_strings) {
        // Integer ids: splitmix64 of the id's two's-complement bits.
        ARROW_RETURN_NOT_OK(ConvertValues(c, DType::kInt64));
      }
      ARROW_ASSIGN_OR_RAISE(uint8_t * values, MutableValues(c));
      auto* typed = reinterpret_cast<uint64_t*>(values);
      for (int64_t i = 0; i < c->count; ++i) {
        const uint64_t h = c->from_strings ? typed[i] : SplitMix64(typed[i]);
        typed[i] = h % n;
      }
      c->dtype = DType::kInt64;
      c->from_strings = false;
      return arrow::Status::OK();
    }
    case TransformOp::kBucketize: {
      if (IsInteger(c->dtype)) return BucketizeIntegers(t.boundaries, c);
      ARROW_RETURN_NOT_OK(ConvertValues(c, DType::kFloat64));
      ARROW_RETURN_NOT_OK(MapValues(c, [&](int64_t, double v) {
        return static_cast<double>(std::upper_bound(t.boundaries.begin(), t.boundaries.end(), v) -
                                   t.boundaries.begin());
      }));
      return ConvertValues(c, DType::kInt64);
    }
    case TransformOp::kGaussianNoise:
      return AddGaussianNoise(t, position, key, first_row, rows, c, selected);
    case TransformOp::kRandomMask: {
      std::vector<uint8_t> mask(static_cast<size_t>(c->count), 0);
      ForEachRowElement(*c, key, position, first_row, selected, rows,
                        [&](CounterRng& rng, int64_t i) {
                          mask[static_cast<size_t>(i)] = rng.Uniform() < t.a ? 1 : 0;
                        });
      // In the column's own type: a value not masked keeps every bit (through
      // double, int64 values above 2^53 rounded).
      ARROW_ASSIGN_OR_RAISE(uint8_t * values, MutableValues(c));
      VisitDType(c->dtype, [&](auto z) {
        using T = decltype(z);
        const T fill = static_cast<T>(t.b);  // checked: it fits (TransformedType)
        auto* typed = reinterpret_cast<T*>(values);
        for (int64_t i = 0; i < c->count; ++i) {
          if (mask[static_cast<size_t>(i)]) typed[i] = fill;
        }
      });
      return arrow::Status::OK();
    }
    case TransformOp::kVocabulary:
      return ApplyVocabulary(t, c);
    case TransformOp::kRandomCrop:
      RandomCrop(t, position, key, first_row, rows, c, selected);
      return arrow::Status::OK();
  }
  return Error(ErrorKind::kInvalidArgument, "unknown transform");
}

}  // namespace shardfeed
