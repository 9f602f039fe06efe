// Helpers of the tier's tests (internal).
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include <arrow/buffer.h>

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

// A column of `n` int64 values first, first + 1, ...
inline DecodedColumn Int64Column(int64_t first, int64_t n) {
  DecodedColumn c;
  c.dtype = DType::kInt64;
  c.count = n;
  c.owned = *arrow::AllocateBuffer(n * 8);
  auto* v = reinterpret_cast<int64_t*>(c.owned->mutable_data());
  for (int64_t i = 0; i < n; ++i) v[i] = first + i;
  c.values = c.owned->data();
  return c;
}

}  // namespace shardfeed::testing
