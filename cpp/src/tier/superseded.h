// Which decoded-tier entries a catalog has superseded (internal).
//
// The tier keys an entry by its file's storage, path, size, modification
// time (and, locally, identity), so a rewritten file never serves old rows;
// but its old entries stayed, and a tier at its cache_limit_bytes stored
// nothing more: after a dataset was rewritten, every later epoch decoded
// again.  An entry of one of the catalog's files (same storage and path) with
// another version, or an older entry format, is superseded: no reader of that
// file can use it again.  Entries of files the catalog does not name (other
// datasets) are never superseded by it.
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "shardfeed/catalog.h"

namespace shardfeed {

// The format tag that starts every entry key ("v4|...").
inline constexpr std::string_view kTierKeyTag = "v4";

class SupersededKeys {
 public:
  explicit SupersededKeys(const Catalog& catalog);
  // True when `key` (DecodedTier::Impl::Key's text) is of a file of the
  // catalog as it was before, or of an older entry format.
  bool operator()(std::string_view key) const;
  // The catalog's files as this matcher sees them (paths and versions): equal
  // for catalogs that supersede the same entries.
  const std::string& versions() const { return versions_; }

 private:
  bool IsCurrent(std::string_view key, size_t file) const;

  std::unordered_map<std::string, std::vector<size_t>> by_path_;  // CacheKey + '|' -> files
  std::vector<std::string> current_;   // "v4|<CacheKey>|<size>|<version>|rg"
  std::vector<std::string> identity_;  // "|id<identity>", or empty
  std::string versions_;
};

}  // namespace shardfeed
