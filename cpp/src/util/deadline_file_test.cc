#include "util/deadline_file.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include <gtest/gtest.h>

namespace shardfeed {
namespace {

using namespace std::chrono_literals;

// A call that runs until CallAbandoned() turns true on its thread (at most 10 s).
struct Watcher {
  std::atomic<bool> saw_abandoned{false};
  std::atomic<bool> ended{false};
  arrow::Result<int> Run() {
    const auto give_up = std::chrono::steady_clock::now() + 10s;
    while (!CallAbandoned() && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(5ms);
    }
    saw_abandoned = CallAbandoned();
    ended = true;
    return 1;
  }
  void WaitEnded() const {
    const auto give_up = std::chrono::steady_clock::now() + 10s;
    while (!ended && std::chrono::steady_clock::now() < give_up) std::this_thread::sleep_for(5ms);
  }
};

TEST(CallBefore, AnAbandonedCallSeesItOnItsThread) {
  EXPECT_FALSE(CallAbandoned());  // not a CallBefore thread
  auto watcher = std::make_shared<Watcher>();
  auto result = CallBefore<int>([watcher] { return watcher->Run(); },
                                std::chrono::steady_clock::now() + 50ms, 0.05, nullptr);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("0.05 s"), std::string::npos) << result.status();
  watcher->WaitEnded();
  EXPECT_TRUE(watcher->ended);
  EXPECT_TRUE(watcher->saw_abandoned);
}

TEST(CallBefore, AStoppedCallIsAbandonedToo) {
  auto watcher = std::make_shared<Watcher>();
  std::atomic<bool> stop{false};
  std::thread stopper([&stop] {
    std::this_thread::sleep_for(50ms);
    stop = true;
  });
  auto result = CallBefore<int>([watcher] { return watcher->Run(); }, DeadlineAfter(60), 60,
                                [&stop] { return stop.load(); });
  stopper.join();
  ASSERT_TRUE(result.status().IsCancelled()) << result.status();
  watcher->WaitEnded();
  EXPECT_TRUE(watcher->saw_abandoned);
}

TEST(CallBefore, ACallAnsweredInTimeIsNotAbandoned) {
  std::atomic<bool> seen{true};
  auto result = CallBefore<int>(
      [&seen]() -> arrow::Result<int> {
        seen = CallAbandoned();
        return 7;
      },
      DeadlineAfter(60), 60, nullptr);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(*result, 7);
  EXPECT_FALSE(seen);
}

}  // namespace
}  // namespace shardfeed
