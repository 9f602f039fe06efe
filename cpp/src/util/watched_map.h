// Mapped files whose pages may vanish while they are read (internal).
//
// A page of a mapped file that is no longer backed (the file truncated in
// place by another program, or a read error of the disk or network file
// system beneath it) makes the thread that touches it take SIGBUS, which ends
// the process, and the Python interpreter with it.  The decoded tier maps its
// entries and reads them on the engine's threads long after it opened them.
//
// A buffer watched here turns that into an error.  A SIGBUS at an address
// inside a watched buffer maps pages of zeros over the rest of the buffer from
// the faulting page on, sets the buffer's damage flag and lets the read go on;
// whoever read the buffer checks the flag afterwards and discards what it
// read.  A SIGBUS anywhere else goes to the handler installed before ours
// (Python's faulthandler, a sanitizer's), or ends the process as it would
// have; a SIGBUS sent by kill or raise ends it, and so does a fault that the
// handler before ours returned from without fixing it.  The handler is
// installed the first time a process watches a buffer: in a child forked
// later, over a handler the child installed since (PyTorch's, in a DataLoader
// worker).  One installed after it in the same process (faulthandler.enable()
// called later) takes precedence.
// At most kWatchSlots buffers are watched at once; past that a buffer is
// served unwatched, as before.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include <arrow/buffer.h>

namespace shardfeed {

inline constexpr int kWatchSlots = 1 << 16;

// Set once a SIGBUS hit the watched buffer: what was read from it since it
// was made may be zeros instead of the file's bytes.
using DamageFlag = std::shared_ptr<const std::atomic<bool>>;

// A buffer over the same bytes as `mapped` (a whole mapped file, or a part of
// one), watched while it lives; `*flag` is its damage flag.  Slices of the
// result keep it watched.  An empty buffer is returned as it is, unwatched.
std::shared_ptr<arrow::Buffer> WatchMapped(std::shared_ptr<arrow::Buffer> mapped, DamageFlag* flag);

// The damage flag of the watched buffer that `buffer` is, or is a slice of;
// null for any other buffer.  `*watched_bytes` (when given): that watched
// buffer's size.
DamageFlag DamageFlagOf(const std::shared_ptr<arrow::Buffer>& buffer,
                        int64_t* watched_bytes = nullptr);

// Buffers watched now (for tests).
int WatchedCountForTesting();

}  // namespace shardfeed
