#include <string>

#include <gtest/gtest.h>

#include "shardfeed/engine.h"
#include "shardfeed/status.h"

namespace shardfeed {
namespace {

void ExpectNamed(const EngineOptions& o, const std::string& name) {
  const auto st = o.Validate();
  EXPECT_EQ(KindOf(st), ErrorKind::kInvalidArgument) << name;
  EXPECT_NE(st.message().find(name), std::string::npos) << st.message();
}

TEST(EngineOptions, DefaultsAreValid) {
  const EngineOptions o;
  EXPECT_TRUE(o.Validate().ok());
  EXPECT_EQ(o.queue_depth, 8);
  EXPECT_EQ(o.prefetch_bytes, int64_t{256} << 20);
}

TEST(EngineOptions, ValidateNamesTheSetting) {
  EngineOptions o;
  o.num_threads = 0;
  ExpectNamed(o, "num_threads");
  o.num_threads = 1 << 20;
  ExpectNamed(o, "num_threads");
  o = EngineOptions{};
  o.queue_depth = 0;
  ExpectNamed(o, "prefetch");
  o = EngineOptions{};
  o.prefetch_bytes = -1;
  ExpectNamed(o, "prefetch_bytes");
}

}  // namespace
}  // namespace shardfeed
