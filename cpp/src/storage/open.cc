#include "storage/open.h"

#include <utility>

#include <arrow/buffer.h>
#include <arrow/filesystem/filesystem.h>

#include "shardfeed/status.h"
#include "storage/retry.h"
#include "util/deadline_file.h"

namespace shardfeed {

namespace {

// Forwards every call and records the first failed read.
class TrackedFile final : public arrow::io::RandomAccessFile {
 public:
  TrackedFile(std::shared_ptr<arrow::io::RandomAccessFile> file,
              std::shared_ptr<ReadFailure> failure)
      : file_(std::move(file)), failure_(std::move(failure)) {}

  arrow::Status Close() override { return file_->Close(); }
  bool closed() const override { return file_->closed(); }
  arrow::Result<int64_t> Tell() const override { return file_->Tell(); }
  arrow::Status Seek(int64_t position) override { return Track(file_->Seek(position)); }
  arrow::Result<int64_t> GetSize() override { return Track(file_->GetSize()); }
  arrow::Result<int64_t> Read(int64_t nbytes, void* out) override {
    return Track(file_->Read(nbytes, out));
  }
  arrow::Result<std::shared_ptr<arrow::Buffer>> Read(int64_t nbytes) override {
    return Track(file_->Read(nbytes));
  }
  arrow::Result<int64_t> ReadAt(int64_t position, int64_t nbytes, void* out) override {
    return Track(file_->ReadAt(position, nbytes, out));
  }
  arrow::Result<std::shared_ptr<arrow::Buffer>> ReadAt(int64_t position, int64_t nbytes) override {
    return Track(file_->ReadAt(position, nbytes));
  }

 private:
  template <typename R>
  R Track(R result) {
    if constexpr (std::is_same_v<R, arrow::Status>) {
      if (!result.ok()) failure_->Record(result);
    } else {
      if (!result.ok()) failure_->Record(result.status());
    }
    return result;
  }

  std::shared_ptr<arrow::io::RandomAccessFile> file_;
  std::shared_ptr<ReadFailure> failure_;
};

}  // namespace

void ReadFailure::Record(const arrow::Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (first_.ok()) first_ = status;
}

arrow::Status ReadFailure::first() const {
  std::lock_guard<std::mutex> lock(mu_);
  return first_;
}

arrow::Status ReadFailure::Classify(const arrow::Status& status, const ErrorContext& at) const {
  const arrow::Status io = first();
  if (!io.ok()) return ParquetStatus(Error(ErrorKind::kStorage, io.message()), at);
  return ParquetStatus(status, at, IoOutcome::kReadOk);
}

arrow::Result<OpenedFile> OpenCatalogFile(const Catalog& catalog, int32_t file,
                                          const FileOpener& opener, double remote_timeout) {
  const auto& entry = catalog.files()[static_cast<size_t>(file)];
  std::shared_ptr<arrow::io::RandomAccessFile> input;
  if (opener) {
    ARROW_ASSIGN_OR_RAISE(input, opener(file));
  } else if (catalog.is_local()) {
    arrow::fs::FileInfo info(entry.path, arrow::fs::FileType::File);
    info.set_size(entry.size);
    auto opened = catalog.filesystem()->OpenInputFile(info);
    if (!opened.ok()) return Error(ErrorKind::kStorage, opened.status().message());
    input = std::move(*opened);
  } else {
    // Uncached remote reads: transient failures (503 SlowDown, a reset
    // connection) are retried like the file cache's downloads, until the
    // deadline the caller's WithDeadline gives up at.
    storage_internal::RetryPolicy policy;
    policy.deadline = DeadlineAfter(remote_timeout);
    ARROW_ASSIGN_OR_RAISE(
        input, storage_internal::RemoteFile::Open(
                   catalog.filesystem(), entry.path, entry.size,
                   storage_internal::RemoteName(*catalog.filesystem(), entry.path), policy,
                   std::make_shared<std::atomic<int64_t>>(0)));
  }
  OpenedFile out;
  out.failure = std::make_shared<ReadFailure>();
  out.file = std::make_shared<TrackedFile>(std::move(input), out.failure);
  return out;
}

}  // namespace shardfeed
