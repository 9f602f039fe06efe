// Helpers of the tier's tests (internal).
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include "shardfeed/catalog.h"
#include "tier/decoded_tier_internal.h"
#include "transform/layout.h"

namespace shardfeed::testing {

// The layout of every column of `catalog`.
inline Layout AllColumnsLayout(const Catalog& catalog) {
  OutputOptions options;
  options.all_columns = true;
  return MakeLayout(*catalog.schema(), options).ValueOrDie();
}

// Every row group's tier key under `layout`, by file name.
inline std::multimap<std::string, std::string> TierKeysByFile(const Catalog& catalog,
                                                              const Layout& layout) {
  std::multimap<std::string, std::string> keys;
  for (size_t rg = 0; rg < catalog.row_groups().size(); ++rg) {
    const auto& file = catalog.files()[static_cast<size_t>(catalog.row_groups()[rg].file)];
    keys.emplace(std::filesystem::path(file.path).filename().string(),
                 DecodedTier::Impl::Key(catalog, static_cast<int32_t>(rg), layout));
  }
  return keys;
}

inline std::multimap<std::string, std::string> TierKeysByFile(const Catalog& catalog) {
  return TierKeysByFile(catalog, AllColumnsLayout(catalog));
}

}  // namespace shardfeed::testing
