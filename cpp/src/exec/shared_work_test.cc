#include "exec/shared_work.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace shardfeed {
namespace {

TEST(SharedWork, EveryPartRunsOnceWhoeverTakesIt) {
  constexpr size_t kParts = 200;
  std::vector<std::atomic<int>> runs(kParts);
  auto work = std::make_shared<SharedWork>(kParts, [&](size_t part) {
    runs[part].fetch_add(1);
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    return arrow::Status::OK();
  });
  std::vector<std::thread> helpers;
  std::atomic<int> taken{0};
  for (int t = 0; t < 3; ++t) {
    helpers.emplace_back([&] {
      while (work->RunOne()) taken.fetch_add(1);
    });
  }
  EXPECT_TRUE(work->Finish().ok());
  // Finish returned: every part has run, including those the helpers took.
  for (size_t p = 0; p < kParts; ++p) EXPECT_EQ(runs[p].load(), 1) << p;
  for (auto& h : helpers) h.join();
  EXPECT_FALSE(work->has_work());
  EXPECT_FALSE(work->RunOne());
  EXPECT_LE(taken.load(), static_cast<int>(kParts));
}

TEST(SharedWork, TheOwnerWaitsForAPartAHelperIsRunning) {
  std::atomic<bool> release{false};
  std::atomic<bool> helper_started{false};
  std::atomic<bool> part_done{false};
  auto work = std::make_shared<SharedWork>(1, [&](size_t) {
    helper_started = true;
    while (!release.load()) std::this_thread::yield();
    part_done = true;
    return arrow::Status::OK();
  });
  std::thread helper([&] { EXPECT_TRUE(work->RunOne()); });
  while (!helper_started.load()) std::this_thread::yield();
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    release = true;
  });
  EXPECT_TRUE(work->Finish().ok());
  EXPECT_TRUE(part_done.load());
  helper.join();
  releaser.join();
}

TEST(SharedWork, AnErrorOrAnExceptionOfAnyPartIsTheOwners) {
  auto failing = std::make_shared<SharedWork>(4, [](size_t part) {
    return part == 2 ? arrow::Status::IOError("part 2") : arrow::Status::OK();
  });
  const auto status = failing->Finish();
  EXPECT_TRUE(status.IsIOError());
  EXPECT_NE(status.message().find("part 2"), std::string::npos);
  auto throwing = std::make_shared<SharedWork>(3, [](size_t part) -> arrow::Status {
    if (part == 1) throw std::runtime_error("thrown in part 1");
    return arrow::Status::OK();
  });
  const auto thrown = throwing->Finish();
  EXPECT_FALSE(thrown.ok());
  EXPECT_NE(thrown.message().find("thrown in part 1"), std::string::npos);
  // No parts: nothing to run, nothing to wait for.
  EXPECT_TRUE(SharedWork(0, [](size_t) { return arrow::Status::OK(); }).Finish().ok());
}

}  // namespace
}  // namespace shardfeed
