#include "transform/normal.h"

#include <cmath>

namespace shardfeed {

namespace {

constexpr int kLayers = 128;
constexpr double kR = 3.442619855899;          // where the tail starts
constexpr double kArea = 9.91256303526217e-3;  // of each layer, under exp(-x^2 / 2)

double Density(double x) { return std::exp(-0.5 * x * x); }

ZigguratTables MakeTables() {
  ZigguratTables t{};
  t.x[0] = kArea / Density(kR);
  t.x[1] = kR;
  for (int i = 1; i < kLayers - 1; ++i) {
    t.x[i + 1] = std::sqrt(-2.0 * std::log(kArea / t.x[i] + Density(t.x[i])));
  }
  t.x[kLayers] = 0;
  for (int i = 0; i <= kLayers; ++i) t.f[i] = Density(t.x[i]);
  return t;
}

}  // namespace

const ZigguratTables kZiggurat = MakeTables();

double NormalOutsideCore(Bits32& bits, uint32_t b) {
  const ZigguratTables& t = kZiggurat;
  for (bool first = true;; first = false) {
    if (!first) b = bits.Next();
    const int i = static_cast<int>(b & (kLayers - 1));
    const bool negative = (b >> 7) & 1;
    const double x = static_cast<double>(b >> 8) * 0x1.0p-24 * t.x[i];
    if (x < t.x[i + 1]) return negative ? -x : x;  // inside the layer's core rectangle
    double z;
    if (i == 0) {
      // The tail beyond kR (Marsaglia, 1964).
      double a, c;
      do {
        a = -std::log(bits.OpenUniform()) / kR;
        c = -std::log(bits.OpenUniform());
      } while (c + c < a * a);
      z = kR + a;
    } else {
      // A wedge: keep x where a uniform height falls under the density.
      const double y = t.f[i] + bits.OpenUniform() * (t.f[i + 1] - t.f[i]);
      if (y >= Density(x)) continue;
      z = x;
    }
    return negative ? -z : z;
  }
}

}  // namespace shardfeed
