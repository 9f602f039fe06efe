#include "catalog/remote_fs.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>

#include <arrow/filesystem/gcsfs.h>
#include <gtest/gtest.h>

namespace shardfeed {
namespace {

using Detail = arrow::fs::S3RetryStrategy::AWSErrorDetail;

Detail Retryable(bool retry) { return Detail{0, "connection refused", "", retry}; }

// The waits of every retry the strategy allows, added up (at most 1000 retries).
int64_t TotalWaitMs(arrow::fs::S3RetryStrategy& strategy, int64_t* retries) {
  int64_t total = 0;
  *retries = 0;
  while (*retries < 1000 && strategy.ShouldRetry(Retryable(true), *retries)) {
    const int64_t wait = strategy.CalculateDelayBeforeNextRetry(Retryable(true), *retries);
    EXPECT_GE(wait, 0);
    EXPECT_LE(wait, 5000);
    total += wait;
    ++*retries;
  }
  return total;
}

TEST(BoundedRetry, WaitsAddUpToTheBudgetAtMost) {
  for (const double budget : {0.1, 0.35, 1.0, 5.0, 30.0, 600.0}) {
    auto strategy = MakeBoundedRetry(budget);
    int64_t retries = 0;
    const int64_t total = TotalWaitMs(*strategy, &retries);
    EXPECT_LE(total, static_cast<int64_t>(budget * 1000)) << budget;
    EXPECT_GE(retries, 1) << budget;
    EXPECT_LT(retries, 1000) << budget;
  }
}

TEST(BoundedRetry, ALongerBudgetRetriesMore) {
  int64_t short_retries = 0;
  int64_t long_retries = 0;
  TotalWaitMs(*MakeBoundedRetry(1.0), &short_retries);
  TotalWaitMs(*MakeBoundedRetry(60.0), &long_retries);
  EXPECT_GT(long_retries, short_retries);
}

TEST(BoundedRetry, WhatTheSdkDoesNotRetryIsNotRetried) {
  auto strategy = MakeBoundedRetry(60.0);
  EXPECT_FALSE(strategy->ShouldRetry(Retryable(false), 0));
  EXPECT_TRUE(strategy->ShouldRetry(Retryable(true), 0));
  EXPECT_FALSE(strategy->ShouldRetry(Retryable(true), -1));
}

TEST(BoundedRetry, NoBudgetNoRetries) {
  for (const double budget : {0.0, -1.0, std::nan(""), 0.05}) {
    EXPECT_FALSE(MakeBoundedRetry(budget)->ShouldRetry(Retryable(true), 0)) << budget;
  }
  // A budget too large to count in milliseconds still ends.
  int64_t retries = 0;
  TotalWaitMs(*MakeBoundedRetry(std::numeric_limits<double>::infinity()), &retries);
  EXPECT_EQ(retries, 0);
  EXPECT_TRUE(MakeBoundedRetry(1e300)->ShouldRetry(Retryable(true), 100000));
}

double GcsRetryLimit(const std::string& uri, double remote_timeout, std::string* path) {
  auto fs = MakeRemoteFileSystem(uri, remote_timeout, path);
  EXPECT_TRUE(fs.ok()) << fs.status().ToString();
  if (!fs.ok()) return -1;
  auto gcs = std::dynamic_pointer_cast<arrow::fs::GcsFileSystem>(*fs);
  EXPECT_NE(gcs, nullptr);
  if (!gcs || !gcs->options().retry_limit_seconds) return -1;
  return *gcs->options().retry_limit_seconds;
}

TEST(RemoteFileSystem, GcsRetriesForHalfTheRemoteTimeoutAtMost10sUnlessTheUriSays) {
  const std::string base = "gs://anonymous@bucket/dir/a.parquet";
  std::string path;
  EXPECT_DOUBLE_EQ(GcsRetryLimit(base, 7.5, &path), 3.75);
  EXPECT_EQ(path, "bucket/dir/a.parquet");
  EXPECT_DOUBLE_EQ(GcsRetryLimit(base + "?scheme=http", 3, &path), 1.5);
  EXPECT_DOUBLE_EQ(GcsRetryLimit(base + "?", 3, &path), 1.5);
  EXPECT_DOUBLE_EQ(GcsRetryLimit(base, 600, &path), 10);  // at most 10 s whatever the timeout
  EXPECT_DOUBLE_EQ(GcsRetryLimit(base + "?retry_limit_seconds=2", 30, &path), 2);
  EXPECT_EQ(path, "bucket/dir/a.parquet");
  EXPECT_DOUBLE_EQ(GcsRetryLimit(base + "?scheme=http&retry_limit_seconds=4", 30, &path), 4);
  // The text in an object key (or a fragment) is no option: the limit is ours.
  const std::string key = "gs://anonymous@bucket/retry_limit_seconds=900/a.parquet";
  EXPECT_DOUBLE_EQ(GcsRetryLimit(key, 3, &path), 1.5);
  EXPECT_EQ(path, "bucket/retry_limit_seconds=900/a.parquet");
  EXPECT_DOUBLE_EQ(GcsRetryLimit(base + "?scheme=http#retry_limit_seconds=900", 3, &path), 1.5);
}

TEST(StorageId, AzureAccountsAndHdfsClustersAreApart) {
  const std::string a = StorageId("abfs", "abfs://data@alpha.dfs.core.windows.net/ds", nullptr);
  const std::string b = StorageId("abfs", "abfs://data@beta.dfs.core.windows.net/ds", nullptr);
  EXPECT_NE(a, b);  // the same path, container/ds, in two accounts
  EXPECT_EQ(a, "abfs||host=alpha.dfs.core.windows.net");
  EXPECT_EQ(StorageId("abfs", "abfs://data@alpha.dfs.core.windows.net/other?x=1", nullptr),
            "abfs|x=1|host=alpha.dfs.core.windows.net");
  EXPECT_NE(StorageId("hdfs", "hdfs://nn1:8020/ds", nullptr),
            StorageId("hdfs", "hdfs://nn2:8020/ds", nullptr));
  EXPECT_EQ(StorageId("hdfs", "hdfs://user@nn1:8020/ds", nullptr), "hdfs||host=nn1:8020");
  // S3 and GCS keep the bucket in the path: their ids are as before (caches stay warm).
  EXPECT_EQ(StorageId("s3", "s3://bucket/ds?endpoint_override=h:1", nullptr),
            "s3|endpoint_override=h:1");
  EXPECT_EQ(StorageId("s3", "s3://bucket/ds", "http://h:2"), "s3||http://h:2");
  EXPECT_EQ(StorageId("gcs", "gs://bucket/ds", nullptr), "gcs|");
  EXPECT_EQ(StorageId("local", "/data/ds", nullptr), "local|");
}

}  // namespace
}  // namespace shardfeed
