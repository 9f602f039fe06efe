#include "transform/normal.h"

#include <array>
#include <cmath>

namespace shardfeed {

namespace {

constexpr int kLayers = 128;
constexpr double kR = 3.442619855899;          // where the tail starts
constexpr double kArea = 9.91256303526217e-3;  // of each layer, under exp(-x^2 / 2)

double Density(double x) { return std::exp(-0.5 * x * x); }

// x[i] is the right edge of layer i (x[0]: the base layer's width, area kArea
// with its tail), decreasing to x[kLayers] = 0; f[i] = Density(x[i]).
struct Tables {
  std::array<double, kLayers + 1> x{};
  std::array<double, kLayers + 1> f{};
  Tables() {
    x[0] = kArea / Density(kR);
    x[1] = kR;
    for (int i = 1; i < kLayers - 1; ++i) {
      x[i + 1] = std::sqrt(-2.0 * std::log(kArea / x[i] + Density(x[i])));
    }
    x[kLayers] = 0;
    for (int i = 0; i <= kLayers; ++i) f[i] = Density(x[i]);
  }
};

const Tables& GetTables() {
  static const Tables tables;
  return tables;
}

}  // namespace

double StandardNormal(Bits32& bits) {
  const Tables& t = GetTables();
  for (;;) {
    const uint32_t b = bits.Next();
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
