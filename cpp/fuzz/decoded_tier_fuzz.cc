// Fuzz target: bytes -> a decoded-tier entry file -> DecodedTier::Load.
// The entry is looked up under the key its own header names (when it has one),
// so the fuzzer reaches the column records and buffers behind the key check.
// A load is a hit or a miss; a hit's views must lie inside their buffers.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "fuzz_util.h"
#include "tier/decoded_tier.h"
#include "util/hash.h"

namespace {

// The key that an entry's header names: "SFDT...." | u64 length | key.
std::string KeyOf(const uint8_t* data, size_t size) {
  uint64_t n = 0;
  if (size < 16) return "fuzz";
  std::memcpy(&n, data + 8, 8);
  if (n > size - 16) return "fuzz";
  return std::string(reinterpret_cast<const char*>(data + 16), n);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shardfeed;
  static const auto tier = DecodedTier::Open(fuzz::ScratchDir() + "/tier", 0).ValueOrDie();
  const std::string key = KeyOf(data, size);
  fuzz::WriteFile(tier->PathForTesting(key), data, size);
  auto loaded = tier->Load(key);
  if (!loaded.ok() || !*loaded) return 0;
  volatile uint64_t sink = 0;
  for (const auto& c : **loaded) {
    const size_t bytes = static_cast<size_t>(c.count) * DTypeSize(c.dtype);
    for (size_t i = 0; i < bytes; ++i) sink = sink + c.values[i];
    for (size_t r = 0; r < c.list_starts.size(); ++r) {
      const int64_t start = c.list_starts[r], length = c.list_lengths[r];
      if (start < 0 || length < 0 || start > c.count || length > c.count - start) std::abort();
    }
    if (!c.nulls.empty() && c.nulls.size() != static_cast<size_t>(c.count)) std::abort();
  }
  return 0;
}
