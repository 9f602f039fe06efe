// Fuzz target: bytes -> a Delta Lake deletion vector -> its rows.  Whatever the
// bytes, parsing returns sorted, disjoint, non-adjacent runs of row indices
// (never negative) or an InvalidData error (a deletion vector is read from
// storage the loader does not control); Z85 text decodes or is refused.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "catalog/deletion_vector.h"
#include "shardfeed/status.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto runs = shardfeed::ParseDeletionVector(bytes);
  if (runs.ok()) {
    int64_t previous_end = -1;
    for (const auto& run : *runs) {
      if (run.begin < 0 || run.begin >= run.end || run.begin <= previous_end) std::abort();
      previous_end = run.end;
    }
  } else if (shardfeed::KindOf(runs.status()) != shardfeed::ErrorKind::kInvalidData) {
    std::abort();
  }
  auto text = shardfeed::Z85Decode(bytes);
  if (text.ok() && text->size() != size / 5 * 4) std::abort();
  return 0;
}
