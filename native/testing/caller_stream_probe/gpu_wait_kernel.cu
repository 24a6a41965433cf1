// TEST-ONLY: the GPU wait benchmark's work, a one-block kernel spinning for a wall-clock
// duration (the global timer), as the probe delegate's.
#include <cuda_runtime.h>

namespace {

__device__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin(unsigned long long nanos) {
  const unsigned long long start = now_ns();
  while (now_ns() - start < nanos) {
  }
}

}  // namespace

bool etserve_wait_bench_launch_spin(cudaStream_t stream, unsigned long long nanos) {
  spin<<<1, 1, 0, stream>>>(nanos);
  return cudaGetLastError() == cudaSuccess;
}
