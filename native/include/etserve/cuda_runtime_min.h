// The few CUDA runtime entry points the bridge calls, declared so the bridge builds
// without the CUDA toolkit. They resolve against libcudart.so.13, which the caller-stream
// library needs anyway.
#pragma once

#include <cstddef>

#include "etserve/caller_stream_api.h"

extern "C" {
typedef int etserve_cuda_error_t;  // cudaError_t; 0 == cudaSuccess, 600 == cudaErrorNotReady
etserve_cuda_error_t cudaSetDevice(int device);
etserve_cuda_error_t cudaGetDevice(int* device);
etserve_cuda_error_t cudaStreamSynchronize(cudaStream_t stream);
const char* cudaGetErrorName(etserve_cuda_error_t error);
// Events, for the completion wait (completion_wait.h).
typedef struct CUevent_st* cudaEvent_t;
etserve_cuda_error_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags);
etserve_cuda_error_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream);
etserve_cuda_error_t cudaEventQuery(cudaEvent_t event);
etserve_cuda_error_t cudaEventSynchronize(cudaEvent_t event);
etserve_cuda_error_t cudaEventDestroy(cudaEvent_t event);
const char* cudaGetErrorString(etserve_cuda_error_t error);
etserve_cuda_error_t cudaGetLastError(void);  // returns and clears the thread's last error
// Page-locked host memory, for the planned host buffers of GPU instances.
etserve_cuda_error_t cudaHostAlloc(void** ptr, size_t size, unsigned int flags);
etserve_cuda_error_t cudaFreeHost(void* ptr);
}

namespace etserve::cuda_min {
constexpr etserve_cuda_error_t kNotReady = 600;                // cudaErrorNotReady
constexpr etserve_cuda_error_t kLaunchTimeout = 702;           // cudaErrorLaunchTimeout (sticky)
constexpr unsigned int kEventBlockingSync = 0x01;              // cudaEventBlockingSync
constexpr unsigned int kEventDisableTiming = 0x02;             // cudaEventDisableTiming
constexpr unsigned int kHostAllocPortable = 0x01;              // cudaHostAllocPortable
constexpr unsigned int kHostAllocMapped = 0x02;                // cudaHostAllocMapped
}  // namespace etserve::cuda_min
