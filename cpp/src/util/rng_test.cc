#include "shardfeed/rng.h"

#include <algorithm>
#include <set>

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

}  // namespace
}  // namespace shardfeed
