// The few CUDA runtime entry points the bridge calls, declared so the bridge builds
// without the CUDA toolkit. They resolve against libcudart.so.13, which the caller-stream
// library needs anyway.
#pragma once

#include "etserve/caller_stream_api.h"

extern "C" {
typedef int etserve_cuda_error_t;  // cudaError_t; 0 == cudaSuccess
etserve_cuda_error_t cudaSetDevice(int device);
etserve_cuda_error_t cudaGetDevice(int* device);
etserve_cuda_error_t cudaStreamSynchronize(cudaStream_t stream);
const char* cudaGetErrorName(etserve_cuda_error_t error);
const char* cudaGetErrorString(etserve_cuda_error_t error);
}
