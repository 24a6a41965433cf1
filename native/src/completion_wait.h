// How a forward call waits for the GPU work it queued on its leased stream.
//
// cudaStreamSynchronize under the default device schedule spins a host core for the whole GPU
// time; a blocking-sync event costs almost no CPU but adds tens to hundreds of microseconds of
// wake-up latency. The adaptive wait sits between them: it sleeps for most of the time this
// instance's work is expected to take, then polls an event with a short bounded spin, then backs
// off with growing sleeps so a long tail never burns a core. The expectation is learned per
// instance (one Module = one model on one device) and probes downwards, so the sleep ends just
// before the work does. A wait may have a deadline: work that never completes (a hung kernel)
// must not hold its caller, its instance and the shutdown forever.
#pragma once

#include <sys/prctl.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <limits>
#include <cstdint>

namespace etserve {

enum class CompletionWait : int {
  kAdaptive = 0,  // sleep for the expected time, then poll an event (default)
  kSpin = 1,      // cudaStreamSynchronize: lowest latency, one core busy for the GPU time
  kBlocking = 2,  // a blocking-sync event: least CPU, most wake-up latency
};

// The schedule of the adaptive wait, free of CUDA: tests drive it with a fake clock and query.
class AdaptiveWaitPolicy {
 public:
  class Clock {
   public:
    virtual ~Clock() = default;
    virtual int64_t now_ns() = 0;
    virtual void sleep_ns(int64_t ns) = 0;
  };

  // The spin before the expected completion: enough to absorb small variations of the GPU time
  // (wake-up lateness is learned apart), small enough to stay a few percent of it. These bounds
  // kept the latency near spinning's with less CPU than a wider margin
  // (bench/results/2026-12-04-h200-completion-wait.md). A field, not a constant, so the GPU wait
  // benchmark can compare schedules on one host.
  struct Tuning {
    int64_t margin_divisor = 200;  // margin = expected time / this ...
    int64_t min_margin_ns = 10'000;  // ... within these bounds
    int64_t max_margin_ns = 50'000;
    // The longest single sleep (0: the whole expected time in one). A core that sleeps long is
    // given away (a hypervisor deschedules the idle vCPU, a bare host puts it in a deep idle
    // state) and comes back with cold caches, which the work after the wait pays for. Slices
    // short enough keep the core, at a little CPU per slice
    // (bench/results/2026-12-04-h200-completion-wait.md).
    int64_t sleep_slice_ns = 0;
  };

  // How a wait ended (Stats counts them); kNone before the first.
  enum class Ended : int { kNone = 0, kAtStart = 1, kOverslept = 2, kInSpin = 3, kInBackoff = 4 };

  // How each wait ended, counted (the GPU benchmarks report them).
  // Named as Ended's values, as in Java (CompletionWaits) and the metric's `ended` label.
  struct Stats {
    uint64_t at_start = 0;    // complete at the first query
    uint64_t overslept = 0;   // complete when the sleep (or a slice of it) ended
    uint64_t in_spin = 0;     // seen by the spin after the sleep
    uint64_t in_backoff = 0;  // seen only in the back-off
  };

  AdaptiveWaitPolicy() = default;
  explicit AdaptiveWaitPolicy(Tuning tuning) : tuning_(tuning) {}

  // Sleeps shorter than this cost more (syscall, wake-up) than they save.
  static constexpr int64_t kMinSleepNs = 20'000;
  // What wait() returns when the deadline passed before the work completed (query errors are
  // negated CUDA codes, never this low).
  static constexpr int kTimedOut = -(1 << 30);

  // Back-off sleeps once the spin is spent: 10 us doubling up to 0.5 ms.
  static constexpr int64_t kFirstBackoffNs = 10'000;
  static constexpr int64_t kMaxBackoffNs = 500'000;

  // query(): > 0 complete, 0 not yet, < 0 an error code to return as is.
  // Returns 0 once complete, the error, or kTimedOut once timeout_ns (> 0) passed since the start
  // without a completion (0: no deadline).
  template <typename Query>
  int wait(Query&& query, Clock& clock, int64_t timeout_ns = 0);

  // How the last wait ended (kNone before the first).
  Ended last_ended() const { return last_ended_.load(std::memory_order_relaxed); }

  // The longest single sleep from the next wait on (a per-call setting: see Tuning).
  void set_sleep_slice_ns(int64_t ns) { tuning_.sleep_slice_ns = std::max<int64_t>(0, ns); }

  // Expected time from the forward's return to completion (0: nothing learned yet).
  int64_t estimate_ns() const { return estimate_ns_; }

  int64_t margin_for(int64_t estimate_ns) const {
    return std::clamp<int64_t>(estimate_ns / tuning_.margin_divisor, tuning_.min_margin_ns, tuning_.max_margin_ns);
  }

  // A snapshot; safe to take while another thread waits (the counters are relaxed atomics).
  Stats stats() const {
    return {at_start_.load(std::memory_order_relaxed), overslept_.load(std::memory_order_relaxed),
            in_spin_.load(std::memory_order_relaxed), in_backoff_.load(std::memory_order_relaxed)};
  }

  // How late a sleep typically wakes up (learned).
  int64_t lateness_ns() const { return late_ns_; }

 private:
  void step_down(int64_t margin);
  void learn_early(int64_t observed_ns);
  void learn_exact(int64_t observed_ns);
  void learn_upper_bound(int64_t observed_ns, int64_t last_step_ns);
  void learn_lateness(int64_t late_ns);

  static bool is_power_of_two(int64_t n) { return (n & (n - 1)) == 0; }

  Tuning tuning_;
  // One waiter at a time writes them (the instance is leased); readers may come from anywhere.
  static void bump(std::atomic<uint64_t>& n) {
    n.store(n.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  void ended(std::atomic<uint64_t>& count, Ended how) {
    bump(count);
    last_ended_.store(how, std::memory_order_relaxed);
  }
  std::atomic<uint64_t> at_start_{0}, overslept_{0}, in_spin_{0}, in_backoff_{0};
  std::atomic<Ended> last_ended_{Ended::kNone};
  int64_t estimate_ns_ = 0;
  int64_t down_step_ns_ = 0;  // the next downward step; 0 once a completion was seen exactly
  int64_t late_ns_ = 0;       // wake-up lateness: rises at once, decays slowly
};

template <typename Query>
int AdaptiveWaitPolicy::wait(Query&& query, Clock& clock, int64_t timeout_ns) {
  const int64_t start = clock.now_ns();
  const int64_t give_up_at = timeout_ns > 0 ? start + timeout_ns : std::numeric_limits<int64_t>::max();
  int r = query();
  if (r < 0) return r;
  if (r > 0) {
    // Done before any wait: the delegate synchronized itself, the work was tiny, or this
    // thread was descheduled after queueing it. Step down as when a sleep overshot: a
    // delegate that always synchronizes drives the expectation to zero within a few calls,
    // and one descheduled call costs the next ones little (halving here made them wake far
    // too early and finish in the back-off, with long tails).
    ended(at_start_, Ended::kAtStart);
    step_down(margin_for(estimate_ns_));
    return 0;
  }
  const int64_t margin = margin_for(estimate_ns_);
  // Wake-ups come late (timer slack, idle states, scheduling): ask for that much less.
  // Never past the deadline: an expectation learned from long work must not outlast it.
  const int64_t sleep_for = std::min(estimate_ns_ - margin - late_ns_ - (clock.now_ns() - start),
                                     give_up_at - clock.now_ns());
  if (sleep_for >= kMinSleepNs) {
    const int64_t wake_at = clock.now_ns() + sleep_for;
    int64_t slices = 0;
    for (int64_t left = sleep_for; left > 0; left = wake_at - clock.now_ns()) {
      const bool sliced = tuning_.sleep_slice_ns > 0 && left > tuning_.sleep_slice_ns;
      clock.sleep_ns(sliced ? tuning_.sleep_slice_ns : left);
      // Awake anyway: a query after slice 1, 2, 4, 8, ... ends a call whose work finished early
      // by twice its time instead of at the end of the expected time. A query after every slice
      // costs a query's CPU each time for little gain
      // (bench/results/2026-12-04-h200-completion-wait.md).
      if (sliced && is_power_of_two(++slices)) {
        r = query();
        if (r < 0) return r;
        if (r > 0) {
          ended(overslept_, Ended::kOverslept);
          learn_early(clock.now_ns() - start);
          return 0;
        }
      }
    }
    learn_lateness(clock.now_ns() - wake_at);
    r = query();
    if (r < 0) return r;
    if (r > 0) {
      // Complete by the time we woke: the expectation (or the lateness) is too long. Step
      // down by the margin, doubling while it stays too long (the work got shorter); the
      // next call's spin then sees the completion exactly again.
      ended(overslept_, Ended::kOverslept);
      step_down(margin);
      return 0;
    }
  }
  // Spin: the completion time seen here is exact to one query. Long enough to cover the
  // margin and a late wake-up's jitter, so the back-off below stays for real tails.
  const int64_t spin_until = clock.now_ns() + 2 * margin + late_ns_;
  while (true) {
    r = query();
    if (r < 0) return r;
    const int64_t now = clock.now_ns();
    if (r > 0) {
      ended(in_spin_, Ended::kInSpin);
      learn_exact(now - start);
      return 0;
    }
    if (now >= give_up_at) return kTimedOut;
    if (now >= spin_until) break;
  }
  // A long tail (or nothing learned yet): sleep in growing steps, poll after each. The steps
  // stay small against the expected time (a sixteenth of it), so a call that woke early
  // overshoots its completion by little; unknown work backs off up to kMaxBackoffNs.
  const int64_t max_step =
      estimate_ns_ == 0 ? kMaxBackoffNs : std::clamp<int64_t>(estimate_ns_ / 16, kFirstBackoffNs, kMaxBackoffNs);
  int64_t step = kFirstBackoffNs;
  while (true) {
    clock.sleep_ns(std::max<int64_t>(0, std::min(step, give_up_at - clock.now_ns())));
    r = query();
    if (r < 0) return r;
    if (r > 0) {
      ended(in_backoff_, Ended::kInBackoff);
      learn_upper_bound(clock.now_ns() - start, step);
      return 0;
    }
    if (clock.now_ns() >= give_up_at) return kTimedOut;
    step = std::min(step * 2, max_step);
  }
}

// The real clock: CLOCK_MONOTONIC and nanosleep. Sleeps of a few tens of microseconds need a
// small timer slack (the default is 50 us): the constructor sets it for the calling thread.
class SystemClock final : public AdaptiveWaitPolicy::Clock {
 public:
  SystemClock() { prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0); }
  int64_t now_ns() override { return monotonic_ns(); }
  static int64_t monotonic_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
  }
  void sleep_ns(int64_t ns) override {
    timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
  }
};

inline void AdaptiveWaitPolicy::step_down(int64_t margin) {
  // The first step is the margin; it doubles while the expectation stays too long (the work
  // got shorter), up to an eighth of the expectation per call.
  down_step_ns_ = down_step_ns_ == 0 ? margin : std::min(down_step_ns_ * 2, estimate_ns_ / 8);
  estimate_ns_ = std::max<int64_t>(0, estimate_ns_ - down_step_ns_);
}

inline void AdaptiveWaitPolicy::learn_early(int64_t observed_ns) {
  // Seen between two sleep slices, well before the expected time: the work is at most this
  // long (up to twice as long as it really is, the queries being spaced by doubling). Take
  // that bound at once; the next calls, complete when their shorter sleep ends, step down
  // from it as after any overslept wait until their spin sees the completion again.
  estimate_ns_ = std::min(estimate_ns_, observed_ns);
}

inline void AdaptiveWaitPolicy::learn_exact(int64_t observed_ns) {
  down_step_ns_ = 0;
  // Shorter: believe it at once. Longer: move a quarter of the way, so one slow call (a busy
  // GPU) does not make every following call sleep past its completion.
  if (estimate_ns_ == 0 || observed_ns <= estimate_ns_) {
    estimate_ns_ = observed_ns;
  } else {
    estimate_ns_ += (observed_ns - estimate_ns_) / 4;
  }
}

inline void AdaptiveWaitPolicy::learn_lateness(int64_t late_ns) {
  late_ns = std::clamp<int64_t>(late_ns, 0, kMaxBackoffNs);
  if (late_ns > late_ns_) {
    late_ns_ += (late_ns - late_ns_) / 2;
  } else {
    late_ns_ -= (late_ns_ - late_ns) / 16;
  }
}

inline void AdaptiveWaitPolicy::learn_upper_bound(int64_t observed_ns, int64_t last_step_ns) {
  // Seen only after a back-off sleep: the work ended during that last step (or its late
  // wake-up), so its start is a lower estimate. Nothing learned yet: take it. Otherwise move
  // up by at most an eighth: enough to recover from an expectation that dropped too far within
  // a call or two, little enough that one slow call (a busy device) does not make the next
  // ones sleep past their completion.
  down_step_ns_ = 0;
  const int64_t lower = observed_ns - last_step_ns - late_ns_;
  if (estimate_ns_ == 0) {
    estimate_ns_ = std::max<int64_t>(lower, 0);
  } else if (lower > estimate_ns_) {
    estimate_ns_ += std::min(lower - estimate_ns_, estimate_ns_ / 8);
  }
}

}  // namespace etserve
