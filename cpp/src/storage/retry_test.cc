#include "storage/retry.h"

#include <cerrno>

#include <arrow/util/io_util.h>
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

}  // namespace
}  // namespace shardfeed::storage_internal
