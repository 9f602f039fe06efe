// A record that a decoded-tier entry's buffers matched their digest
// (internal).
//
// Checking the digest reads every byte of an entry.  A process that maps an
// entry checks it once; without a record each DataLoader worker (new
// processes every epoch) and each rank of a node would read the whole tier
// again.  After a check, the entry's lock file ("<hash>.lock") gets a stamp:
// which file (device, inode, size, modification and change times in ns)
// held which buffers' digest.  A process whose mapped file has that identity
// skips the buffers' digest; the header's digest and every offset and size
// are still checked on every load.  Any write to the file, or its
// replacement, changes its change time (which no user can set), so the stamp
// no longer matches.  The stamp carries its own digest: a torn or foreign
// one is ignored.  What a stamp gives up: damage that changes no metadata
// (silent media corruption after the check) is not seen until the file is
// written again or the tier cleared; shardfeed itself never writes an entry
// in place (temporary file, then rename: a new inode).
#pragma once

#include <cstdint>
#include <string>

namespace shardfeed {

// Whether `stamp_path` records that the file open as `fd` held `data_digest`.
bool StampMatches(const std::string& stamp_path, int fd, uint64_t data_digest);

// Records that the file open as `fd` held `data_digest` (best effort: a
// failure only means the next process checks again).
void WriteStamp(const std::string& stamp_path, int fd, uint64_t data_digest);

}  // namespace shardfeed
