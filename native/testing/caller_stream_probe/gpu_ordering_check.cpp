// GPU-only check (built when nvcc is found, run by ctest on a GPU host): work a delegate queues
// on the caller's stream must not complete while that stream is held.
//
// A host function blocks the leased stream; the probe delegate, run through the real ExecuTorch
// runtime under the bridge's guard, queues a kernel plus a completion marker. While the stream is
// held the marker must stay unset; after release the call returns and the marker is set. Had
// the delegate used any other stream (e.g. cudaStreamPerThread), the marker would be set early.
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <thread>

#include "bridge_core.h"

namespace {

std::atomic<bool> released{false};

void CUDART_CB hold(void*) {
  while (!released.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

int fail(const char* what) {
  std::fprintf(stderr, "FAIL: %s\n", what);
  return 1;
}

}  // namespace

// Polls the probe's completion counter until it reaches `want` or `timeout_ms` passes.
unsigned long long wait_for(unsigned long long (*completed)(), unsigned long long want, int timeout_ms) {
  for (int i = 0; i < timeout_ms && completed() < want; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return completed();
}

int main(int argc, char** argv) {
  alarm(120);  // never hang a CI or GPU run: a deadlock here is a failure
  if (argc < 3) return fail("usage: gpu_ordering_check PROBE_LIBRARY PROBE_PTE");
  void* probe = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!probe) return fail(dlerror());
  auto completed = reinterpret_cast<unsigned long long (*)()>(dlsym(probe, "etserve_probe_completed_work"));
  if (!completed) return fail("probe built without GPU work");

  cudaStream_t stream = nullptr;
  if (cudaSetDevice(0) != cudaSuccess) return fail("cudaSetDevice");
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) return fail("stream");

  auto program = etserve::ProgramHandle::open(argv[2], 1);
  etserve::InstanceHandle instance(program, "forward");
  float x[2] = {2000.0f, 0};  // 2 ms of GPU work
  etserve::InputView in{x, sizeof(x), 6, {2}};
  const etserve::StreamSelection selection{etserve::StreamMode::kCuda, reinterpret_cast<uintptr_t>(stream), 0};

  const unsigned long long before = completed();
  if (cudaLaunchHostFunc(stream, hold, nullptr) != cudaSuccess) return fail("hold");
  auto call = std::async(std::launch::async, [&] { return instance.execute({in}, selection); });

  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const bool returned_early = call.wait_for(std::chrono::milliseconds(0)) == std::future_status::ready;
  const unsigned long long while_held = completed() - before;
  released.store(true);
  const auto outs = call.get();
  // The forward call waited for its stream, so its work is complete on return.
  const unsigned long long after = completed() - before;

  const auto* o = reinterpret_cast<const int64_t*>(outs.at(0).bytes.data());
  std::printf("observed: has=%lld handle=0x%llx queued=%lld; leased=0x%llx\n", (long long)o[0],
              (unsigned long long)o[1], (long long)o[2], (unsigned long long)(uintptr_t)stream);
  std::printf("completed while held: %llu, after release: %llu, returned early: %s\n", while_held, after,
              returned_early ? "yes" : "no");
  if (o[0] != 1 || static_cast<uintptr_t>(o[1]) != reinterpret_cast<uintptr_t>(stream)) return fail("handle");
  if (o[2] != 1) return fail("no GPU work queued");
  if (while_held != 0) return fail("delegate work completed while the caller's stream was held");
  if (returned_early) return fail("forward returned before its stream's work completed");
  if (after != 1) return fail("delegate work did not complete after release");

  // Control: without a guard the delegate falls back to its own stream, which is not held, so
  // the same work completes while the caller's stream still is.
  released.store(false);
  if (cudaLaunchHostFunc(stream, hold, nullptr) != cudaSuccess) return fail("hold 2");
  const unsigned long long base = completed();
  instance.execute({in}, etserve::StreamSelection{});
  const bool ran_unheld = wait_for(completed, base + 1, 5000) == base + 1;
  released.store(true);
  cudaStreamSynchronize(stream);
  std::printf("control without guard: work completed while caller stream held: %s\n", ran_unheld ? "yes" : "no");
  if (!ran_unheld) return fail("control: unguarded work should not wait for the held stream");
  std::printf("PASS gpu_ordering_check\n");
  return 0;
}
