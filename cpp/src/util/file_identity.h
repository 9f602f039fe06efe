// One text for "this version of this file", from stat(2) (internal).
#pragma once

#include <sys/stat.h>

#include <string>

namespace shardfeed {

// "<dev>:<ino>:<size>:<mtime ns>:<ctime ns>". The change time too: a write in
// place with the modification time set back (touch -d, cp -p) still moves it.
std::string StatIdentity(const struct stat& st);

// StatIdentity of the file at `path`, or "" when it cannot be stat'ed.
std::string StatIdentityAt(const std::string& path);

// StatIdentity of the open file `fd`, or "" when it cannot be fstat'ed.
std::string StatIdentityOf(int fd);

}  // namespace shardfeed
