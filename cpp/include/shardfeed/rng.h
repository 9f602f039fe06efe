// Counter-based randomness (design invariant 4).
//
// Every random decision draws from Philox4x64-10 keyed by (seed, epoch) with a
// counter (purpose, id, block).  There is no generator state to carry between
// threads, processes or a resume: the numbers for (seed, epoch, purpose, id)
// are the same wherever and whenever they are drawn.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace shardfeed {

// What a random stream is for; part of the counter, so streams never overlap.
enum class Purpose : uint64_t {
  kFileOrder = 1,          // the order of row groups in an epoch (id = 0)
  kRowPermutation = 2,     // reserved: permutation inside one row group (id = row group)
  kMixingWindow = 3,       // the permutation of a mixing window's rows (id = window)
  kGlobalPermutation = 4,  // shuffle="global": the permutation of all rows (id = 0)
  kTransformBase = 1024,   // transform at position p uses kTransformBase + p (id = sample id)
  kUserBase = 1 << 20,     // shardfeed.sample_uniform(stream=s) uses kUserBase + s
};

using PhiloxCounter = std::array<uint64_t, 4>;
using PhiloxKey = std::array<uint64_t, 2>;

// One block of Philox4x64-10: four 64-bit random words.
PhiloxCounter Philox4x64(PhiloxCounter counter, PhiloxKey key);

// A stream of random numbers for one (seed, epoch, purpose, id).
class CounterRng {
 public:
  CounterRng(uint64_t seed, uint64_t epoch, uint64_t purpose, uint64_t id);

  uint64_t NextU64();
  // Uniform in [0, bound) without bias (Lemire's method); bound > 0.
  uint64_t Bounded(uint64_t bound);
  // Uniform in [0, 1) with 53 random bits.
  double Uniform();
  // The id this stream is keyed by.
  uint64_t id() const { return counter_[1]; }

 private:
  PhiloxKey key_;
  PhiloxCounter counter_;
  PhiloxCounter block_{};
  int used_ = 4;
};

// A uniformly random permutation of [0, n) (Fisher-Yates over a CounterRng).
std::vector<int64_t> Permutation(int64_t n, CounterRng& rng);

// A random permutation of [0, n) evaluated one index at a time.  Up to
// kTableMax elements it is Permutation's table (exactly uniform; 8 bytes per
// element, 512 KiB at most).  Above, it needs no memory: a Feistel network on
// [0, a) x [0, b) (b the power of 2 nearest above sqrt(n), a = ceil(n / b):
// fewer than b more than n) whose rounds add a keyed function of one half to
// the other modulo its size, the halves trading places each round; its round
// keys drawn from `rng`; an image outside [0, n) (rare) is encrypted again
// until it falls inside.  For n in the billions, where a table would not fit.
class IndexPermutation {
 public:
  // Six (even: the halves end as they began).  Four (Luby and Rackoff's bound
  // for random round functions) left consecutive indices consecutive about 3x
  // as often as a uniform permutation does, at any n; six do not, at 1.5x the
  // cost.  On small domains a Feistel network needs many more rounds to be
  // uniform (a 5-element permutation's 120 orders were up to 17x apart at
  // four), hence the table there.
  static constexpr int kRounds = 6;
  static constexpr int64_t kTableMax = int64_t{1} << 16;
  IndexPermutation(int64_t n, CounterRng& rng);
  int64_t size() const { return n_; }
  // The image of i (0 <= i < size()).
  int64_t operator()(int64_t i) const;
  // The images of [begin, end) into out[0, end - begin): one call per batch.
  void Map(int64_t begin, int64_t end, int64_t* out) const;

 private:
  uint64_t Encrypt(uint64_t x) const;
  int64_t n_;
  uint64_t a_ = 1, b_ = 1;  // the halves' sizes: x = left * b_ + right
  int b_bits_ = 0;          // b_ = 2^b_bits_
  std::array<uint64_t, kRounds> keys_{};
  std::vector<int64_t> table_;  // n <= kTableMax: the permutation itself
};

}  // namespace shardfeed
