#include "shardfeed/status.h"

#include <cerrno>

#include <arrow/util/io_util.h>
#include <gtest/gtest.h>

namespace shardfeed {
namespace {

TEST(Status, ContextKeepsTheKindAndTheOsCause) {
  const auto denied = arrow::internal::IOErrorFromErrno(EACCES, "Failed to open local file 'x'");
  const auto named = WithContext(denied, "file 'x'");
  EXPECT_EQ(KindOf(named), ErrorKind::kStorage);
  EXPECT_NE(named.message().find("file 'x': Failed to open local file 'x'"), std::string::npos);
  EXPECT_NE(named.message().find("Permission denied"), std::string::npos) << named.message();
  // Ours carry only the kind: said once, not as a cause.
  const auto ours = WithContext(Error(ErrorKind::kInvalidData, "bad page"), "row group 2");
  EXPECT_EQ(ours.message(), "row group 2: bad page");
  EXPECT_EQ(KindOf(ours), ErrorKind::kInvalidData);
}

}  // namespace
}  // namespace shardfeed
