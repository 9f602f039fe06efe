#include "transform/stack.h"

#include <cmath>
#include <cstring>
#include <vector>

#include <arrow/buffer.h>
#include <gtest/gtest.h>

#include "shardfeed/status.h"
#include "transform/normal.h"

namespace shardfeed {
namespace {

double NormalCdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

TEST(StandardNormal, MatchesTheNormalDistribution) {
  // 2M draws from one stream: the empirical CDF at a grid of points, the
  // moments, and the tail beyond the ziggurat's base layer.
  constexpr int kDraws = 2'000'000;
  CounterRng rng(1, 2, 3, 4);
  Bits32 bits(rng);
  const std::vector<double> grid = {-4, -3.5, -3, -2, -1, -0.5, 0, 0.5, 1, 2, 3, 3.5, 4};
  std::vector<int64_t> below(grid.size(), 0);
  double sum = 0, sum2 = 0, sum4 = 0;
  for (int k = 0; k < kDraws; ++k) {
    const double z = StandardNormal(bits);
    sum += z;
    sum2 += z * z;
    sum4 += z * z * z * z;
    for (size_t g = 0; g < grid.size(); ++g) below[g] += z < grid[g];
  }
  EXPECT_NEAR(sum / kDraws, 0.0, 0.003);
  EXPECT_NEAR(sum2 / kDraws, 1.0, 0.004);
  EXPECT_NEAR(sum4 / kDraws, 3.0, 0.03);
  for (size_t g = 0; g < grid.size(); ++g) {
    const double p = NormalCdf(grid[g]);
    const double sd = std::sqrt(p * (1 - p) / kDraws);
    EXPECT_NEAR(static_cast<double>(below[g]) / kDraws, p, 5 * sd + 1e-6) << "at " << grid[g];
  }
}

DecodedColumn Matrix(const std::vector<float>& values, int64_t width) {
  DecodedColumn m;
  m.dtype = DType::kFloat32;
  m.count = static_cast<int64_t>(values.size());
  m.list_size = width;
  m.owned = arrow::AllocateBuffer(static_cast<int64_t>(values.size() * 4)).ValueOrDie();
  std::memcpy(m.owned->mutable_data(), values.data(), values.size() * 4);
  m.values = m.owned->data();
  return m;
}

std::vector<float> Floats(const DecodedColumn& c) {
  const auto* v = reinterpret_cast<const float*>(c.values);
  return std::vector<float>(v, v + c.count);
}

TransformSpec Spec(TransformOp op, std::vector<double> a, std::vector<double> b = {}) {
  TransformSpec t;
  t.op = op;
  t.column = "s";
  t.a_values = std::move(a);
  t.b_values = std::move(b);
  return t;
}

TEST(StackTransform, SettingsApplyPerFeature) {
  auto m = Matrix({1, 10, 2, 20, 3, 30}, 2);
  ASSERT_TRUE(
      ApplyStackTransform(Spec(TransformOp::kStandardize, {1, 10}, {1, 10}), 0, {}, 0, 3, &m).ok());
  EXPECT_EQ(Floats(m), (std::vector<float>{0, 0, 1, 1, 2, 2}));
  ASSERT_TRUE(
      ApplyStackTransform(Spec(TransformOp::kClip, {0.5, -1}, {1.5, 1.5}), 1, {}, 0, 3, &m).ok());
  EXPECT_EQ(Floats(m), (std::vector<float>{0.5, 0, 1, 1, 1.5, 1.5}));
}

TEST(StackTransform, ARowsDrawsDependOnlyOnItsSampleId) {
  // Rows 0..9 whole, then rows 3 and 7 alone (as a filter leaves them): the
  // same noise for the same sample ids.
  const int64_t width = 5;
  auto whole = Matrix(std::vector<float>(10 * width, 0.0f), width);
  const auto noise = Spec(TransformOp::kGaussianNoise, {1, 2, 3, 4, 5});
  ASSERT_TRUE(ApplyStackTransform(noise, 2, {7, 1}, 100, 10, &whole).ok());
  auto some = Matrix(std::vector<float>(2 * width, 0.0f), width);
  const std::vector<int64_t> selected = {3, 7};
  ASSERT_TRUE(ApplyStackTransform(noise, 2, {7, 1}, 100, 2, &some, &selected).ok());
  const auto w = Floats(whole), s = Floats(some);
  for (int64_t j = 0; j < width; ++j) {
    EXPECT_EQ(s[j], w[3 * width + j]);
    EXPECT_EQ(s[width + j], w[7 * width + j]);
  }
  // Another epoch or position: other values.
  auto other = Matrix(std::vector<float>(10 * width, 0.0f), width);
  ASSERT_TRUE(ApplyStackTransform(noise, 2, {7, 2}, 100, 10, &other).ok());
  EXPECT_NE(Floats(other), w);
}

TEST(StackTransform, ChecksNameTheStackAndTheFeature) {
  const std::vector<std::string> features = {"a", "b", "c"};
  auto short_list =
      StackTransformedType(Spec(TransformOp::kStandardize, {0, 0}), DType::kFloat32, "s", features);
  EXPECT_EQ(KindOf(short_list.status()), ErrorKind::kInvalidArgument);
  EXPECT_NE(short_list.status().message().find("2 values, the stack has 3"), std::string::npos);
  auto bad_std = StackTransformedType(Spec(TransformOp::kStandardize, {0, 0, 0}, {1, 0, 1}),
                                      DType::kInt32, "s", features);
  EXPECT_NE(bad_std.status().message().find("feature 1 (column 'b'): std must be > 0"),
            std::string::npos)
      << bad_std.status();
  EXPECT_EQ(*StackTransformedType(Spec(TransformOp::kStandardize, {0, 0, 0}, {1, 1, 1}),
                                  DType::kInt32, "s", features),
            DType::kFloat32);
  auto log_with_values =
      StackTransformedType(Spec(TransformOp::kLog1p, {0, 0, 0}), DType::kFloat32, "s", features);
  EXPECT_NE(log_with_values.status().message().find("takes no per-feature settings"),
            std::string::npos);
  auto fill =
      StackFillValues(Spec(TransformOp::kFillNull, {0, 1.5, 2}), DType::kInt64, "s", features);
  EXPECT_NE(fill.status().message().find("column 'b'"), std::string::npos);
}

}  // namespace
}  // namespace shardfeed
