// TEST-ONLY: the probe's GPU work, a one-block spin kernel (so several streams can overlap)
// that, when done, bumps a counter in mapped host memory. The ordering check polls that
// counter to see whether work queued on a held stream ran early. (Host functions would not
// do: CUDA runs them all on one thread, so a held stream would stall every marker.)
#include <cuda_runtime.h>

#include <mutex>

namespace {

unsigned long long* host_counter = nullptr;    // mapped, pinned
unsigned long long* device_counter = nullptr;  // the same memory, as the GPU sees it
std::once_flag counter_once;

bool ensure_counter() {
  std::call_once(counter_once, [] {
    void* p = nullptr;
    if (cudaHostAlloc(&p, sizeof(unsigned long long), cudaHostAllocMapped) != cudaSuccess) return;
    *static_cast<unsigned long long*>(p) = 0;
    void* d = nullptr;
    if (cudaHostGetDevicePointer(&d, p, 0) != cudaSuccess) return;
    host_counter = static_cast<unsigned long long*>(p);
    device_counter = static_cast<unsigned long long*>(d);
  });
  return device_counter != nullptr;
}

__device__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Spins for a wall-clock duration (the global timer), whatever the SM clock is, then counts.
__global__ void spin(unsigned long long nanos, unsigned long long* done) {
  const unsigned long long start = now_ns();
  while (now_ns() - start < nanos) {
  }
  __threadfence_system();
  atomicAdd(done, 1ULL);
}

// Stage mode: the values travel as the kernel's argument; the kernel writes them, late, into
// page-locked host memory. Long enough a delay that a reader on another stream loses the race.
constexpr int kStageMax = 64;
constexpr unsigned long long kStageDelayNanos = 20000;
struct StageValues {
  float v[kStageMax];
};

__global__ void stage_write(StageValues values, int count, float* out) {
  const unsigned long long start = now_ns();
  while (now_ns() - start < kStageDelayNanos) {
  }
  for (int i = 0; i < count; ++i) out[i] = values.v[i];
  __threadfence_system();
}

// A deliberate illegal address: the sticky-fault test's way to corrupt the CUDA context.
__global__ void fault() { *reinterpret_cast<volatile int*>(8) = 1; }

}  // namespace

bool etserve_probe_queue_fault(cudaStream_t stream, bool has_stream) {
  fault<<<1, 1, 0, has_stream ? stream : cudaStreamPerThread>>>();
  return cudaGetLastError() == cudaSuccess;
}

// Visible to tests through dlsym on the probe library: GPU work items completed so far.
extern "C" __attribute__((visibility("default"))) unsigned long long etserve_probe_completed_work() {
  if (!ensure_counter()) return ~0ULL;
  return *const_cast<volatile unsigned long long*>(host_counter);
}

bool etserve_probe_queue_gpu_work(cudaStream_t stream, bool has_stream, double micros) {
  if (!ensure_counter()) return false;
  const auto nanos = static_cast<unsigned long long>(micros * 1000.0);
  // Without a selection, fall back the way the TensorRT delegate does.
  spin<<<1, 1, 0, has_stream ? stream : cudaStreamPerThread>>>(nanos, device_counter);
  return cudaGetLastError() == cudaSuccess;
}

bool etserve_probe_queue_stage_write(cudaStream_t stream, bool has_stream, const float* values, int count,
                                     float* host_out) {
  if (count < 0 || count > kStageMax) return false;
  // Only page-locked host memory can be written by a kernel (the runner pins the planned host
  // memory of its GPU instances); its device-side address, for the kernel.
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, host_out) != cudaSuccess || attributes.type != cudaMemoryTypeHost ||
      attributes.devicePointer == nullptr) {
    cudaGetLastError();  // clear a failed query's error
    return false;
  }
  StageValues staged{};
  for (int i = 0; i < count; ++i) staged.v[i] = values[i];
  stage_write<<<1, 1, 0, has_stream ? stream : cudaStreamPerThread>>>(staged, count,
                                                                      static_cast<float*>(attributes.devicePointer));
  return cudaGetLastError() == cudaSuccess;
}
