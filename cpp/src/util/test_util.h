// Helpers for the C++ unit tests: temporary folders and small Parquet files.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <arrow/api.h>
#include <arrow/io/file.h>
#include <parquet/arrow/writer.h>
#include <parquet/properties.h>

namespace shardfeed::testing {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "shardfeed-test-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Writes `rows` rows: "id" int64 (first_id, first_id + 1, ...), "x" float32
// (= id / 2), "v" fixed_size_list<float, 3> (= id, id + 1, id + 2).
inline void WriteIdFile(const std::filesystem::path& path, int64_t first_id, int64_t rows,
                        int64_t row_group_size) {
  std::filesystem::create_directories(path.parent_path());
  arrow::Int64Builder ids;
  arrow::FloatBuilder xs;
  auto values = std::make_shared<arrow::FloatBuilder>();
  arrow::FixedSizeListBuilder vs(arrow::default_memory_pool(), values, 3);
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t id = first_id + i;
    (void)ids.Append(id);
    (void)xs.Append(static_cast<float>(id) / 2);
    (void)vs.Append();
    for (int j = 0; j < 3; ++j) (void)values->Append(static_cast<float>(id + j));
  }
  auto table = arrow::Table::Make(
      arrow::schema({arrow::field("id", arrow::int64()), arrow::field("x", arrow::float32()),
                     arrow::field("v", arrow::fixed_size_list(arrow::float32(), 3))}),
      {ids.Finish().ValueOrDie(), xs.Finish().ValueOrDie(), vs.Finish().ValueOrDie()});
  auto out = arrow::io::FileOutputStream::Open(path.string()).ValueOrDie();
  auto st = parquet::arrow::WriteTable(*table, arrow::default_memory_pool(), out, row_group_size);
  if (!st.ok()) std::abort();
  (void)out->Close();
}

inline void WriteText(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

}  // namespace shardfeed::testing
