#include "shardfeed/rng.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include <gtest/gtest.h>

namespace shardfeed {
namespace {

// Known answers: Random123's kat_vectors (zero counter and key), and NumPy's
// independent Philox4x64-10 (np.random.Philox(counter=[4, 6, 7, 8], key=[1, 2])
// increments the counter before its first block).
TEST(Philox, KnownAnswers) {
  EXPECT_EQ(Philox4x64({0, 0, 0, 0}, {0, 0}),
            (PhiloxCounter{0x16554d9eca36314cULL, 0xdb20fe9d672d0fdcULL, 0xd7e772cee186176bULL,
                           0x7e68b68aec7ba23bULL}));
  EXPECT_EQ(Philox4x64({5, 6, 7, 8}, {1, 2}),
            (PhiloxCounter{0x10305a64da754338ULL, 0x5e6a33ab1f5cc34cULL, 0xa3c565b0a8a9bc09ULL,
                           0x3995bd7a10cff2afULL}));
}

TEST(CounterRng, SameKeySameStreamOtherKeyOtherStream) {
  CounterRng a(7, 1, 3, 42), b(7, 1, 3, 42), c(7, 2, 3, 42), d(7, 1, 3, 43);
  for (int i = 0; i < 10; ++i) {
    const uint64_t x = a.NextU64();
    EXPECT_EQ(x, b.NextU64());
    EXPECT_NE(x, c.NextU64());
    EXPECT_NE(x, d.NextU64());
  }
}

TEST(CounterRng, BoundedStaysInRangeAndCoversIt) {
  CounterRng rng(1, 0, 1, 0);
  std::set<uint64_t> seen;
  for (int i = 0; i < 2000; ++i) {
    const uint64_t v = rng.Bounded(7);
    ASSERT_LT(v, 7u);
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), 7u);
  for (int i = 0; i < 1000; ++i) {
    const double u = rng.Uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
  }
}

TEST(Permutation, IsAPermutationAndDependsOnKey) {
  for (int64_t n : {0, 1, 2, 17, 1000}) {
    CounterRng rng(3, 4, 5, static_cast<uint64_t>(n));
    auto p = Permutation(n, rng);
    auto sorted = p;
    std::sort(sorted.begin(), sorted.end());
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(sorted[static_cast<size_t>(i)], i);
  }
  CounterRng r1(1, 0, 3, 0), r2(1, 1, 3, 0);
  EXPECT_NE(Permutation(100, r1), Permutation(100, r2));
}

TEST(IndexPermutation, IsAPermutationOfAnySizeAndDependsOnKey) {
  for (int64_t n : {0, 1, 2, 3, 4, 5, 17, 64, 1000, 4097, 65536, 65537, 100003}) {
    CounterRng rng(3, 4, 5, static_cast<uint64_t>(n));
    const IndexPermutation p(n, rng);
    ASSERT_EQ(p.size(), n);
    std::vector<bool> hit(static_cast<size_t>(n), false);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t j = p(i);
      ASSERT_GE(j, 0);
      ASSERT_LT(j, n);
      ASSERT_FALSE(hit[static_cast<size_t>(j)]) << "n=" << n << " i=" << i;
      hit[static_cast<size_t>(j)] = true;
    }
  }
  CounterRng r1(1, 0, 4, 0), r2(1, 1, 4, 0);
  const IndexPermutation a(1000, r1), b(1000, r2);
  int64_t same = 0;
  for (int64_t i = 0; i < 1000; ++i) same += a(i) == b(i);
  EXPECT_LT(same, 10);  // about 1 expected
}

TEST(IndexPermutation, EveryOrderOfASmallSetIsEquallyLikely) {
  // 4 elements, 24 orders, 4,800 keys: chi-square with 23 degrees of freedom
  // is above 60 with probability 1e-4 for a uniform draw.  Four Feistel
  // rounds scored over 1,000 here.
  const int64_t n = 4, draws = 4800;
  std::map<std::vector<int64_t>, int64_t> seen;
  for (int64_t k = 0; k < draws; ++k) {
    CounterRng rng(11, static_cast<uint64_t>(k), 4, 0);
    const IndexPermutation p(n, rng);
    std::vector<int64_t> order(n);
    p.Map(0, n, order.data());
    ++seen[order];
  }
  ASSERT_EQ(seen.size(), 24u);
  const double expected = static_cast<double>(draws) / 24;
  double chi = 0;
  for (const auto& [order, count] : seen) {
    chi += (static_cast<double>(count) - expected) * (static_cast<double>(count) - expected) /
           expected;
  }
  EXPECT_LT(chi, 60);
}

TEST(IndexPermutation, LeavesConsecutiveIndicesConsecutiveAsRarelyAsAUniformDraw) {
  // Past the table: a uniform permutation of n keeps about one consecutive
  // pair (i, i + 1) as consecutive images per draw; four rounds kept ~3.
  const int64_t n = 200000;
  double pairs = 0;
  const int keys = 20;
  for (int k = 0; k < keys; ++k) {
    CounterRng rng(5, static_cast<uint64_t>(k), 4, 0);
    const IndexPermutation p(n, rng);
    std::vector<int64_t> images(n);
    p.Map(0, n, images.data());
    for (int64_t i = 1; i < n; ++i)
      pairs += images[static_cast<size_t>(i)] == images[static_cast<size_t>(i - 1)] + 1;
  }
  EXPECT_LT(pairs / keys, 1.8);
}

TEST(IndexPermutation, SpreadsNeighboursUniformly) {
  // Rows of 64 sorted blocks of 4,096: a block of 1,024 consecutive images
  // should meet the blocks about as a uniform draw does.  The chance that two
  // of its rows share a block is ~1/64 for a uniform permutation.
  const int64_t blocks = 64, per = 4096, n = blocks * per, batch = 1024;
  CounterRng rng(7, 0, 4, 0);
  const IndexPermutation p(n, rng);
  double collision = 0;
  for (int64_t start = 0; start < n; start += batch) {
    std::vector<int64_t> count(blocks, 0);
    for (int64_t i = start; i < start + batch; ++i) ++count[static_cast<size_t>(p(i) / per)];
    double pairs = 0;
    for (int64_t c : count) pairs += static_cast<double>(c) * static_cast<double>(c - 1);
    collision += pairs / (static_cast<double>(batch) * (batch - 1));
  }
  const double weff = 1.0 / (collision / static_cast<double>(n / batch));
  EXPECT_GT(weff, 0.95 * blocks);
  EXPECT_LT(weff, 1.05 * blocks);
  // No linear trace of the index: corr(i, p(i)) and corr(p(i), p(i + 1)) near 0
  // (their spread for a uniform permutation is 1/sqrt(n) ~ 0.002).
  auto corr = [&](auto&& x, auto&& y, int64_t m) {
    double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
    for (int64_t i = 0; i < m; ++i) {
      const auto a = static_cast<double>(x(i)), b = static_cast<double>(y(i));
      sx += a, sy += b, sxx += a * a, syy += b * b, sxy += a * b;
    }
    const double k = static_cast<double>(m);
    return (sxy / k - sx / k * sy / k) /
           std::sqrt((sxx / k - sx / k * sx / k) * (syy / k - sy / k * sy / k));
  };
  EXPECT_LT(std::abs(corr([](int64_t i) { return i; }, p, n)), 0.01);
  EXPECT_LT(std::abs(corr(
                p, [&](int64_t i) { return p(i + 1); }, n - 1)),
            0.01);
}

}  // namespace
}  // namespace shardfeed
