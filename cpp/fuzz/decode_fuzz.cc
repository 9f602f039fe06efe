// Fuzz target: bytes -> a Parquet file -> catalog -> every row group decoded
// (DecodeRowGroup, as an engine worker calls it) and every decoded value read.
// Any outcome but a crash or a sanitizer report is fine: the catalog or the
// decode may fail with an error.
#include <cstdint>
#include <cstdlib>
#include <memory>

#include <arrow/buffer.h>
#include <arrow/type.h>

#include "exec/decode.h"
#include "exec/stage_clock.h"
#include "fuzz_util.h"
#include "shardfeed/catalog.h"
#include "shardfeed/vocabulary.h"
#include "transform/layout.h"
#include "util/string_array.h"

namespace {

// Reads every byte that the column's views claim, so that ASan sees a view
// that points outside its buffer.
uint64_t Touch(const shardfeed::DecodedColumn& c) {
  uint64_t sum = 0;
  const size_t bytes = static_cast<size_t>(c.count) * shardfeed::DTypeSize(c.dtype);
  for (size_t i = 0; i < bytes; ++i) sum += c.values[i];
  for (size_t r = 0; r < c.list_starts.size(); ++r) {
    const int64_t start = c.list_starts[r], length = c.list_lengths[r];
    if (start < 0 || length < 0 || start > c.count || length > c.count - start) std::abort();
  }
  for (uint8_t n : c.nulls) sum += n;
  return sum;
}

// Whether the column holds strings (or binary ids), alone or in lists: the
// columns HashBucket and Vocabulary take.
bool HoldsStrings(const arrow::DataType& type) {
  const arrow::DataType* t = &type;
  if (arrow::is_list_like(t->id()) && t->id() != arrow::Type::MAP) {
    t = static_cast<const arrow::BaseListType&>(*t).value_type().get();
  }
  if (t->id() == arrow::Type::DICTIONARY) {
    t = static_cast<const arrow::DictionaryType&>(*t).value_type().get();
  }
  return shardfeed::IsStringLike(t->id());
}

shardfeed::TransformSpec StringTransform(const std::string& column, bool vocabulary) {
  shardfeed::TransformSpec t;
  t.column = column;
  if (vocabulary) {
    t.op = shardfeed::TransformOp::kVocabulary;
    t.vocabulary = shardfeed::VocabularyTable::Make({"n0", "n1", "", "a"}).ValueOrDie();
    t.n = -1;
  } else {
    t.op = shardfeed::TransformOp::kHashBucket;
    t.n = 97;
  }
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shardfeed;
  const std::string path = fuzz::ScratchDir() + "/input.parquet";
  fuzz::WriteFile(path, data, size);
  CatalogOptions catalog_options;
  catalog_options.num_threads = 1;
  auto catalog = Catalog::Open({path}, catalog_options);
  if (!catalog.ok()) return 0;
  OutputOptions options;
  options.fill_null = 0.0;  // nulls filled, so that decoding goes on past them
  // Every column as itself, strings hashed; the string columns alone through
  // a Vocabulary; then every plain number column as a stack of its own, which
  // the tile read decodes (exec/tile_read.h).
  OutputOptions mapped = options;
  mapped.all_columns = false;
  OutputOptions stacked = mapped;
  for (const auto& field : (*catalog)->schema()->fields()) {
    if (HoldsStrings(*field->type())) {
      options.transforms.push_back(StringTransform(field->name(), false));
      mapped.columns.push_back(field->name());
      mapped.transforms.push_back(StringTransform(field->name(), true));
    }
    switch (field->type()->id()) {
      case arrow::Type::FLOAT:
      case arrow::Type::DOUBLE:
      case arrow::Type::INT32:
      case arrow::Type::INT64:
        stacked.stacks.push_back({"s_" + field->name(), {field->name()}});
        break;
      default:
        break;
    }
  }
  DecodeHooks hooks;
  hooks.clock = std::make_shared<StageClock>(false);
  volatile uint64_t sink = 0;
  const auto groups = static_cast<int32_t>((*catalog)->row_groups().size());
  for (const auto* spec : {&options, &mapped, &stacked}) {
    if ((spec == &mapped && mapped.columns.empty()) ||
        (spec == &stacked && stacked.stacks.empty())) {
      continue;
    }
    auto layout = MakeLayout(*(*catalog)->schema(), *spec);
    if (!layout.ok()) continue;  // no column shardfeed can hand out
    for (int32_t rg = 0; rg < groups; ++rg) {
      auto decoded = DecodeRowGroup(**catalog, rg, *layout, RandomKey{1, 0}, hooks);
      if (!decoded.ok()) continue;
      if ((*decoded)->num_rows != (*catalog)->row_groups()[static_cast<size_t>(rg)].num_rows) {
        std::abort();
      }
      for (const auto& column : (*decoded)->columns) sink = sink + Touch(column);
      for (const auto& matrix : (*decoded)->stacks) {
        if (!matrix) continue;
        for (int64_t i = 0; i < matrix->size(); ++i) sink = sink + matrix->data()[i];
      }
    }
  }
  return 0;
}
