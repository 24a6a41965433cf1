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
//
// Stage mode (payload "CallerStreamProbe-stage-v1"; the mixed program, where a probe partition
// runs before and after a real CUDA-backend partition):
//   input:   one float32 tensor x (at most 64 elements)
//   outputs: float32 y with y = -x, and int64[3] as above. On a GPU build y is written by a kernel
//            queued on the stream the probe observed, after a short spin, into y's page-locked
//            host memory, and the probe returns at once. So y is right only if whatever reads it
//            next is ordered on that same stream: the CUDA partition's host-to-device copy (probe
//            before it) or the runner's completion wait (probe after it). A probe that observed
//            another stream than the runner leased gives a stale y, i.e. wrong numbers.
//            A NaN in x fails the call with InvalidArgument.
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>

#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/core/exec_aten/util/tensor_util.h>
#include <executorch/runtime/platform/log.h>

#include "etserve/caller_stream_api.h"

#if defined(ETSERVE_PROBE_WITH_CUDA)
// probe_gpu_work.cu: queues a spin kernel of `micros` on `stream` (or the per-thread default).
bool etserve_probe_queue_gpu_work(cudaStream_t stream, bool has_stream, double micros);
// Queues a kernel that writes to an illegal address (x[0] < 0): a sticky CUDA fault, for tests.
bool etserve_probe_queue_fault(cudaStream_t stream, bool has_stream);
// Stage mode: queues a kernel that spins, then writes `count` values into `host_out`, which must
// be page-locked host memory (false when it is not, or the launch fails).
bool etserve_probe_queue_stage_write(cudaStream_t stream, bool has_stream, const float* values, int count,
                                     float* host_out);
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

// What init hands out: the handle's address says the mode.
int observe_token = 0;
int stage_token = 0;

class CallerStreamProbe final : public BackendInterface {
 public:
  bool is_available() const override { return true; }

  Result<DelegateHandle*> init(BackendInitContext&, FreeableBuffer* processed,
                               ArrayRef<CompileSpec>) const override {
    // The blob only says which mode; the handle is the mode's token.
    bool stage = false;
    if (processed != nullptr) {
      static constexpr char kStage[] = "CallerStreamProbe-stage-v1";
      stage = processed->size() == sizeof(kStage) - 1 &&
              std::memcmp(processed->data(), kStage, sizeof(kStage) - 1) == 0;
      processed->Free();
    }
    return static_cast<DelegateHandle*>(stage ? &stage_token : &observe_token);
  }

  Error execute(BackendExecutionContext& context, DelegateHandle* handle, Span<EValue*> args) const override {
    if (args.size() < 2 || !args[0]->isTensor() || !args[args.size() - 1]->isTensor()) {
      return Error::InvalidArgument;
    }
    if (handle == static_cast<DelegateHandle*>(&stage_token)) {
      return execute_stage(context, args);
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

 private:
  static constexpr int kMaxStageElements = 64;

  Error execute_stage(BackendExecutionContext&, Span<EValue*> args) const {
    const auto selection = executorch::extension::cuda::getCallerStream();
    const auto& x = args[0]->toTensor();
    executorch::aten::Tensor* y = nullptr;
    executorch::aten::Tensor* observed = nullptr;
    for (size_t i = 1; i < args.size(); ++i) {
      if (!args[i]->isTensor()) continue;
      auto& t = args[i]->toTensor();
      if (t.scalar_type() == executorch::aten::ScalarType::Float && t.numel() == x.numel()) {
        y = &t;
      } else if (t.scalar_type() == executorch::aten::ScalarType::Long && t.numel() == 3) {
        observed = &t;
      }
    }
    if (x.scalar_type() != executorch::aten::ScalarType::Float || y == nullptr || observed == nullptr ||
        x.numel() > kMaxStageElements) {
      ET_LOG(Error, "CallerStreamProbe stage: expected float x (<= %d elements) -> float y, int64[3]",
             kMaxStageElements);
      return Error::InvalidArgument;
    }
    float values[kMaxStageElements];
    const float* in = x.const_data_ptr<float>();
    const int n = static_cast<int>(x.numel());
    for (int i = 0; i < n; ++i) {
      if (in[i] != in[i]) {
        // A refusal in the middle of a program: the tests' way to fail a call after a real
        // CUDA partition queued its work.
        ET_LOG(Error, "CallerStreamProbe stage: input %d is NaN", i);
        return Error::InvalidArgument;
      }
      values[i] = -in[i];
    }
    int64_t* o = observed->mutable_data_ptr<int64_t>();
    o[0] = selection.has_value() ? 1 : 0;
    o[1] = selection.has_value() ? static_cast<int64_t>(reinterpret_cast<uintptr_t>(*selection)) : 0;
    o[2] = 0;
#if defined(ETSERVE_PROBE_WITH_CUDA)
    if (!etserve_probe_queue_stage_write(selection.value_or(nullptr), selection.has_value(), values, n,
                                         y->mutable_data_ptr<float>())) {
      ET_LOG(Error, "CallerStreamProbe stage: y is not in page-locked host memory, or the launch failed");
      return Error::Internal;
    }
    o[2] = 1;
#else
    std::memcpy(y->mutable_data_ptr<float>(), values, n * sizeof(float));
#endif
    return Error::Ok;
  }
};

CallerStreamProbe probe;
const executorch::runtime::Backend kBackend{"CallerStreamProbe", &probe};
const Error kRegistered = executorch::runtime::register_backend(kBackend);

}  // namespace
