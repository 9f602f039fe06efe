// Cache entries on disk: their names, their metadata file and their checksum.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <arrow/result.h>

namespace shardfeed::cache_internal {

// The file-name stem of the entry for `key`: 16 lowercase hex digits (Hash64), so no
// key can name a path outside the folder.  Not collision-proof; the metadata
// records the key, and an entry whose key differs is treated as missing.
constexpr size_t kEntryNameLength = 16;
std::string EntryName(const std::string& key);

// Whether `stem` has the form EntryName returns.
bool IsEntryName(std::string_view stem);

// What <h>.meta records about <h>.data.
struct EntryMeta {
  std::string key;
  int64_t size = 0;
  std::string version;
  uint64_t checksum = 0;  // Hash64 (XXH3-64) of the bytes

  bool operator==(const EntryMeta&) const = default;
};

// A small text file: a header line, then key=value lines (values escaped, so
// a key with a newline cannot forge a field).  No pickle, nothing executable.
std::string FormatMeta(const EntryMeta& meta);

// nullopt for anything but a complete, well-formed description.
std::optional<EntryMeta> ParseMeta(std::string_view text);

// The Hash64 of the first `size` bytes of `fd` (read with pread); an error
// if the file is shorter.
arrow::Result<uint64_t> ChecksumOfFd(int fd, int64_t size);

}  // namespace shardfeed::cache_internal
