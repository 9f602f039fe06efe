// Standard normals and 32-bit uniforms from a sample's counter stream, fast
// enough to draw one per feature of a wide stack (internal).
#pragma once

#include <cstdint>

#include "shardfeed/rng.h"

namespace shardfeed {

// The 32-bit halves of a CounterRng's 64-bit words, low half first.
class Bits32 {
 public:
  explicit Bits32(CounterRng& rng) : rng_(rng) {}
  uint32_t Next() {
    if (half_) {
      half_ = false;
      return static_cast<uint32_t>(word_ >> 32);
    }
    word_ = rng_.NextU64();
    half_ = true;
    return static_cast<uint32_t>(word_);
  }
  // Uniform in (0, 1]: never 0, so that its log is finite.
  double OpenUniform() { return (static_cast<double>(Next()) + 1.0) * 0x1.0p-32; }

 private:
  CounterRng& rng_;
  uint64_t word_ = 0;
  bool half_ = false;
};

// A standard normal by the ziggurat method (Marsaglia and Tsang, 2000, with
// 128 layers), taking the layer, the sign and 24 bits of the value from
// separate bits of one 32-bit draw (as Doornik, 2005, advises); about 1.3%
// of draws need more (the wedges and the tail).
double StandardNormal(Bits32& bits);

}  // namespace shardfeed
