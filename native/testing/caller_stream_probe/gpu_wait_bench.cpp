// TEST-ONLY, GPU host: how the completion wait's schedules behave on this host, without Java or
// ExecuTorch in the way. Prints, as Markdown:
//   1. how late nanosleep wakes (the adaptive wait sleeps, so its margin must cover this);
//   2. how much a spin kernel's completion varies (cudaStreamSynchronize, one caller);
//   3. for each schedule (spin, a blocking-sync event, the adaptive wait under several tunings),
//      1 and 4 callers each on its own stream: wait overhead (wall time per call - kernel time)
//      p50 / p99, host CPU per call (the calling thread's CPU clock), and how adaptive waits ended;
//   4. what the host work right after the wait costs: a pointer chase through 256 KiB (what the
//      service does next touches memory the same way: outputs, the response, the pool) timed once
//      right after the wait and once more at once (hot), so a wait that lets the core drop into a
//      deep idle state shows up as a slow first chase.
// Usage: etserve_gpu_wait_bench [KERNEL_US ...]   (default 2000 10000)
#include <cuda_runtime.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "completion_wait.h"

// The spin kernel, in gpu_wait_kernel.cu: one block spinning for a wall-clock duration.
bool etserve_wait_bench_launch_spin(cudaStream_t stream, unsigned long long nanos);

namespace {

using etserve::AdaptiveWaitPolicy;

int64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

int64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

double pct(std::vector<int64_t> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p / 100.0 * static_cast<double>(v.size() - 1) + 0.5);
  return static_cast<double>(v[std::min(i, v.size() - 1)]) / 1e3;
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "FAIL: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

struct Schedule {
  std::string name;
  enum Kind { kSpin, kBlocking, kAdaptive } kind;
  AdaptiveWaitPolicy::Tuning tuning;
};

// A random cyclic walk through 256 KiB of cache lines: every step depends on the last one.
struct Chase {
  struct alignas(64) Node {
    Node* next;
  };
  std::vector<Node> nodes;
  Node* head;
  explicit Chase(size_t bytes = 256 * 1024) : nodes(bytes / sizeof(Node)) {
    std::vector<size_t> order(nodes.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    uint64_t x = 88172645463325252ull;  // xorshift: the same walk every run
    for (size_t i = order.size() - 1; i > 0; --i) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      std::swap(order[i], order[x % (i + 1)]);
    }
    for (size_t i = 0; i < order.size(); ++i) nodes[order[i]].next = &nodes[order[(i + 1) % order.size()]];
    head = &nodes[order[0]];
  }
  // Returns the walk's time in ns.
  int64_t run() {
    const int64_t t0 = mono_ns();
    Node* n = head;
    for (size_t i = 0; i < nodes.size(); ++i) n = n->next;
    head = n;
    return mono_ns() - t0;
  }
};

struct Result {
  std::vector<int64_t> chase_after;  // the walk right after the wait
  std::vector<int64_t> chase_hot;    // the same walk again at once
  std::vector<int64_t> overhead;
  int64_t cpu = 0;
  int64_t calls = 0;
  AdaptiveWaitPolicy::Stats stats;
};

// One caller: its own stream and event, `warmup` unmeasured calls, then `calls` measured ones.
Result run_caller(const Schedule& s, int64_t kernel_ns, int warmup, int calls) {
  Result r;
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  cudaEvent_t event;
  const unsigned flags = cudaEventDisableTiming | (s.kind == Schedule::kBlocking ? cudaEventBlockingSync : 0u);
  check(cudaEventCreateWithFlags(&event, flags), "event");
  AdaptiveWaitPolicy policy(s.tuning);
  AdaptiveWaitPolicy::Stats at_warm{};
  Chase chase;
  etserve::SystemClock clock;
  for (int i = 0; i < warmup + calls; ++i) {
    const bool measured = i >= warmup;
    const int64_t cpu0 = thread_cpu_ns();
    const int64_t t0 = mono_ns();
    if (!etserve_wait_bench_launch_spin(stream, static_cast<unsigned long long>(kernel_ns))) {
      check(cudaGetLastError(), "launch");
    }
    if (s.kind == Schedule::kSpin) {
      check(cudaStreamSynchronize(stream), "sync");
    } else {
      check(cudaEventRecord(event, stream), "record");
      if (s.kind == Schedule::kBlocking) {
        check(cudaEventSynchronize(event), "event sync");
      } else {
        const int rc = policy.wait(
            [event]() {
              const cudaError_t q = cudaEventQuery(event);
              if (q == cudaSuccess) return 1;
              if (q == cudaErrorNotReady) return 0;
              return -static_cast<int>(q);
            },
            clock);
        if (rc != 0) check(static_cast<cudaError_t>(-rc), "adaptive wait");
      }
    }
    const int64_t t1 = mono_ns();
    const int64_t cpu1 = thread_cpu_ns();
    const int64_t after = chase.run();
    const int64_t hot = chase.run();
    if (measured) {
      r.chase_after.push_back(after);
      r.chase_hot.push_back(hot);
      r.overhead.push_back(t1 - t0 - kernel_ns);
      r.cpu += cpu1 - cpu0;
      ++r.calls;
    }
    if (i + 1 == warmup) at_warm = policy.stats();
  }
  const auto& end = policy.stats();
  r.stats = {end.at_start - at_warm.at_start, end.overslept - at_warm.overslept, end.in_spin - at_warm.in_spin,
             end.in_backoff - at_warm.in_backoff};
  cudaEventDestroy(event);
  cudaStreamDestroy(stream);
  return r;
}

Result run(const Schedule& s, int64_t kernel_ns, int callers, int warmup, int calls) {
  std::vector<Result> per(callers);
  std::vector<std::thread> threads;
  for (int c = 0; c < callers; ++c) {
    threads.emplace_back([&, c] {
      check(cudaSetDevice(0), "device");
      per[c] = run_caller(s, kernel_ns, warmup, calls);
    });
  }
  for (auto& t : threads) t.join();
  Result all;
  for (auto& p : per) {
    all.overhead.insert(all.overhead.end(), p.overhead.begin(), p.overhead.end());
    all.chase_after.insert(all.chase_after.end(), p.chase_after.begin(), p.chase_after.end());
    all.chase_hot.insert(all.chase_hot.end(), p.chase_hot.begin(), p.chase_hot.end());
    all.cpu += p.cpu;
    all.calls += p.calls;
    all.stats.at_start += p.stats.at_start;
    all.stats.overslept += p.stats.overslept;
    all.stats.in_spin += p.stats.in_spin;
    all.stats.in_backoff += p.stats.in_backoff;
  }
  return all;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> kernels_us;
  for (int i = 1; i < argc; ++i) kernels_us.push_back(std::atoll(argv[i]));
  if (kernels_us.empty()) kernels_us = {2000, 10000};
  check(cudaSetDevice(0), "device");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "properties");
  std::printf("# Completion wait on this host: %s, %u host threads\n\n", prop.name, std::thread::hardware_concurrency());

  std::printf("nanosleep lateness (timer slack 1 us; 300 sleeps each; us):\n\n");
  std::printf("| asked us | p10 | p50 | p90 | p99 | max |\n|---|---|---|---|---|---|\n");
  etserve::SystemClock clock;  // sets this thread's timer slack
  for (int64_t asked_us : {50, 500, 1900, 9700}) {
    std::vector<int64_t> late;
    for (int i = 0; i < 300; ++i) {
      const int64_t t0 = mono_ns();
      clock.sleep_ns(asked_us * 1000);
      late.push_back(mono_ns() - t0 - asked_us * 1000);
    }
    std::printf("| %lld | %.1f | %.1f | %.1f | %.1f | %.1f |\n", static_cast<long long>(asked_us), pct(late, 10),
                pct(late, 50), pct(late, 90), pct(late, 99), pct(late, 100));
  }

  // The default, its margin halved and doubled, and its sleep split (sleep_slice_ns).
  const std::vector<Schedule> schedules = {
      {"spin (cudaStreamSynchronize)", Schedule::kSpin, {}},
      {"blocking-sync event", Schedule::kBlocking, {}},
      {"adaptive 1/200, 10-50 us, one sleep", Schedule::kAdaptive, {200, 10'000, 50'000, 0}},
      {"adaptive 1/200, sleep slice 100 us", Schedule::kAdaptive, {200, 10'000, 50'000, 100'000}},
      {"adaptive 1/200, sleep slice 75 us", Schedule::kAdaptive, {200, 10'000, 50'000, 75'000}},
      {"adaptive 1/200, sleep slice 50 us", Schedule::kAdaptive, {200, 10'000, 50'000, 50'000}},
  };
  std::printf("\nWait schedules (each caller on its own stream; overhead = wall time per call - kernel time):\n\n");
  std::printf("| schedule | kernel us | callers | calls | overhead p50 us | p90 | p99 | CPU per call us | CPU %% of kernel "
              "| done at start | overslept | seen in spin | back-off | chase after wait p50 us | p90 | chase hot p50 us |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (int64_t k : kernels_us) {
    const int calls = static_cast<int>(std::max<int64_t>(200, 2'000'000 / k));
    for (int callers : {1, 4}) {
      for (const auto& s : schedules) {
        Result r = run(s, k * 1000, callers, 50, calls);
        const double cpu_us = static_cast<double>(r.cpu) / 1e3 / static_cast<double>(r.calls);
        const double n = static_cast<double>(r.calls) / 100.0;
        const bool adaptive = s.kind == Schedule::kAdaptive;
        std::printf("| %s | %lld | %d | %lld | %.1f | %.1f | %.1f | %.0f | %.1f | %s | %s | %s | %s | %.1f | %.1f | %.1f |\n",
                    s.name.c_str(),
                    static_cast<long long>(k), callers, static_cast<long long>(r.calls), pct(r.overhead, 50),
                    pct(r.overhead, 90), pct(r.overhead, 99), cpu_us, 100.0 * cpu_us / static_cast<double>(k),
                    adaptive ? std::to_string(static_cast<int>(r.stats.at_start / n)).append(" %").c_str() : "-",
                    adaptive ? std::to_string(static_cast<int>(r.stats.overslept / n)).append(" %").c_str() : "-",
                    adaptive ? std::to_string(static_cast<int>(r.stats.in_spin / n)).append(" %").c_str() : "-",
                    adaptive ? std::to_string(static_cast<int>(r.stats.in_backoff / n)).append(" %").c_str() : "-",
                    pct(r.chase_after, 50), pct(r.chase_after, 90), pct(r.chase_hot, 50));
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
