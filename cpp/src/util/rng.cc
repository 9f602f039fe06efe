#include "shardfeed/rng.h"

#include <algorithm>
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

namespace {
// SplitMix64's finalizer: every input bit flips about half the output bits.
uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
}  // namespace

IndexPermutation::IndexPermutation(int64_t n, CounterRng& rng) : n_(std::max<int64_t>(n, 0)) {
  if (n_ <= kTableMax) {
    table_ = Permutation(n_, rng);
    return;
  }
  const auto un = static_cast<uint64_t>(std::max<int64_t>(n_, 1));
  while (b_bits_ < 31 && (uint64_t{1} << (2 * b_bits_)) < un) ++b_bits_;
  b_ = uint64_t{1} << b_bits_;
  a_ = (un + b_ - 1) / b_;
  for (auto& k : keys_) k = rng.NextU64();
}

uint64_t IndexPermutation::Encrypt(uint64_t x) const {
  // (left in [0, lm), right in [0, rm)) -> (right, (left + F(right)) mod lm):
  // invertible (left = (new right - F(new left)) mod lm); the sizes trade
  // places each round, so after an even number they are (a_, b_) again.
  uint64_t lm = a_, rm = b_;
  uint64_t left = x >> b_bits_, right = x & (b_ - 1);
  for (int r = 0; r < kRounds; ++r) {
    // F(right) in [0, lm) by Lemire's multiply-shift, then a modular add.
    const auto f = static_cast<uint64_t>(
        (static_cast<u128>(Mix64(right ^ keys_[static_cast<size_t>(r)])) * lm) >> 64);
    uint64_t sum = left + f;
    if (sum >= lm) sum -= lm;
    left = right;
    right = sum;
    std::swap(lm, rm);
  }
  return (left << b_bits_) | right;
}

int64_t IndexPermutation::operator()(int64_t i) const {
  if (!table_.empty()) return table_[static_cast<size_t>(i)];
  // A permutation of the domain maps [0, n) into itself once its cycles are
  // followed past the domain's few extra elements.
  auto x = static_cast<uint64_t>(i);
  do {
    x = Encrypt(x);
  } while (x >= static_cast<uint64_t>(n_));
  return static_cast<int64_t>(x);
}

void IndexPermutation::Map(int64_t begin, int64_t end, int64_t* out) const {
  if (!table_.empty()) {
    std::copy(table_.begin() + begin, table_.begin() + end, out);
    return;
  }
  for (int64_t i = begin; i < end; ++i) *out++ = (*this)(i);
}

}  // namespace shardfeed
