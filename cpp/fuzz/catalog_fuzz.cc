// Fuzz target: bytes -> a Parquet file -> Catalog::Open (the footer path).
// Whatever the bytes, Open returns a catalog or an error; a catalog's numbers
// must then hold together (no crash, no sanitizer report, no assert below).
#include <cstdint>
#include <cstdlib>

#include "fuzz_util.h"
#include "shardfeed/catalog.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using shardfeed::Catalog;
  const std::string path = shardfeed::fuzz::ScratchDir() + "/input.parquet";
  shardfeed::fuzz::WriteFile(path, data, size);
  shardfeed::CatalogOptions options;
  options.num_threads = 1;
  auto catalog = Catalog::Open({path}, options);
  if (!catalog.ok()) return 0;
  int64_t rows = 0;
  for (const auto& rg : (*catalog)->row_groups()) {
    if (rg.num_rows <= 0 || rg.first_row != rows) std::abort();
    rows += rg.num_rows;
  }
  if (rows != (*catalog)->num_rows()) std::abort();
  return 0;
}
