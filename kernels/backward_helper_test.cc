#include "kernels/backward_helper.h"

#include <omp.h>

#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/onednn_threads.h"

namespace cohort {
namespace {

// Runs `body` under a helper at `threads` compute threads.
bool RunAt(int threads, const std::function<void(BackwardHelper&)>& body) {
  SetOnednnThreads(threads);
  const bool ran = BackwardHelper::Run(body);
  SetOnednnThreads(0);
  return ran;
}

TEST(BackwardHelper, RunsOnATeamOfTwoOnly) {
  int bodies = 0;
  const auto body = [&](BackwardHelper&) { ++bodies; };
  EXPECT_FALSE(RunAt(1, body));
  EXPECT_FALSE(RunAt(3, body));
  EXPECT_EQ(bodies, 0);
  EXPECT_TRUE(RunAt(2, body));
  EXPECT_EQ(bodies, 1);
  bool nested = true;
  SetOnednnThreads(2);
#pragma omp parallel num_threads(2)
  {
#pragma omp master
    nested = BackwardHelper::Run(body);
  }
  SetOnednnThreads(0);
  EXPECT_FALSE(nested);
  EXPECT_EQ(bodies, 1);
}

TEST(BackwardHelper, CurrentIsTheBodysHelperOnTheBodysThreadOnly) {
  EXPECT_EQ(BackwardHelper::Current(), nullptr);
  BackwardHelper* in_body = nullptr;
  bool task_saw_a_helper = true;
  ASSERT_TRUE(RunAt(2, [&](BackwardHelper& helper) {
    in_body = BackwardHelper::Current();
    EXPECT_EQ(in_body, &helper);
    helper.Push(
        [&] { task_saw_a_helper = BackwardHelper::Current() != nullptr; });
    helper.Wait(1);
  }));
  EXPECT_NE(in_body, nullptr);
  EXPECT_FALSE(task_saw_a_helper);
  EXPECT_EQ(BackwardHelper::Current(), nullptr);
}

// The helper runs tasks in the order pushed, so done() counts a prefix of
// them until Finish, which runs the rest on both threads; the first task
// runs on the helper, not on the body's thread.
TEST(BackwardHelper, TasksRunInOrderAndAllBeforeRunReturns) {
  constexpr int kTasks = 64;
  std::vector<std::atomic<int>> ran(kTasks);
  std::atomic<int> order{0};
  std::thread::id caller, first_task;
  ASSERT_TRUE(RunAt(2, [&](BackwardHelper& helper) {
    caller = std::this_thread::get_id();
    for (int t = 0; t < kTasks; ++t) {
      helper.Push([&, t] {
        if (t == 0) first_task = std::this_thread::get_id();
        ran[t].store(1 + order.fetch_add(1));
      });
      EXPECT_EQ(helper.pushed(), t + 1);
      if (t % 8 == 7) {
        helper.Wait(t + 1);
        EXPECT_GE(helper.done(), t + 1);
        for (int u = 0; u <= t; ++u) ASSERT_EQ(ran[u].load(), u + 1) << u;
      }
    }
    for (int t = 0; t < 4; ++t) helper.Push([&] { order.fetch_add(1); });
  }));
  EXPECT_EQ(order.load(), kTasks + 4);
  EXPECT_NE(first_task, caller);
}

}  // namespace
}  // namespace cohort
