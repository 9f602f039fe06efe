#include "shardfeed/rng.h"

#include <cstddef>
#include <numeric>
#include <utility>

namespace shardfeed {

namespace {
__extension__ typedef unsigned __int128 u128;

constexpr uint64_t kM0 = 0xD2E7470EE14C6C93ULL;
constexpr uint64_t kM1 = 0xCA5A826395121157ULL;
constexpr uint64_t kW0 = 0x9E3779B97F4A7C15ULL;
constexpr uint64_t kW1 = 0xBB67AE8584CAA73BULL;

inline void MulHiLo(uint64_t a, uint64_t b, uint64_t* hi, uint64_t* lo) {
  const u128 product = static_cast<u128>(a) * b;
  *hi = static_cast<uint64_t>(product >> 64);
  *lo = static_cast<uint64_t>(product);
}
}  // namespace

PhiloxCounter Philox4x64(PhiloxCounter c, PhiloxKey k) {
  for (int round = 0; round < 10; ++round) {
    uint64_t hi0, lo0, hi1, lo1;
    MulHiLo(kM0, c[0], &hi0, &lo0);
    MulHiLo(kM1, c[2], &hi1, &lo1);
    c = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
    k[0] += kW0;
    k[1] += kW1;
  }
  return c;
}

CounterRng::CounterRng(uint64_t seed, uint64_t epoch, uint64_t purpose, uint64_t id)
    : key_{seed, epoch}, counter_{purpose, id, 0, 0} {}

uint64_t CounterRng::NextU64() {
  if (used_ == 4) {
    block_ = Philox4x64(counter_, key_);
    ++counter_[2];
    used_ = 0;
  }
  return block_[used_++];
}

uint64_t CounterRng::Bounded(uint64_t bound) {
  // Lemire, "Fast Random Integer Generation in an Interval" (2019).
  u128 m = static_cast<u128>(NextU64()) * bound;
  auto low = static_cast<uint64_t>(m);
  if (low < bound) {
    const uint64_t threshold = (0 - bound) % bound;
    while (low < threshold) {
      m = static_cast<u128>(NextU64()) * bound;
      low = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

double CounterRng::Uniform() { return static_cast<double>(NextU64() >> 11) * 0x1.0p-53; }

std::vector<int64_t> Permutation(int64_t n, CounterRng& rng) {
  std::vector<int64_t> perm(static_cast<size_t>(n));
  std::iota(perm.begin(), perm.end(), int64_t{0});
  for (int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(rng.Bounded(static_cast<uint64_t>(i) + 1));
    std::swap(perm[static_cast<size_t>(i)], perm[static_cast<size_t>(j)]);
  }
  return perm;
}

}  // namespace shardfeed
