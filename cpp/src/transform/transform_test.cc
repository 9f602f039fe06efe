#include "transform/transform.h"

#include <cmath>
#include <cstring>
#include <vector>

#include <arrow/buffer.h>
#include <gtest/gtest.h>

#include "shardfeed/status.h"

namespace shardfeed {
namespace {

DecodedColumn FloatColumn(const std::vector<float>& values) {
  DecodedColumn c;
  c.dtype = DType::kFloat32;
  c.count = static_cast<int64_t>(values.size());
  c.owned = arrow::AllocateBuffer(static_cast<int64_t>(values.size() * 4)).ValueOrDie();
  std::memcpy(c.owned->mutable_data(), values.data(), values.size() * 4);
  c.values = c.owned->data();
  return c;
}

std::vector<float> Floats(const DecodedColumn& c) {
  const auto* v = reinterpret_cast<const float*>(c.values);
  return std::vector<float>(v, v + c.count);
}

TransformSpec Spec(TransformOp op, double a = 0, double b = 0, int64_t n = 0) {
  TransformSpec t;
  t.op = op;
  t.column = "x";
  t.a = a;
  t.b = b;
  t.n = n;
  return t;
}

TEST(Transform, TypeRulesAndSettingChecks) {
  EXPECT_EQ(*TransformedType(Spec(TransformOp::kStandardize, 0, 2), DType::kInt32,
                             ColumnShape::kScalar, false),
            DType::kFloat32);
  EXPECT_EQ(
      *TransformedType(Spec(TransformOp::kLog1p), DType::kFloat64, ColumnShape::kScalar, false),
      DType::kFloat64);
  EXPECT_EQ(*TransformedType(Spec(TransformOp::kHashBucket, 0, 0, 10), DType::kUInt64,
                             ColumnShape::kScalar, true),
            DType::kInt64);
  auto zero_std = TransformedType(Spec(TransformOp::kStandardize, 0, 0), DType::kFloat32,
                                  ColumnShape::kScalar, false);
  EXPECT_EQ(KindOf(zero_std.status()), ErrorKind::kInvalidArgument);
  EXPECT_NE(zero_std.status().message().find("column 'x'"), std::string::npos);
  auto crop = TransformedType(Spec(TransformOp::kRandomCrop, 0, 0, 3), DType::kFloat32,
                              ColumnShape::kScalar, false);
  EXPECT_EQ(KindOf(crop.status()), ErrorKind::kUnsupportedType);
  TransformSpec bucketize = Spec(TransformOp::kBucketize);
  bucketize.boundaries = {1, 1};
  EXPECT_FALSE(TransformedType(bucketize, DType::kFloat32, ColumnShape::kScalar, false).ok());
}

TEST(Transform, DeterministicOnesComputeTheirFormula) {
  auto c = FloatColumn({-2, 0, 3, 10});
  ASSERT_TRUE(ApplyTransform(Spec(TransformOp::kClip, -1, 5), 0, {}, 0, 4, &c).ok());
  EXPECT_EQ(Floats(c), (std::vector<float>{-1, 0, 3, 5}));
  ASSERT_TRUE(ApplyTransform(Spec(TransformOp::kStandardize, 1, 2), 1, {}, 0, 4, &c).ok());
  EXPECT_EQ(Floats(c), (std::vector<float>{-1, -0.5, 1, 2}));
  TransformSpec bucketize = Spec(TransformOp::kBucketize);
  bucketize.boundaries = {-0.5, 1};
  ASSERT_TRUE(ApplyTransform(bucketize, 2, {}, 0, 4, &c).ok());
  ASSERT_EQ(c.dtype, DType::kInt64);
  const auto* ids = reinterpret_cast<const int64_t*>(c.values);
  EXPECT_EQ(std::vector<int64_t>(ids, ids + 4), (std::vector<int64_t>{0, 1, 2, 2}));
}

TEST(Transform, RandomOnesAreKeyedBySampleIdNotByPosition) {
  std::vector<float> zeros(100, 0.0f);
  auto whole = FloatColumn(zeros);
  ASSERT_TRUE(
      ApplyTransform(Spec(TransformOp::kGaussianNoise, 1.0), 3, {7, 1}, 1000, 100, &whole).ok());
  // The same samples decoded as a smaller piece (rows 1040..1059) get the same noise.
  auto piece = FloatColumn(std::vector<float>(20, 0.0f));
  ASSERT_TRUE(
      ApplyTransform(Spec(TransformOp::kGaussianNoise, 1.0), 3, {7, 1}, 1040, 20, &piece).ok());
  const auto all = Floats(whole), part = Floats(piece);
  for (int i = 0; i < 20; ++i)
    EXPECT_EQ(part[static_cast<size_t>(i)], all[static_cast<size_t>(40 + i)]);
  // Another epoch, other noise.
  auto other = FloatColumn(std::vector<float>(20, 0.0f));
  ASSERT_TRUE(
      ApplyTransform(Spec(TransformOp::kGaussianNoise, 1.0), 3, {7, 2}, 1040, 20, &other).ok());
  EXPECT_NE(Floats(other), part);
}

TEST(Transform, FillNullClearsNulls) {
  auto c = FloatColumn({1, 2, 3});
  c.nulls = {0, 1, 0};
  ASSERT_TRUE(ApplyTransform(Spec(TransformOp::kFillNull, 9), 0, {}, 0, 3, &c).ok());
  EXPECT_FALSE(c.has_nulls());
  EXPECT_EQ(Floats(c), (std::vector<float>{1, 9, 3}));
}

}  // namespace
}  // namespace shardfeed
