// Helpers for the cache tests: a local folder that plays the remote store, and
// filesystems that fail or stall on purpose.
#pragma once

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include <arrow/buffer.h>
#include <arrow/filesystem/localfs.h>
#include <arrow/io/interfaces.h>

#include "shardfeed/cache.h"
#include "util/test_util.h"

namespace shardfeed::testing {

inline std::string RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string out(n, '\0');
  for (auto& c : out) c = static_cast<char>(rng());
  return out;
}

inline std::string ReadAll(arrow::io::RandomAccessFile& file) {
  const int64_t size = file.GetSize().ValueOrDie();
  auto buffer = file.ReadAt(0, size).ValueOrDie();
  return buffer->ToString();
}

// Bytes of entries and downloads in a cache folder (what the limit bounds).
inline int64_t FolderBytes(const std::filesystem::path& dir) {
  int64_t total = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    const bool data = name.size() > 5 && name.substr(name.size() - 5) == ".data";
    if (data || name.rfind(".tmp-", 0) == 0) total += static_cast<int64_t>(e.file_size());
  }
  return total;
}

// A folder of files that stands for a bucket.
class FakeRemote {
 public:
  FakeRemote() : fs_(std::make_shared<arrow::fs::LocalFileSystem>()) {}
  const std::shared_ptr<arrow::fs::LocalFileSystem>& fs() const { return fs_; }
  std::filesystem::path PathOf(const std::string& name) const { return dir_.path() / name; }

  RemoteFileInfo Put(const std::string& name, const std::string& bytes) {
    const auto path = PathOf(name);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
    return Info(name);
  }
  RemoteFileInfo Info(const std::string& name) const {
    const std::string path = PathOf(name).string();
    auto info = fs_->GetFileInfo(path).ValueOrDie();
    RemoteFileInfo out;
    out.key = "local://" + path;
    out.path = path;
    out.size = info.size();
    out.version = std::to_string(info.mtime().time_since_epoch().count());
    return out;
  }

 private:
  TempDir dir_;
  std::shared_ptr<arrow::fs::LocalFileSystem> fs_;
};

// A file whose reads call a hook first (to fail, stall or signal).
class HookedFile : public arrow::io::RandomAccessFile {
 public:
  HookedFile(std::shared_ptr<arrow::io::RandomAccessFile> inner, std::function<void()> hook)
      : inner_(std::move(inner)), hook_(std::move(hook)) {}
  arrow::Status Close() override { return inner_->Close(); }
  bool closed() const override { return inner_->closed(); }
  arrow::Result<int64_t> Tell() const override { return inner_->Tell(); }
  arrow::Status Seek(int64_t position) override { return inner_->Seek(position); }
  arrow::Result<int64_t> GetSize() override { return inner_->GetSize(); }
  arrow::Result<int64_t> Read(int64_t n, void* out) override {
    hook_();
    return inner_->Read(n, out);
  }
  arrow::Result<std::shared_ptr<arrow::Buffer>> Read(int64_t n) override {
    hook_();
    return inner_->Read(n);
  }
  arrow::Result<int64_t> ReadAt(int64_t pos, int64_t n, bool allow_short, void* out) override {
    hook_();
    return inner_->ReadAt(pos, n, allow_short, out);
  }
  arrow::Result<int64_t> ReadAt(int64_t pos, int64_t n, void* out) override {
    hook_();
    return inner_->ReadAt(pos, n, out);
  }
  arrow::Result<std::shared_ptr<arrow::Buffer>> ReadAt(int64_t pos, int64_t n,
                                                       bool allow_short) override {
    hook_();
    return inner_->ReadAt(pos, n, allow_short);
  }
  arrow::Result<std::shared_ptr<arrow::Buffer>> ReadAt(int64_t pos, int64_t n) override {
    hook_();
    return inner_->ReadAt(pos, n);
  }

 private:
  std::shared_ptr<arrow::io::RandomAccessFile> inner_;
  std::function<void()> hook_;
};

// LocalFileSystem whose OpenInputFile first asks `on_open` (an error fails
// the open: a flaky store) and whose reads call `on_read` (a slow store).
class HookedFileSystem : public arrow::fs::LocalFileSystem {
 public:
  std::function<arrow::Status()> on_open = [] { return arrow::Status::OK(); };
  std::function<void()> on_read = [] {};
  std::atomic<int> opens{0};

  using arrow::fs::LocalFileSystem::OpenInputFile;
  arrow::Result<std::shared_ptr<arrow::io::RandomAccessFile>> OpenInputFile(
      const arrow::fs::FileInfo& info) override {
    ++opens;
    ARROW_RETURN_NOT_OK(on_open());
    ARROW_ASSIGN_OR_RAISE(auto inner, arrow::fs::LocalFileSystem::OpenInputFile(info.path()));
    return std::make_shared<HookedFile>(std::move(inner), on_read);
  }
};

}  // namespace shardfeed::testing
