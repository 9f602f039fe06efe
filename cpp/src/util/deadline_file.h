// A remote file whose reads give up at a deadline (internal).
//
// A server that accepts connections and never answers stalls a read until the
// HTTP client's low-speed timeout, then the client and the caller retry: the
// first error came after minutes.  Every read through this wrapper waits at
// most until one deadline (set when the file is opened for a row group, so it
// counts retries and every range of that row group), then fails with a
// StorageError.  The abandoned request ends on its own thread.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>

#include <arrow/io/interfaces.h>
#include <arrow/result.h>

namespace shardfeed {

// `inner` with reads bounded by now + `timeout_seconds` (<= 0: no deadline,
// `inner` itself is returned).  A read also gives up (Cancelled) soon after
// `*stop` becomes true, so that stopping an engine never waits for a hung server.
std::shared_ptr<arrow::io::RandomAccessFile> WithDeadline(
    std::shared_ptr<arrow::io::RandomAccessFile> inner, double timeout_seconds,
    const std::atomic<bool>* stop = nullptr);

}  // namespace shardfeed
