// The adaptive completion wait's schedule, driven by a fake clock and a fake GPU (no CUDA).
#include <algorithm>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "completion_wait.h"

namespace {

using etserve::AdaptiveWaitPolicy;

// Time advances only by sleeps (plus a fixed wake-up delay) and by a fixed cost per query.
class FakeClock final : public AdaptiveWaitPolicy::Clock {
 public:
  int64_t now = 0;
  int64_t wake_delay = 0;
  int64_t slept = 0;
  std::vector<int64_t> sleeps;
  int64_t now_ns() override { return now; }
  void sleep_ns(int64_t ns) override {
    sleeps.push_back(ns);
    slept += ns;
    now += ns + wake_delay;
  }
};

// A stream whose work completes `duration` after the wait starts; every query costs `cost`.
struct FakeGpu {
  FakeClock& clock;
  int64_t done_at;
  int64_t cost = 500;
  int queries = 0;
  int64_t spun = 0;  // time spent in queries: the CPU the wait burns
  int error = 0;     // returned (negated) from the first query at or after done_at
  int operator()() {
    ++queries;
    clock.now += cost;
    spun += cost;
    if (clock.now < done_at) return 0;
    return error != 0 ? -error : 1;
  }
};

struct Call {
  int64_t overhead;  // completion seen minus completion
  int64_t cpu;       // query time
  int result;
};

Call run_once(AdaptiveWaitPolicy& policy, int64_t duration, int64_t wake_delay = 3'000, int error = 0) {
  FakeClock clock;
  clock.wake_delay = wake_delay;
  clock.now = 1'000'000;
  FakeGpu gpu{clock, clock.now + duration};
  gpu.error = error;
  const int r = policy.wait(gpu, clock);
  return {clock.now - gpu.done_at, gpu.spun, r};
}

TEST(AdaptiveWait, LearnsTheGpuTimeAndThenSleepsThroughMostOfIt) {
  AdaptiveWaitPolicy policy;
  const int64_t kernel = 2'000'000;  // 2 ms
  Call first = run_once(policy, kernel);
  EXPECT_EQ(first.result, 0);
  EXPECT_GT(policy.estimate_ns(), 0);
  Call last{};
  for (int i = 0; i < 200; ++i) last = run_once(policy, kernel);
  // Converged: the sleep ends shortly before completion, a short spin sees it.
  EXPECT_NEAR(static_cast<double>(policy.estimate_ns()), static_cast<double>(kernel), 0.05 * kernel);
  EXPECT_LE(last.overhead, 30'000);
  EXPECT_LE(last.cpu, kernel / 10);
}

TEST(AdaptiveWait, TheSpinOfLongWorkStaysAtItsSmallMargin) {
  // The margin is a 200th of the work, at most 50 us: a 10 ms kernel costs the host about
  // that much polling, not a fortieth of it (the schedule before this one).
  AdaptiveWaitPolicy policy;
  const int64_t kernel = 10'000'000;
  for (int i = 0; i < 100; ++i) run_once(policy, kernel);
  int64_t cpu = 0;
  for (int i = 0; i < 20; ++i) cpu += run_once(policy, kernel).cpu;
  EXPECT_LE(cpu / 20, 2 * AdaptiveWaitPolicy::Tuning{}.max_margin_ns);
}

TEST(AdaptiveWait, ASleepSliceSplitsTheSleepWithoutChangingWhenItEnds) {
  AdaptiveWaitPolicy::Tuning chunked;
  chunked.sleep_slice_ns = 100'000;
  AdaptiveWaitPolicy whole, split(chunked);
  const int64_t kernel = 2'000'000;
  for (int i = 0; i < 100; ++i) {
    run_once(whole, kernel);
    run_once(split, kernel);
  }
  FakeClock clock;
  clock.wake_delay = 3'000;
  FakeGpu gpu{clock, kernel};
  ASSERT_EQ(split.wait(gpu, clock), 0);
  ASSERT_GT(clock.sleeps.size(), 10u);
  for (int64_t s : clock.sleeps) EXPECT_LE(s, chunked.sleep_slice_ns);
  // Each wake-up's delay is learned as lateness only once: the split sleep ends as close to
  // the completion as the whole one does.
  EXPECT_LE(clock.now - gpu.done_at, 30'000);
  EXPECT_LE(gpu.spun, kernel / 10);
  EXPECT_NEAR(static_cast<double>(split.estimate_ns()), static_cast<double>(whole.estimate_ns()), 0.05 * kernel);
}

TEST(AdaptiveWait, ASlicedSleepEndsSoonAfterWorkThatFinishedEarly) {
  AdaptiveWaitPolicy::Tuning chunked;
  chunked.sleep_slice_ns = 50'000;
  AdaptiveWaitPolicy policy(chunked);
  for (int i = 0; i < 100; ++i) run_once(policy, 10'000'000);
  // The program's work is suddenly a tenth as long (a shorter input, say): the call ends by
  // twice its work's time, not at the 10 ms it expected, after a handful of queries.
  FakeClock clock;
  clock.wake_delay = 3'000;
  FakeGpu gpu{clock, 1'000'000};
  ASSERT_EQ(policy.wait(gpu, clock), 0);
  EXPECT_EQ(policy.last_ended(), AdaptiveWaitPolicy::Ended::kOverslept);
  EXPECT_LE(clock.now - gpu.done_at, 1'000'000);
  EXPECT_LE(gpu.queries, 8);
  EXPECT_LE(policy.estimate_ns(), 2'000'000);
  // ... and the next calls find it in the spin again.
  for (int i = 0; i < 20; ++i) run_once(policy, 1'000'000);
  Call settled = run_once(policy, 1'000'000);
  EXPECT_EQ(policy.last_ended(), AdaptiveWaitPolicy::Ended::kInSpin);
  EXPECT_LE(settled.overhead, 30'000);
}

TEST(AdaptiveWait, TheLastWaitSaysHowItEnded) {
  AdaptiveWaitPolicy policy;
  EXPECT_EQ(policy.last_ended(), AdaptiveWaitPolicy::Ended::kNone);
  run_once(policy, 2'000'000);  // nothing learned: found in the back-off
  EXPECT_EQ(policy.last_ended(), AdaptiveWaitPolicy::Ended::kInBackoff);
  for (int i = 0; i < 100; ++i) run_once(policy, 2'000'000);
  EXPECT_EQ(policy.last_ended(), AdaptiveWaitPolicy::Ended::kInSpin);
  run_once(policy, 0);  // complete before the wait
  EXPECT_EQ(policy.last_ended(), AdaptiveWaitPolicy::Ended::kAtStart);
  const auto s = policy.stats();
  EXPECT_EQ(s.at_start + s.overslept + s.in_spin + s.in_backoff, 102u);
}

TEST(AdaptiveWait, LearnsHowLateSleepsWakeAndSleepsThatMuchLess) {
  AdaptiveWaitPolicy policy;
  const int64_t kernel = 2'000'000;
  // A host whose sleeps wake 150 us late (idle states, a busy scheduler): more than the margin.
  for (int i = 0; i < 200; ++i) run_once(policy, kernel, 150'000);
  EXPECT_GE(policy.lateness_ns(), 100'000);
  int64_t worst_overhead = 0, worst_cpu = 0;
  for (int i = 0; i < 100; ++i) {
    Call c = run_once(policy, kernel, 150'000);
    worst_overhead = std::max(worst_overhead, c.overhead);
    worst_cpu = std::max(worst_cpu, c.cpu);
  }
  EXPECT_LE(worst_overhead, 30'000);
  EXPECT_LE(worst_cpu, kernel / 10);
}

TEST(AdaptiveWait, SteadyStateOverheadAndCpuStaySmallForLongKernels) {
  AdaptiveWaitPolicy policy;
  const int64_t kernel = 10'000'000;  // 10 ms
  for (int i = 0; i < 100; ++i) run_once(policy, kernel);
  int64_t worst_overhead = 0, worst_cpu = 0;
  for (int i = 0; i < 100; ++i) {
    Call c = run_once(policy, kernel);
    worst_overhead = std::max(worst_overhead, c.overhead);
    worst_cpu = std::max(worst_cpu, c.cpu);
  }
  EXPECT_LE(worst_overhead, 30'000);
  EXPECT_LE(worst_cpu, kernel / 10);
}

TEST(AdaptiveWait, WorkAlreadyCompleteCostsOneQueryAndShrinksTheExpectation) {
  AdaptiveWaitPolicy policy;
  for (int i = 0; i < 50; ++i) run_once(policy, 1'000'000);
  const int64_t before = policy.estimate_ns();
  FakeClock clock;
  FakeGpu gpu{clock, 0};  // e.g. a delegate that synchronized itself
  EXPECT_EQ(policy.wait(gpu, clock), 0);
  EXPECT_EQ(gpu.queries, 1);
  EXPECT_TRUE(clock.sleeps.empty());
  EXPECT_LT(policy.estimate_ns(), before);
}

TEST(AdaptiveWait, ALongTailBacksOffInsteadOfSpinning) {
  AdaptiveWaitPolicy policy;
  for (int i = 0; i < 100; ++i) run_once(policy, 1'000'000);
  // One call takes 50x longer (a busy device): the wait sleeps in growing steps.
  FakeClock clock;
  clock.wake_delay = 3'000;
  FakeGpu gpu{clock, 50'000'000};
  EXPECT_EQ(policy.wait(gpu, clock), 0);
  EXPECT_LT(gpu.spun, 1'000'000) << "queries must not spin through a long tail";
  ASSERT_GE(clock.sleeps.size(), 3u);
  EXPECT_LE(clock.sleeps.back(), AdaptiveWaitPolicy::kMaxBackoffNs);
  EXPECT_LE(clock.now - gpu.done_at, AdaptiveWaitPolicy::kMaxBackoffNs + 10'000);
  // One slow call moves the expectation only part of the way.
  EXPECT_LT(policy.estimate_ns(), 20'000'000);
}

TEST(AdaptiveWait, OneCallCompleteBeforeTheWaitDoesNotMakeTheNextOnesOvershoot) {
  // As seen on the H200 host: the caller was descheduled after queueing its work, so the
  // work was done at the first query. The calls after it must still see their completion
  // within the margin, not after a long back-off sleep.
  AdaptiveWaitPolicy policy;
  const int64_t kernel = 2'000'000;
  for (int i = 0; i < 100; ++i) run_once(policy, kernel);
  run_once(policy, 0);
  int64_t worst_overhead = 0;
  for (int i = 0; i < 20; ++i) worst_overhead = std::max(worst_overhead, run_once(policy, kernel).overhead);
  EXPECT_LE(worst_overhead, 60'000);
}

TEST(AdaptiveWait, AWaitThatWokeEarlyBacksOffInStepsSmallAgainstTheWork) {
  AdaptiveWaitPolicy policy;
  const int64_t kernel = 2'000'000;
  for (int i = 0; i < 100; ++i) run_once(policy, kernel);
  // This call's work takes half again as long: past the spin, the back-off steps stay at
  // most a sixteenth of the expected time, so the completion is seen soon after it happens.
  FakeClock clock;
  clock.wake_delay = 3'000;
  FakeGpu gpu{clock, 3'000'000};
  const int64_t expected = policy.estimate_ns();  // the kernel's time, plus a query or so
  EXPECT_NEAR(static_cast<double>(expected), static_cast<double>(kernel), 0.01 * kernel);
  EXPECT_EQ(policy.wait(gpu, clock), 0);
  EXPECT_LE(clock.sleeps.back(), expected / 16);
  EXPECT_LE(clock.now - gpu.done_at, expected / 16 + 10'000);
}

TEST(AdaptiveWait, AnErrorFromTheQueryIsReturnedAsIs) {
  AdaptiveWaitPolicy policy;
  EXPECT_EQ(run_once(policy, 500'000, 3'000, 700).result, -700);
  // Also once the policy sleeps before polling.
  for (int i = 0; i < 50; ++i) run_once(policy, 500'000);
  EXPECT_EQ(run_once(policy, 500'000, 3'000, 719).result, -719);
}

TEST(AdaptiveWait, ShorterWorkIsTrackedWithinAFewCalls) {
  AdaptiveWaitPolicy policy;
  for (int i = 0; i < 100; ++i) run_once(policy, 5'000'000);
  // The model's work shrinks to 1 ms: a few calls overshoot while the probe steps double.
  Call c{};
  for (int i = 0; i < 20; ++i) c = run_once(policy, 1'000'000);
  EXPECT_LE(policy.estimate_ns(), 1'100'000);
  EXPECT_LE(c.overhead, 30'000);
}

TEST(AdaptiveWait, WorkThatNeverCompletesEndsTheWaitAtItsDeadline) {
  // A hung kernel: nothing learned yet, so the wait backs off; it gives up once the deadline
  // passed, within one back-off step and a wake-up, and no sleep reaches past the deadline.
  AdaptiveWaitPolicy policy;
  FakeClock clock;
  clock.wake_delay = 3'000;
  clock.now = 1'000'000;
  FakeGpu gpu{clock, INT64_MAX};
  const int64_t start = clock.now;
  const int64_t timeout = 20'000'000;
  EXPECT_EQ(policy.wait(gpu, clock, timeout), AdaptiveWaitPolicy::kTimedOut);
  EXPECT_GE(clock.now - start, timeout);
  EXPECT_LE(clock.now - start, timeout + clock.wake_delay + gpu.cost);
  EXPECT_LT(gpu.spun, 1'000'000) << "giving up must not spin";
}

TEST(AdaptiveWait, ALearnedLongExpectationDoesNotSleepPastTheDeadline) {
  // A model whose calls take 50 ms: a 10 ms deadline is honoured by the first sleep already.
  AdaptiveWaitPolicy policy;
  for (int i = 0; i < 50; ++i) run_once(policy, 50'000'000);
  FakeClock clock;
  clock.wake_delay = 3'000;
  FakeGpu gpu{clock, INT64_MAX};
  EXPECT_EQ(policy.wait(gpu, clock, 10'000'000), AdaptiveWaitPolicy::kTimedOut);
  ASSERT_FALSE(clock.sleeps.empty());
  EXPECT_LE(clock.sleeps.front(), 10'000'000);
  EXPECT_LE(clock.now, 10'000'000 + 2 * clock.wake_delay + 2 * gpu.cost);
}

TEST(AdaptiveWait, WorkWithinTheDeadlineIsWaitedForAsWithout) {
  AdaptiveWaitPolicy limited;
  AdaptiveWaitPolicy unlimited;
  for (int i = 0; i < 100; ++i) {
    FakeClock a, b;
    a.wake_delay = b.wake_delay = 3'000;
    FakeGpu ga{a, 2'000'000}, gb{b, 2'000'000};
    ASSERT_EQ(limited.wait(ga, a, 3'000'000), 0);
    ASSERT_EQ(unlimited.wait(gb, b), 0);
    ASSERT_EQ(a.now, b.now) << "call " << i;
  }
  EXPECT_EQ(limited.estimate_ns(), unlimited.estimate_ns());
}

}  // namespace
