#include "storage/retry.h"

#include <cerrno>
#include <chrono>
#include <string>

#include <arrow/buffer.h>
#include <arrow/io/memory.h>
#include <arrow/util/io_util.h>
#include <cstring>

#include <gtest/gtest.h>

namespace shardfeed::storage_internal {
namespace {

RetryPolicy Fast(int retries) {
  RetryPolicy policy;
  policy.max_retries = retries;
  policy.base_seconds = 0.001;
  return policy;
}

arrow::Status Transient() { return arrow::Status::IOError("503 SlowDown: please reduce rate"); }

TEST(Retry, RetriesATransientFailureUntilItSucceeds) {
  int calls = 0;
  auto result = Retry(Fast(5), nullptr, [&]() -> arrow::Result<int> {
    if (++calls < 3) return Transient();
    return 42;
  });
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(*result, 42);
  EXPECT_EQ(calls, 3);
}

TEST(Retry, GivesUpAfterTheBudget) {
  int calls = 0;
  auto status = Retry(Fast(2), nullptr, [&] {
    ++calls;
    return Transient();
  });
  EXPECT_TRUE(status.IsIOError());
  EXPECT_EQ(calls, 3);  // the first attempt and two retries
}

TEST(Retry, DoesNotRetryAPermanentFailure) {
  for (const auto& permanent :
       {arrow::Status::IOError("NoSuchKey: the key does not exist"),
        arrow::internal::IOErrorFromErrno(EACCES, "open"), arrow::Status::Invalid("bad argument"),
        arrow::Status::Cancelled("stopped")}) {
    int calls = 0;
    auto status = Retry(Fast(5), nullptr, [&] {
      ++calls;
      return permanent;
    });
    EXPECT_FALSE(status.ok());
    EXPECT_EQ(calls, 1) << permanent;
  }
}

TEST(Retry, AStopInterruptsTheBackoff) {
  RetryPolicy slow;
  slow.max_retries = 3;
  slow.base_seconds = 60;  // would wait a minute
  Interrupt stop;
  stop.Request();
  int calls = 0;
  auto status = Retry(slow, &stop, [&] {
    ++calls;
    return Transient();
  });
  EXPECT_TRUE(status.IsCancelled());
  EXPECT_EQ(calls, 1);
}

TEST(Retry, NoWaitReachesTheDeadline) {
  // A read abandoned at its deadline must end, not retry on alone.
  RetryPolicy policy = Fast(50);
  policy.base_seconds = 0.02;
  policy.max_seconds = 0.02;
  const auto start = std::chrono::steady_clock::now();
  policy.deadline = start + std::chrono::milliseconds(200);
  int calls = 0;
  auto status = Retry(policy, nullptr, [&] {
    ++calls;
    return Transient();
  });
  EXPECT_TRUE(status.IsIOError());
  EXPECT_GE(calls, 2);   // it did retry before the deadline
  EXPECT_LT(calls, 50);  // and stopped there, far from max_retries
  EXPECT_LT(std::chrono::steady_clock::now(), policy.deadline + std::chrono::milliseconds(100));

  RetryPolicy past = Fast(5);
  past.deadline = std::chrono::steady_clock::now();
  calls = 0;
  status = Retry(past, nullptr, [&] {
    ++calls;
    return Transient();
  });
  EXPECT_EQ(calls, 1);
}

TEST(Retry, DelaysGrowWithJitterAndStayCapped) {
  RetryPolicy policy;
  policy.base_seconds = 0.1;
  policy.max_seconds = 1.0;
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double full = std::min(0.1 * (1 << attempt), 1.0);
    const double d = policy.Delay(attempt);
    EXPECT_GE(d, 0.5 * full);
    EXPECT_LE(d, full);
  }
}

// Reads `bytes`, the first `short_reads` of them `cut` bytes short.
class ShortFile : public arrow::io::RandomAccessFile {
 public:
  ShortFile(std::string bytes, int short_reads, int64_t cut)
      : inner_(std::make_shared<arrow::io::BufferReader>(arrow::Buffer::FromString(bytes))),
        short_reads_(short_reads),
        cut_(cut) {}
  arrow::Status Close() override { return inner_->Close(); }
  bool closed() const override { return inner_->closed(); }
  arrow::Result<int64_t> Tell() const override { return inner_->Tell(); }
  arrow::Status Seek(int64_t position) override { return inner_->Seek(position); }
  arrow::Result<int64_t> GetSize() override { return inner_->GetSize(); }
  arrow::Result<int64_t> Read(int64_t nbytes, void* out) override {
    return inner_->Read(nbytes, out);
  }
  arrow::Result<std::shared_ptr<arrow::Buffer>> Read(int64_t nbytes) override {
    return inner_->Read(nbytes);
  }
  arrow::Result<int64_t> ReadAt(int64_t position, int64_t nbytes, void* out) override {
    return inner_->ReadAt(position, Cut(nbytes), out);
  }
  arrow::Result<std::shared_ptr<arrow::Buffer>> ReadAt(int64_t position, int64_t nbytes) override {
    return inner_->ReadAt(position, Cut(nbytes));
  }
  int reads = 0;

 private:
  int64_t Cut(int64_t nbytes) { return ++reads <= short_reads_ ? nbytes - cut_ : nbytes; }
  std::shared_ptr<arrow::io::BufferReader> inner_;
  int short_reads_;
  int64_t cut_;
};

// A file short on every read: an error that says so and names the object, after the retries.
void ExpectShortReadError(std::shared_ptr<arrow::io::RandomAccessFile> inner, size_t size) {
  RemoteFile bad(std::move(inner), "s3://b/k", Fast(2), std::make_shared<std::atomic<int64_t>>(0),
                 static_cast<int64_t>(size));
  char out[50];
  auto status = bad.ReadAt(0, 50, out).status();
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("short read"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("s3://b/k"), std::string::npos) << status.message();
}

TEST(RemoteFile, AShortReadIsRetriedAndNeverHandedOn) {
  const std::string bytes(1000, 'x');
  auto flaky = std::make_shared<ShortFile>(bytes, 2, 10);
  RemoteFile file(flaky, "s3://b/k", Fast(5), std::make_shared<std::atomic<int64_t>>(0),
                  static_cast<int64_t>(bytes.size()));
  auto got = file.ReadAt(100, 200);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ((*got)->size(), 200);
  EXPECT_EQ(flaky->reads, 3);
  // At the end of the object a shorter read is the object's end, not a fault.
  auto tail = file.ReadAt(900, 200);
  ASSERT_TRUE(tail.ok()) << tail.status().ToString();
  EXPECT_EQ((*tail)->size(), 100);
  // Short every time: an error naming the object, after the retries.
  ExpectShortReadError(std::make_shared<ShortFile>(bytes, 1000, 1), bytes.size());
}

// As Arrow's S3 file reads a ranged GET into the caller's buffer: it counts every byte
// asked for read, whether the body (the first `short_reads` times) filled it or not.
class UnwrittenTailFile : public ShortFile {
 public:
  UnwrittenTailFile(std::string bytes, int short_reads)
      : ShortFile(bytes, 0, 0), bytes_(std::move(bytes)), short_reads_(short_reads) {}
  arrow::Result<int64_t> ReadAt(int64_t position, int64_t nbytes, void* out) override {
    const int64_t sent = ++reads <= short_reads_ ? nbytes - 3 : nbytes;
    std::memcpy(out, bytes_.data() + position, static_cast<size_t>(sent));
    return nbytes;  // the tail left as it was
  }
  arrow::Result<std::shared_ptr<arrow::Buffer>> ReadAt(int64_t, int64_t) override {
    return arrow::Status::NotImplemented("the buffer form");
  }

 private:
  std::string bytes_;
  int short_reads_;
};

TEST(RemoteFile, ABodyCutShortUnderAFullCountIsCaught) {
  std::string bytes(1000, 'x');
  bytes[299] = static_cast<char>(0x5A);  // a last byte that is the first mark: read again
  for (const int short_reads : {0, 1, 2}) {
    auto flaky = std::make_shared<UnwrittenTailFile>(bytes, short_reads);
    RemoteFile file(flaky, "s3://b/k", Fast(5), std::make_shared<std::atomic<int64_t>>(0),
                    static_cast<int64_t>(bytes.size()));
    auto got = file.ReadAt(100, 200);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ((*got)->ToString(), bytes.substr(100, 200)) << short_reads;
  }
  ExpectShortReadError(std::make_shared<UnwrittenTailFile>(bytes, 1000), bytes.size());
  // A size the listing did not say: no end to mark, the read as the store gives it.
  RemoteFile unsized(std::make_shared<ShortFile>(bytes, 0, 0), "s3://b/k", Fast(2),
                     std::make_shared<std::atomic<int64_t>>(0), -1);
  auto whole = unsized.ReadAt(100, 200);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_EQ((*whole)->ToString(), bytes.substr(100, 200));
}

}  // namespace
}  // namespace shardfeed::storage_internal
