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

// The ziggurat's 128 layers: x[i] is the right edge of layer i (x[0] the
// base layer's width, tail included), decreasing to x[128] = 0, and f[i] the
// density exp(-x[i]^2 / 2) there.
struct ZigguratTables {
  double x[129];
  double f[129];
};
extern const ZigguratTables kZiggurat;

// The wedges, the tail and the rejections, for a draw `b` whose value fell
// outside its layer's core rectangle (see StandardNormal).
double NormalOutsideCore(Bits32& bits, uint32_t b);

// A standard normal by the ziggurat method (Marsaglia and Tsang, 2000, with
// 128 layers), taking the layer, the sign and 24 bits of the value from
// separate bits of one 32-bit draw (as Doornik, 2005, advises).  Inline: the
// core rectangle takes about 98.8% of draws; the rest go out of line.
inline double StandardNormal(Bits32& bits) {
  const uint32_t b = bits.Next();
  const uint32_t i = b & 127;
  const double x = static_cast<double>(b >> 8) * 0x1.0p-24 * kZiggurat.x[i];
  if (x < kZiggurat.x[i + 1]) return ((b >> 7) & 1) ? -x : x;
  return NormalOutsideCore(bits, b);
}

}  // namespace shardfeed
