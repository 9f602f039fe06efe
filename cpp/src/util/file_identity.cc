#include "util/file_identity.h"

#include <cstdint>

namespace shardfeed {

namespace {

std::string Ns(const struct timespec& t) {
  return std::to_string(static_cast<uint64_t>(t.tv_sec) * 1000000000u +
                        static_cast<uint64_t>(t.tv_nsec));
}

}  // namespace

std::string StatIdentity(const struct stat& st) {
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" +
         std::to_string(st.st_size) + ":" + Ns(st.st_mtim) + ":" + Ns(st.st_ctim);
}

std::string StatIdentityAt(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return StatIdentity(st);
}

std::string StatIdentityOf(int fd) {
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0) return {};
  return StatIdentity(st);
}

}  // namespace shardfeed
