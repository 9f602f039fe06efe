#include "util/hash.h"

#include <cstdio>

#define XXH_INLINE_ALL
#include <arrow/vendored/xxhash/xxhash.h>

namespace shardfeed {

uint64_t Hash64(const void* data, size_t size) { return XXH3_64bits(data, size); }

std::string Hex64(uint64_t value) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(value));
  return buf;
}

struct StreamingHash::State {
  XXH3_state_t xxh;
};

StreamingHash::StreamingHash() : state_(std::make_unique<State>()) { Reset(); }
StreamingHash::~StreamingHash() = default;

void StreamingHash::Reset() { XXH3_64bits_reset(&state_->xxh); }

void StreamingHash::Update(const void* data, size_t size) {
  XXH3_64bits_update(&state_->xxh, data, size);
}

uint64_t StreamingHash::Digest() const { return XXH3_64bits_digest(&state_->xxh); }

}  // namespace shardfeed
