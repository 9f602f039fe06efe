// Fuzz target: bytes -> a Delta Lake commit -> its replay.  Whatever the bytes,
// parsing and replaying return actions or an error (a log is read from
// storage the loader does not control); live files are sorted, inside the
// table, one deletion vector slot per file.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "catalog/delta_log.h"
#include "shardfeed/status.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  shardfeed::DeltaReplay replay;
  // Twice: a second commit of the same actions (removes, then adds) must hold
  // too, the second read under the partition keys of the first's metaData.
  if (!replay.ApplyCommitText(text, "fuzz").ok() || !replay.ApplyCommitText(text, "fuzz").ok()) {
    return 0;
  }
  std::vector<std::optional<shardfeed::DeletionVectorDescriptor>> dvs;
  std::vector<shardfeed::PartitionPairs> partitions;
  auto files = replay.LiveFiles("fuzz", &dvs, &partitions);
  if (!files.ok()) return 0;
  if (dvs.size() != files->size()) std::abort();
  // One set of pairs per file, each with every key, or none at all.
  if (!partitions.empty() && partitions.size() != files->size()) std::abort();
  for (const auto& pairs : partitions) {
    if (pairs.size() != partitions.front().size()) std::abort();
  }
  // A column mapping by name parses its schemaString (or refuses it as InvalidData).
  auto mapping = replay.Mapping("fuzz");
  if (!mapping.ok() && shardfeed::KindOf(mapping.status()) != shardfeed::ErrorKind::kInvalidData) {
    std::abort();
  }
  if (!std::is_sorted(files->begin(), files->end())) std::abort();
  // Inside the table: relative, and no component "", "." or ".." (a name that
  // only begins with "..", such as the folder "..=a b", is a name).
  for (const auto& file : *files) {
    if (file.empty() || file.front() == '/') std::abort();
    size_t start = 0;
    while (start <= file.size()) {
      const size_t slash = std::min(file.find('/', start), file.size());
      const std::string_view part(file.data() + start, slash - start);
      if (part.empty() || part == "." || part == "..") std::abort();
      start = slash + 1;
    }
  }
  return 0;
}
