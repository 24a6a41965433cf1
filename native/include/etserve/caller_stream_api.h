// The caller-stream API of ExecuTorch's extension/cuda library.
//
// When ExecuTorch's own header is available (CUDA wheel or source checkout) we use it.
// Otherwise we *declare* the same API here, once; the definitions live only in
// ExecuTorch's shared library (libextension_cuda.so / libexecutorch_extension_cuda.so),
// so the process holds exactly one copy of the thread-local selection.
#pragma once

#if defined(ETSERVE_HAVE_UPSTREAM_CALLER_STREAM_HEADER)
#include <executorch/extension/cuda/caller_stream.h>
#else
#include <optional>

// Same spelling as the CUDA headers, so the mangled names match the library's exports.
struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;

namespace executorch::extension::cuda {

// The stream the current thread's caller selected, if any.
std::optional<cudaStream_t> getCallerStream();

// Selects `stream` for the current thread until destruction, then restores the previous
// selection. Non-copyable, non-movable.
class CallerStreamGuard {
 public:
  explicit CallerStreamGuard(cudaStream_t stream);
  ~CallerStreamGuard();
  CallerStreamGuard(const CallerStreamGuard&) = delete;
  CallerStreamGuard& operator=(const CallerStreamGuard&) = delete;
  CallerStreamGuard(CallerStreamGuard&&) = delete;
  CallerStreamGuard& operator=(CallerStreamGuard&&) = delete;

 private:
  // Layout matches upstream: the previous selection, restored on exit.
  std::optional<cudaStream_t> previous_;
};

// Checked against the library's code: the constructor stores 16 bytes into the guard.
static_assert(sizeof(CallerStreamGuard) == 16, "CallerStreamGuard layout differs from ExecuTorch's");

}  // namespace executorch::extension::cuda
#endif
