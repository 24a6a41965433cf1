// TEST-ONLY: the probe's GPU work, a one-block spin kernel so several streams can overlap.
#include <cuda_runtime.h>

namespace {
__global__ void spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}
}  // namespace

bool etserve_probe_queue_gpu_work(cudaStream_t stream, bool has_stream, double micros) {
  int device = 0, khz = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  // The SM clock in kHz; H200-class clock when the attribute is unavailable.
  if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device) != cudaSuccess || khz <= 0) {
    khz = 1980000;
  }
  const long long cycles = static_cast<long long>(micros * khz / 1000.0);
  // Without a selection, fall back the way the TensorRT delegate does.
  spin<<<1, 1, 0, has_stream ? stream : cudaStreamPerThread>>>(cycles);
  return cudaGetLastError() == cudaSuccess;
}
