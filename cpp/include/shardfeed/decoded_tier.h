// The decoded tier: row groups kept on local disk after decoding, column
// selection and the deterministic transforms, so that later epochs map them
// from disk instead of decoding again.  One folder, shared by every process
// on the node; the file format and the engine's use of it are internal
// (tier/decoded_tier_internal.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <arrow/result.h>

namespace shardfeed {

struct DecodedTierStats {
  int64_t hits = 0;
  int64_t misses = 0;
  int64_t stored_bytes = 0;   // written by this process
  int64_t skipped = 0;        // entries not stored: over the limit or a write failed
  int64_t bytes_on_disk = 0;  // the folder's, as this process last counted it
  int64_t corrupt = 0;        // entries that failed their digest (decoded again)
};

struct DecodedTierUsage {
  int64_t entries = 0;  // complete entries
  int64_t bytes = 0;    // their bytes plus writes in progress
};

class DecodedTier {
 public:
  // Opens `dir`, created (mode 0700) when missing; limit_bytes 0: unlimited.
  // Removes the temporary files of dead writers.  A folder this process cannot
  // write (a read-only mount of a tier warmed elsewhere) opens read-only: its
  // entries are served, a miss is decoded each time and never stored.
  static arrow::Result<std::shared_ptr<DecodedTier>> Open(const std::string& dir,
                                                          int64_t limit_bytes);
  ~DecodedTier();
  DecodedTier(const DecodedTier&) = delete;
  DecodedTier& operator=(const DecodedTier&) = delete;

  DecodedTierStats stats() const;

  // Scans the folder.
  arrow::Result<DecodedTierUsage> Usage() const;

  // Removes every complete entry (writes in progress are left to their
  // writers); returns how many bytes it freed.  A process that maps an entry
  // keeps reading it: removal only unlinks the name.
  arrow::Result<int64_t> Clear();

  const std::string& dir() const;
  // Whether the folder opened read-only (see Open).
  bool read_only() const;

  struct Impl;  // tier/decoded_tier_internal.h
  // The engine's access to the entries; opaque outside the core.
  Impl* impl() const { return impl_.get(); }

 private:
  explicit DecodedTier(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace shardfeed
