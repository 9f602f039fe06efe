#include "storage/retry.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <random>
#include <string_view>

#include <arrow/buffer.h>
#include <arrow/util/io_util.h>

#include "shardfeed/status.h"

namespace shardfeed::storage_internal {

void Interrupt::Request() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    requested_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

bool Interrupt::SleepFor(double seconds) const {
  std::unique_lock<std::mutex> lock(mu_);
  return !cv_.wait_for(lock, std::chrono::duration<double>(std::max(0.0, seconds)),
                       [this] { return requested(); });
}

double RetryPolicy::Delay(int attempt) const {
  thread_local std::minstd_rand rng{std::random_device{}()};
  const double exp = base_seconds * std::ldexp(1.0, std::min(attempt, 30));
  const double capped = std::min(exp, max_seconds);
  return capped * std::uniform_real_distribution<double>(0.5, 1.0)(rng);
}

bool IsRetryable(const arrow::Status& status) {
  if (status.ok() || status.IsCancelled() || status.IsInvalid() || status.IsKeyError() ||
      status.IsTypeError() || status.IsNotImplemented() || status.IsOutOfMemory()) {
    return false;
  }
  switch (arrow::internal::ErrnoFromStatus(status)) {
    case ENOENT:
    case ENOTDIR:
    case EISDIR:
    case EACCES:
    case EPERM:
      return false;
    default:
      break;
  }
  // Arrow's S3 and GCS filesystems report these in the message only.
  static constexpr std::string_view kPermanent[] = {
      "NO_SUCH_KEY",           "NoSuchKey",
      "NO_SUCH_BUCKET",        "NoSuchBucket",
      "ACCESS_DENIED",         "AccessDenied",
      "RESOURCE_NOT_FOUND",    "Path does not exist",
      "INVALID_ACCESS_KEY_ID", "SIGNATURE_DOES_NOT_MATCH"};
  for (auto needle : kPermanent) {
    if (status.message().find(needle) != std::string::npos) return false;
  }
  return true;
}

std::string RemoteName(const arrow::fs::FileSystem& fs, const std::string& path) {
  return fs.type_name() + "://" + path;
}

arrow::Result<std::shared_ptr<RemoteFile>> RemoteFile::Open(
    const std::shared_ptr<arrow::fs::FileSystem>& fs, const std::string& path, int64_t size,
    const std::string& key, RetryPolicy policy,
    std::shared_ptr<std::atomic<int64_t>> remote_bytes) {
  arrow::fs::FileInfo info(path, arrow::fs::FileType::File);
  info.set_size(size);
  auto inner = Retry(policy, nullptr, [&] { return fs->OpenInputFile(info); });
  if (!inner.ok()) {
    return Error(ErrorKind::kStorage,
                 "cannot open remote file '" + key + "': " + inner.status().message());
  }
  return std::make_shared<RemoteFile>(std::move(*inner), key, policy, std::move(remote_bytes),
                                      size);
}

RemoteFile::RemoteFile(std::shared_ptr<arrow::io::RandomAccessFile> inner, std::string key,
                       RetryPolicy policy, std::shared_ptr<std::atomic<int64_t>> remote_bytes,
                       int64_t size)
    : inner_(std::move(inner)),
      key_(std::move(key)),
      policy_(policy),
      remote_bytes_(std::move(remote_bytes)),
      size_(size) {}

// A ranged GET whose body came short with a matching Content-Length (a proxy,
// a connection cut where curl cannot tell) hands Arrow fewer bytes than it
// asked for, and Arrow decodes what it gets: shifted values, no error.
arrow::Status RemoteFile::CheckLength(int64_t position, int64_t nbytes, int64_t got) const {
  const int64_t want = std::max<int64_t>(0, std::min(nbytes, size_ - position));
  if (got >= want) return arrow::Status::OK();
  return arrow::Status::IOError("short read: ", got, " of ", want, " bytes at offset ", position);
}

arrow::Result<int64_t> RemoteFile::ReadMarked(int64_t position, int64_t nbytes, void* out) {
  const int64_t want = std::max<int64_t>(0, std::min(nbytes, size_ - position));
  if (want == 0) return inner_->ReadAt(position, nbytes, out);
  // The last byte is set to a mark first; still the mark after the read, the range is
  // read again under another mark, and a byte that keeps that one too was never
  // written.  (A last byte that is the first mark costs one read more: 1 in 256.)
  auto& last = static_cast<uint8_t*>(out)[want - 1];
  for (const uint8_t mark : {uint8_t{0x5A}, uint8_t{0xA5}}) {
    last = mark;
    ARROW_ASSIGN_OR_RAISE(const int64_t got, inner_->ReadAt(position, nbytes, out));
    if (got < want || last != mark) return got;  // (a short count: CheckLength's)
  }
  return arrow::Status::IOError("short read: the storage sent fewer than the ", want,
                                " bytes asked for at offset ", position);
}

arrow::Status RemoteFile::Named(const arrow::Status& status) const {
  if (status.ok() || status.IsCancelled()) return status;
  return Error(ErrorKind::kStorage, "reading remote file '" + key_ + "': " + status.message());
}

template <typename Op>
auto RemoteFile::Checked(int64_t position, int64_t nbytes, Op&& read) -> decltype(read()) {
  using R = decltype(read());
  return Count(Retry(policy_, nullptr, [&]() -> R {
    R got = read();
    if (!got.ok()) return got;
    int64_t n;
    if constexpr (std::is_same_v<R, arrow::Result<int64_t>>) {
      n = *got;
    } else {
      n = (*got)->size();
    }
    ARROW_RETURN_NOT_OK(CheckLength(position, nbytes, n));
    return got;
  }));
}

template <typename R>
R RemoteFile::Count(R result) {
  if (!result.ok()) return Named(result.status());
  int64_t bytes;
  if constexpr (std::is_same_v<R, arrow::Result<int64_t>>) {
    bytes = *result;
  } else {
    bytes = (*result)->size();
  }
  remote_bytes_->fetch_add(bytes, std::memory_order_relaxed);
  return result;
}

arrow::Status RemoteFile::Close() { return inner_->Close(); }
bool RemoteFile::closed() const { return inner_->closed(); }
arrow::Result<int64_t> RemoteFile::Tell() const { return inner_->Tell(); }
arrow::Status RemoteFile::Seek(int64_t position) { return inner_->Seek(position); }

arrow::Result<int64_t> RemoteFile::GetSize() {
  auto size = Retry(policy_, nullptr, [&] { return inner_->GetSize(); });
  if (!size.ok()) return Named(size.status());
  return size;
}

// Sequential reads are not retried (a failed read may have moved the
// position); the engine reads through ReadAt.
arrow::Result<int64_t> RemoteFile::Read(int64_t nbytes, void* out) {
  return Count(inner_->Read(nbytes, out));
}

arrow::Result<std::shared_ptr<arrow::Buffer>> RemoteFile::Read(int64_t nbytes) {
  return Count(inner_->Read(nbytes));
}

arrow::Result<int64_t> RemoteFile::ReadAt(int64_t position, int64_t nbytes, bool allow_short_read,
                                          void* out) {
  (void)allow_short_read;  // a short read is retried, then an error (CheckLength)
  return Checked(position, nbytes, [&] { return ReadMarked(position, nbytes, out); });
}

arrow::Result<int64_t> RemoteFile::ReadAt(int64_t position, int64_t nbytes, void* out) {
  return Checked(position, nbytes, [&] { return ReadMarked(position, nbytes, out); });
}

arrow::Result<std::shared_ptr<arrow::Buffer>> RemoteFile::ReadAt(int64_t position, int64_t nbytes,
                                                                 bool allow_short_read) {
  (void)allow_short_read;
  return ReadAt(position, nbytes);
}

// Into a buffer of our own, so that its last byte can be marked (ReadMarked).
arrow::Result<std::shared_ptr<arrow::Buffer>> RemoteFile::ReadAt(int64_t position, int64_t nbytes) {
  return Checked(position, nbytes, [&]() -> arrow::Result<std::shared_ptr<arrow::Buffer>> {
    if (size_ < 0) return inner_->ReadAt(position, nbytes);  // a size unknown: no end to mark
    const int64_t want = std::max<int64_t>(0, std::min(nbytes, size_ - position));
    ARROW_ASSIGN_OR_RAISE(std::shared_ptr<arrow::ResizableBuffer> buffer,
                          arrow::AllocateResizableBuffer(want));
    ARROW_ASSIGN_OR_RAISE(const int64_t got, ReadMarked(position, want, buffer->mutable_data()));
    ARROW_RETURN_NOT_OK(buffer->Resize(got, /*shrink_to_fit=*/false));
    return buffer;
  });
}

}  // namespace shardfeed::storage_internal
