// TEST-ONLY delegate "CallerStreamProbe" (see CMakeLists.txt). Not ExecuTorch code.
//
// Contract with scripts/export/export_models.py:
//   input 0: float32[2]  — [spin microseconds of GPU work (GPU build only; < 0: an illegal-address
//                           kernel, the sticky fault of the fault test),
//                           host milliseconds: > 0 sleeps that long (a slow model),
//                           < 0 fails the call with Error::Internal (a failing delegate)]
//   output 0: int64[3]   — [selection has a value (0/1), the selected handle, GPU work queued (0/1)]
// or, batched (the dynamic-batching benchmark): input float32[B, 2], output int64[B, 3]; row 0's
// input decides the call's work (one kernel per forward call, whatever B) and every output row
// gets the same three values.
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>

#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/core/exec_aten/util/tensor_util.h>

#include "etserve/caller_stream_api.h"

#if defined(ETSERVE_PROBE_WITH_CUDA)
// probe_gpu_work.cu: queues a spin kernel of `micros` on `stream` (or the per-thread default).
bool etserve_probe_queue_gpu_work(cudaStream_t stream, bool has_stream, double micros);
// Queues a kernel that writes to an illegal address (x[0] < 0): a sticky CUDA fault, for tests.
bool etserve_probe_queue_fault(cudaStream_t stream, bool has_stream);
#endif

namespace {

using executorch::runtime::ArrayRef;
using executorch::runtime::BackendExecutionContext;
using executorch::runtime::BackendInitContext;
using executorch::runtime::BackendInterface;
using executorch::runtime::CompileSpec;
using executorch::runtime::DelegateHandle;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::FreeableBuffer;
using executorch::runtime::Result;
using executorch::runtime::Span;

class CallerStreamProbe final : public BackendInterface {
 public:
  bool is_available() const override { return true; }

  Result<DelegateHandle*> init(BackendInitContext&, FreeableBuffer* processed,
                               ArrayRef<CompileSpec>) const override {
    // The blob only identifies the probe; nothing to keep.
    if (processed != nullptr) processed->Free();
    static int token = 0;
    return static_cast<DelegateHandle*>(&token);
  }

  Error execute(BackendExecutionContext&, DelegateHandle*, Span<EValue*> args) const override {
    if (args.size() < 2 || !args[0]->isTensor() || !args[args.size() - 1]->isTensor()) {
      return Error::InvalidArgument;
    }
    // Read the selection exactly once, the way the TensorRT delegate does.
    const auto selection = executorch::extension::cuda::getCallerStream();
    auto& out = args[args.size() - 1]->toTensor();
    const auto& in = args[0]->toTensor();
    int64_t rows = 1;
    if (in.dim() == 2) {
      // A delegate sizes its own dynamic outputs: [B, 3] for an input of B rows.
      rows = in.size(0);
      executorch::aten::SizesType sizes[2] = {static_cast<executorch::aten::SizesType>(rows), 3};
      const Error resized = executorch::runtime::resize_tensor(out, {sizes, 2});
      if (resized != Error::Ok) {
        return resized;
      }
    }
    if (out.numel() < 3 * rows || out.scalar_type() != executorch::aten::ScalarType::Long) {
      return Error::InvalidArgument;
    }
    int64_t* o = out.mutable_data_ptr<int64_t>();
    o[0] = selection.has_value() ? 1 : 0;
    o[1] = selection.has_value() ? static_cast<int64_t>(reinterpret_cast<uintptr_t>(*selection)) : 0;
    o[2] = 0;
    if (in.scalar_type() != executorch::aten::ScalarType::Float || in.numel() < 2) {
      return Error::InvalidArgument;
    }
    const float host_ms = in.const_data_ptr<float>()[1];
    if (host_ms < 0) {
      return Error::Internal;
    }
    if (host_ms > 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int64_t>(host_ms * 1000)));
    }
#if defined(ETSERVE_PROBE_WITH_CUDA)
    const double micros = in.numel() > 0 ? in.const_data_ptr<float>()[0] : 0.0;
    if (micros > 0) {
      if (!etserve_probe_queue_gpu_work(selection.value_or(nullptr), selection.has_value(), micros)) {
        return Error::Internal;
      }
      o[2] = 1;
    } else if (micros < 0) {
      if (!etserve_probe_queue_fault(selection.value_or(nullptr), selection.has_value())) {
        return Error::Internal;
      }
      o[2] = 1;
    }
#endif
    for (int64_t r = 1; r < rows; r++) {
      std::memcpy(o + 3 * r, o, 3 * sizeof(int64_t));
    }
    return Error::Ok;
  }
};

CallerStreamProbe probe;
const executorch::runtime::Backend kBackend{"CallerStreamProbe", &probe};
const Error kRegistered = executorch::runtime::register_backend(kBackend);

}  // namespace
