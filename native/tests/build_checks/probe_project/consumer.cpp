// Test-only: uses the caller-stream API through etserve/caller_stream_api.h, so linking it
// proves etserve::caller_stream provides the declarations and the definitions.
#include "etserve/caller_stream_api.h"

extern "C" __attribute__((visibility("default"))) bool etserve_probe_consumer_selects(
    cudaStream_t stream) {
  executorch::extension::cuda::CallerStreamGuard guard(stream);
  return executorch::extension::cuda::getCallerStream().has_value();
}
