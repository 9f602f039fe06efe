// A small stable hash (FNV-1a, two lanes) for fingerprints.  Not for security:
// it only has to be identical on every machine and every run.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace shardfeed {

// The one 64-bit hash of a string's bytes (FNV-1a 64): HashBucket's string
// ids and the Vocabulary table's probes.  Changing it changes every hashed
// column, so it is written down once, here.
inline uint64_t StringHash64(std::string_view bytes) {
  uint64_t h = 0xCBF29CE484222325ULL;
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001B3ULL;
  return h;
}

class StableHash {
 public:
  void Update(std::string_view bytes) {
    for (unsigned char c : bytes) {
      a_ = (a_ ^ c) * 0x100000001B3ULL;
      b_ = (b_ ^ c) * 0x100000001B3ULL + 0x9E3779B97F4A7C15ULL;
    }
  }
  void Update(int64_t v) { Update(std::to_string(v) + ";"); }
  std::string HexDigest() const {
    char buf[33];
    std::snprintf(buf, sizeof(buf), "%016llx%016llx", static_cast<unsigned long long>(a_),
                  static_cast<unsigned long long>(b_));
    return buf;
  }

 private:
  uint64_t a_ = 0xCBF29CE484222325ULL;
  uint64_t b_ = 0x84222325CBF29CE4ULL;
};

}  // namespace shardfeed
