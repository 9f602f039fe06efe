#include "tier/verified_stamp.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <string>

#include "util/hash.h"

namespace shardfeed {

namespace {

constexpr uint64_t kStampMagic = 0x31504d5453544653;  // "SFTSTMP1"
using Stamp = std::array<uint64_t, 9>;  // magic, identity (6), data digest, own digest

bool Identity(int fd, uint64_t data_digest, Stamp* out) {
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0) return false;
  auto ns = [](const struct timespec& t) {
    return static_cast<uint64_t>(t.tv_sec) * 1000000000u + static_cast<uint64_t>(t.tv_nsec);
  };
  *out = {kStampMagic,
          static_cast<uint64_t>(st.st_dev),
          static_cast<uint64_t>(st.st_ino),
          static_cast<uint64_t>(st.st_size),
          ns(st.st_mtim),
          ns(st.st_ctim),
          static_cast<uint64_t>(st.st_nlink),
          data_digest,
          0};
  (*out)[8] = Hash64(out->data(), 8 * sizeof(uint64_t));
  return true;
}

}  // namespace

bool StampMatches(const std::string& stamp_path, int fd, uint64_t data_digest) {
  Stamp want{}, have{};
  if (!Identity(fd, data_digest, &want)) return false;
  const int stamp = ::open(stamp_path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (stamp < 0) return false;
  struct stat st;
  if (::fstat(stamp, &st) != 0 || !S_ISREG(st.st_mode)) {  // a FIFO in its place
    ::close(stamp);
    return false;
  }
  const ssize_t n = ::pread(stamp, have.data(), sizeof(have), 0);
  ::close(stamp);
  return n == static_cast<ssize_t>(sizeof(have)) && have == want;
}

void WriteStamp(const std::string& stamp_path, int fd, uint64_t data_digest) {
  Stamp stamp{};
  if (!Identity(fd, data_digest, &stamp)) return;
  // Not blocking, and a regular file only: a FIFO in the stamp's place would
  // wait for a reader (for good), beyond Ctrl-C.
  const int out = ::open(stamp_path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0600);
  if (out < 0) return;
  struct stat st;
  if (::fstat(out, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(out);
    return;
  }
  const ssize_t n = ::pwrite(out, stamp.data(), sizeof(stamp), 0);
  (void)n;  // a short write leaves a stamp whose own digest fails
  ::close(out);
}

}  // namespace shardfeed
