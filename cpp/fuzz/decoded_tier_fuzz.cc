// Fuzz target: bytes -> a decoded-tier entry file -> DecodedTier::Load.
// Input: one mode byte, then the entry.  Mode bit 0 set: the harness rewrites
// the entry's digests to match (SealDecodedTierEntryForTesting), so that the
// fuzzer reaches the record checks behind them; clear: the bytes as they are.
// The entry is looked up under the key that its own header names.  A load is
// a hit or a miss; a hit's views must lie inside their buffers.
//
// SHARDFEED_FUZZ_WRITE_SEEDS=DIR decoded_tier_fuzz -runs=0 writes the seed
// corpus (entries the tier stores itself) into DIR.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "tier/decoded_tier_internal.h"

namespace {

using shardfeed::DecodedColumn;
using shardfeed::DecodedTier;
using shardfeed::DType;

// The key that an entry's header names: "SFDT...." | u64 length | key.
std::string KeyOf(const std::string& entry) {
  uint64_t n = 0;
  if (entry.size() < 16) return "fuzz";
  std::memcpy(&n, entry.data() + 8, 8);
  if (n > entry.size() - 16) return "fuzz";
  return entry.substr(16, n);
}

DecodedColumn Column(DType dtype, const void* values, int64_t count) {
  DecodedColumn c;
  c.dtype = dtype;
  c.values = static_cast<const uint8_t*>(values);
  c.count = count;
  return c;
}

// Entries of every shape the tier stores, written by the tier itself.
void WriteSeeds(const std::string& dir) {
  std::filesystem::create_directories(dir);
  auto tier = DecodedTier::Open(shardfeed::fuzz::ScratchDir() + "/seeds", 0).ValueOrDie();
  static const int64_t ids[4] = {1, 2, 3, 4};
  static const float xs[4] = {0.5f, -1.0f, 2.0f, 3.5f};
  static const double pairs[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  static const int32_t seq[5] = {10, 11, 12, 13, 14};
  static const uint8_t flags[4] = {1, 0, 0, 1};
  auto with_nulls = Column(DType::kFloat32, xs, 4);
  with_nulls.nulls = {0, 1, 0, 0};
  auto fixed = Column(DType::kFloat64, pairs, 8);
  fixed.list_size = 2;
  auto list = Column(DType::kInt32, seq, 5);
  list.list_starts = {0, 2, 2, 3};
  list.list_lengths = {2, 0, 1, 2};
  const std::vector<std::vector<DecodedColumn>> entries = {
      {Column(DType::kInt64, ids, 4)},
      {Column(DType::kInt64, ids, 4), Column(DType::kFloat32, xs, 4), fixed},
      {with_nulls, Column(DType::kBool, flags, 4)},
      {list, Column(DType::kFloat32, xs, 4)},
  };
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string key = "seed|" + std::to_string(i);
    tier->impl()->Store(key, entries[i], 4);
    for (const char mode : {'\0', '\1'}) {
      std::string bytes(1, mode);
      std::FILE* in = std::fopen(tier->impl()->PathOf(key).c_str(), "rb");
      if (in == nullptr) std::abort();
      for (int ch; (ch = std::fgetc(in)) != EOF;) bytes.push_back(static_cast<char>(ch));
      std::fclose(in);
      const std::string out = dir + "/entry" + std::to_string(i) + (mode ? "-sealed" : "-raw");
      shardfeed::fuzz::WriteFile(out, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* dir = std::getenv("SHARDFEED_FUZZ_WRITE_SEEDS")) {
    WriteSeeds(dir);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shardfeed;
  if (size < 1) return 0;
  static const auto tier = DecodedTier::Open(fuzz::ScratchDir() + "/tier", 0).ValueOrDie();
  std::string entry(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] & 1) SealDecodedTierEntryForTesting(&entry);
  const std::string key = KeyOf(entry);
  fuzz::WriteFile(tier->impl()->PathOf(key), reinterpret_cast<const uint8_t*>(entry.data()),
                  entry.size());
  auto loaded = tier->impl()->Load(key);
  std::filesystem::remove(
      tier->impl()->PathOf(key));  // (the map stays valid) keys vary: don't pile up
  if (!loaded.ok() || !*loaded) return 0;
  volatile uint64_t sink = 0;
  for (const auto& c : **loaded) {
    const size_t bytes = static_cast<size_t>(c.count) * DTypeSize(c.dtype);
    for (size_t i = 0; i < bytes; ++i) sink = sink + c.values[i];
    if (c.list_starts.size() != c.list_lengths.size()) std::abort();
    for (size_t r = 0; r < c.list_starts.size(); ++r) {
      const int64_t start = c.list_starts[r], length = c.list_lengths[r];
      if (start < 0 || length < 0 || start > c.count || length > c.count - start) std::abort();
    }
    if (!c.nulls.empty() && c.nulls.size() != static_cast<size_t>(c.count)) std::abort();
  }
  return 0;
}
