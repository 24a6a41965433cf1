// STAND-IN, test-only: a minimal caller-stream implementation for the synthetic ExecuTorch
// checkout that tests CallerStream.cmake's checkout branch. Not ExecuTorch's code.
#include <executorch/extension/cuda/caller_stream.h>

namespace executorch::extension::cuda {
namespace {
thread_local std::optional<cudaStream_t> standin_selection;
}  // namespace

std::optional<cudaStream_t> getCallerStream() { return standin_selection; }

CallerStreamGuard::CallerStreamGuard(cudaStream_t stream) : previous_(standin_selection) {
  standin_selection = stream;
}

CallerStreamGuard::~CallerStreamGuard() { standin_selection = previous_; }

}  // namespace executorch::extension::cuda
