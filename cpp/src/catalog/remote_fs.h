// Remote filesystems whose requests give up with the loader (internal).
//
// A read that gets no answer within remote_timeout is abandoned by its caller
// (CallBefore), but the request goes on retrying on its own thread: Arrow's S3
// client by default retried a refused connection for seconds per request, and
// GCS retries for up to 15 minutes.  Meanwhile making any new S3 client in the
// process waits (in Arrow, on a lock) for every request in flight: after a
// server died, the next Loader of another store or credentials waited 10-30 s.
// Here one request's retries stop once their waits add up to remote_timeout / 2
// or 10 s (so its own error, such as a refused connection, comes before the
// caller's deadline), or once its caller gave up (CallAbandoned); and
// RetryPolicy::deadline stops shardfeed's retries of a read.
#pragma once

#include <memory>
#include <string>

#include <arrow/filesystem/filesystem.h>
#include <arrow/filesystem/s3fs.h>
#include <arrow/result.h>

namespace shardfeed {

// The S3 retry strategy of a loader: retries what the SDK calls retryable
// (connection errors, 5xx, throttling such as SlowDown) with exponential,
// jittered waits (100 ms doubling, at most 5 s each) until the waits would
// pass `budget_seconds` in all; <= 0 or NaN: no retries.
std::shared_ptr<arrow::fs::S3RetryStrategy> MakeBoundedRetry(double budget_seconds);

// FileSystemFromUriOrPath(uri, path) with one request's retries bounded by
// min(`remote_timeout` / 2, 10 s) (when > 0): S3 gets MakeBoundedRetry, GCS that
// retry_limit_seconds unless the URI names one.  Other schemes as they are.
arrow::Result<std::shared_ptr<arrow::fs::FileSystem>> MakeRemoteFileSystem(const std::string& uri,
                                                                           double remote_timeout,
                                                                           std::string* path);

// Which storage a catalog's files are on, for the keys of cache entries (no
// secret in it): the filesystem type, the URI's query (S3's endpoint_override,
// Azure's account_name, ...) and `aws_endpoint` (AWS_ENDPOINT_URL, or null) for
// S3.  For Azure and HDFS also the URI's host (after any `user@`), which Arrow's
// path leaves out (`abfs://container@ACCOUNT.dfs.core.windows.net/key` has the
// path `container/key`): two accounts or clusters never share entries.
// `redacted_uri`: the source with its secrets masked (RedactUri).
std::string StorageId(const std::string& fs_type, const std::string& redacted_uri,
                      const char* aws_endpoint);

}  // namespace shardfeed
