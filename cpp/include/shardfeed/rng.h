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
  kFileOrder = 1,         // the order of row groups in an epoch (id = 0)
  kRowPermutation = 2,    // reserved: permutation inside one row group (id = row group)
  kMixingWindow = 3,      // the permutation of a mixing window's rows (id = window)
  kTransformBase = 1024,  // transform at position p uses kTransformBase + p (id = sample id)
  kUserBase = 1 << 20,    // shardfeed.sample_uniform(stream=s) uses kUserBase + s
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

}  // namespace shardfeed
