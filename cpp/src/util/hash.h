// The one hash of the project for keys and checksums: XXH3-64 (Arrow's vendored
// xxhash).  Not for security, and not for anything that decides the sample
// order: it names cache files and checks their bytes, so it only has to be
// fast and identical on every machine and every run.
//
// Two older hashes keep their exact values on purpose and live beside what
// they define (changing either would change a stream): the dataset
// fingerprint (catalog/catalog.cc) and HashBucket's string hash
// (exec/decode.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace shardfeed {

// The hash of a string's bytes that becomes data (FNV-1a 64): HashBucket's
// string ids and the Vocabulary table's probes.  Not a key or checksum (those
// use Hash64): changing it changes every hashed column, so it is frozen here.
inline uint64_t StringHash64(std::string_view bytes) {
  uint64_t h = 0xCBF29CE484222325ULL;
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001B3ULL;
  return h;
}

uint64_t Hash64(const void* data, size_t size);
inline uint64_t Hash64(std::string_view bytes) { return Hash64(bytes.data(), bytes.size()); }

// 16 lowercase hex digits.
std::string Hex64(uint64_t value);

// Hash64 of the concatenation of every Update since construction or Reset.
class StreamingHash {
 public:
  StreamingHash();
  ~StreamingHash();
  StreamingHash(const StreamingHash&) = delete;
  StreamingHash& operator=(const StreamingHash&) = delete;

  void Reset();
  void Update(const void* data, size_t size);
  uint64_t Digest() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace shardfeed
