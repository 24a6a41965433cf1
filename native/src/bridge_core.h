// The bridge's C++ core, free of JNI so GoogleTest can drive it directly.
//
//  * ProgramHandle: one loaded .pte. Owns the data loader (through its primary Module) and
//    shares its Program with every instance. A Program is thread-safe.
//  * InstanceHandle: one Module over the shared Program, for one concurrent worker.
//    A Module is not thread-safe: the Java side never hands one to two threads at once.
//
// Every failure surfaces as BridgeError (never an abort): the error name, the ExecuTorch
// code when there is one, and the log lines ExecuTorch printed on this thread meanwhile.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <executorch/extension/memory_allocator/malloc_memory_allocator.h>
#include <executorch/extension/module/module.h>
#include <executorch/runtime/core/device_memory_buffer.h>
#include <executorch/runtime/core/hierarchical_allocator.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/executor/memory_manager.h>

#include <atomic>

#include "completion_wait.h"

namespace etserve {

class BridgeError : public std::runtime_error {
 public:
  BridgeError(std::string name, int code, const std::string& message, std::string native_log = {})
      : std::runtime_error(message), name_(std::move(name)), code_(code),
        native_log_(std::move(native_log)) {}
  const std::string& name() const { return name_; }
  int code() const { return code_; }
  const std::string& native_log() const { return native_log_; }
  void set_native_log(std::string log) { native_log_ = std::move(log); }

 private:
  std::string name_;
  int code_;
  std::string native_log_;
};

struct TensorSpec {
  int tag = 0;        // executorch::runtime::Tag (Tensor == 1)
  int dtype = -1;     // ScalarType code, -1 when not a tensor
  std::vector<int64_t> sizes;
  // TensorShapeDynamism of the loaded method's value (0 static, 1 bounded, 2 unbounded);
  // only an instance knows it, ProgramHandle::signature reports 0.
  int dynamism = 0;
  // False when the program leaves this input's or output's memory to the caller (exported with
  // MemoryPlanningPass(alloc_graph_input=False, alloc_graph_output=False)): ExecuTorch then reads
  // the caller's input in place and writes the output where the caller points it, no copies.
  bool planned = true;
};

struct MethodSignature {
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  std::vector<std::string> backends;
  // Bytes of each memory-planned buffer: what every instance of the method allocates. Read
  // before any instance exists, so the service can refuse a program that asks for too much.
  std::vector<int64_t> planned_buffers;
};

// One input handed over without copying: the memory belongs to the caller for the call.
struct InputView {
  void* data = nullptr;
  size_t capacity = 0;  // bytes available at data
  int dtype = -1;
  std::vector<int64_t> sizes;
};

struct OutputTensor {
  int dtype = -1;
  std::vector<int64_t> sizes;
  std::vector<uint8_t> bytes;  // owned copy: never aliases Module memory
};

// How a forward call meets CUDA streams.
enum class StreamMode : int {
  kNone = 0,           // no guard: delegates pick their own stream
  kSelectOnly = 1,     // guard with the handle, no CUDA calls (opaque handles, tests)
  kCuda = 2,           // make `device` current, guard, then wait for the stream
};

struct StreamSelection {
  StreamMode mode = StreamMode::kNone;
  uintptr_t handle = 0;
  int device = 0;
  CompletionWait wait = CompletionWait::kAdaptive;  // kCuda only
  int64_t sleep_slice_ns = 0;  // the adaptive wait's longest single sleep (0: one sleep)
  int64_t timeout_ns = 0;      // the adaptive wait gives up after this (0: never)
};

class ProgramHandle {
 public:
  // verification: 0 = Minimal, 1 = InternalConsistency.
  // data_files: .ptd files whose named data the program's methods read (external constants);
  // each is mapped once here and shared by every instance.
  static std::shared_ptr<ProgramHandle> open(const std::string& path, int verification,
                                             const std::vector<std::string>& data_files = {});
  // The same over loaders the caller made (the first-call trial's fenced ones): one for the
  // .pte and one per data file, in order; `path` and `data_files` name them in messages.
  static std::shared_ptr<ProgramHandle> open(
      std::unique_ptr<executorch::runtime::DataLoader> program_loader,
      std::vector<std::unique_ptr<executorch::runtime::DataLoader>> data_loaders, const std::string& path,
      int verification, const std::vector<std::string>& data_files);

  std::vector<std::string> method_names() const;
  MethodSignature signature(const std::string& method) const;
  const std::shared_ptr<executorch::runtime::Program>& program() const { return program_; }
  // The merged view of the data files, or null when there are none.
  const executorch::runtime::NamedDataMap* data_map() const { return data_map_; }
  const std::vector<std::string>& data_files() const { return data_files_; }
  // Whether every named-data key of the program and its data files is the SHA-256 of its bytes
  // (checked at open): only then may XNNPACK share its packed weights with other programs.
  bool shares_packed_weights() const { return shares_packed_weights_; }

  ~ProgramHandle();

 private:
  // Owns the mmap data loader the shared Program reads from; never executed.
  std::unique_ptr<executorch::extension::Module> primary_;
  std::shared_ptr<executorch::runtime::Program> program_;
  // One loader and one map per .ptd; the merged map points into them (declared after, freed first).
  std::vector<std::string> data_files_;
  std::vector<std::unique_ptr<executorch::runtime::DataLoader>> data_loaders_;
  std::vector<std::unique_ptr<executorch::runtime::NamedDataMap>> data_maps_;
  std::unique_ptr<executorch::runtime::NamedDataMap> merged_;
  const executorch::runtime::NamedDataMap* data_map_ = nullptr;
  bool shares_packed_weights_ = false;
};

// Receives the outputs of one call in memory its caller owns. `begin` comes first (before the
// forward). An output the program does not plan, of a static shape, is written by the method
// straight into memory `reserve` hands out for it. Every output then reaches `accept`: when
// `data` is the reserved memory the output is already in place; otherwise (a planned output, or
// one the program returned from elsewhere, such as an input) `data` is in the Module's memory,
// which the next call reuses, and the sink copies it once into the reserved memory, or into
// memory it takes then when it reserved none for that output.
class OutputSink {
 public:
  virtual ~OutputSink() = default;
  virtual void begin(size_t count) = 0;
  // At least `nbytes` writable bytes for output `index`, kept until `accept` (null only for 0).
  virtual uint8_t* reserve(size_t index, size_t nbytes) = 0;
  virtual void accept(size_t index, int dtype, const std::vector<int64_t>& sizes,
                      const uint8_t* data, size_t nbytes) = 0;
};

// One instance's memory-planned buffers, each where the program placed it. Host buffers are
// plain heap memory on the CPU and page-locked for an instance on a GPU (`device` >= 0), so the
// copies at a CUDA delegate's boundary are DMA ordered on the caller's stream rather than staged
// through a driver buffer. Buffers the program plans on a CUDA device come from ExecuTorch's
// device allocator (registered by the CUDA delegate's shims) on that instance's device.
class PlannedMemory {
 public:
  PlannedMemory(const executorch::runtime::MethodMeta& meta, int device);
  PlannedMemory(const PlannedMemory&) = delete;
  PlannedMemory& operator=(const PlannedMemory&) = delete;

  executorch::runtime::HierarchicalAllocator* allocator() { return allocator_.get(); }
  size_t device_bytes() const { return device_bytes_; }

 private:
  std::vector<std::vector<uint8_t>> host_;  // CPU instance
  // A GPU instance's host buffers: freed however the constructor ends (a later buffer that does
  // not fit must not leak the page-locked memory taken before it).
  struct PinnedFree {
    void operator()(void* p) const;
  };
  std::vector<std::unique_ptr<void, PinnedFree>> pinned_;
  std::vector<executorch::runtime::DeviceMemoryBuffer> device_;
  std::vector<executorch::runtime::Span<uint8_t>> spans_;
  std::vector<executorch::runtime::etensor::Device> devices_;
  std::unique_ptr<executorch::runtime::HierarchicalAllocator> allocator_;
  size_t device_bytes_ = 0;
};

class InstanceHandle {
 public:
  // Loads `method` up front, so planned memory is allocated at model load, not first call.
  // `device`: the CUDA device this instance runs on (made current while its delegates
  // initialize), or -1 for a CPU instance. `caller_thread_only`: the method's CPU operators
  // never use ExecuTorch's threadpool, but run on the thread that calls execute (XNNPACK's
  // runtimes take the pool when they are built, at load; the optimized kernels at each call).
  InstanceHandle(std::shared_ptr<ProgramHandle> program, const std::string& method, int device = -1,
                 bool caller_thread_only = false);
  ~InstanceHandle();
  InstanceHandle(const InstanceHandle&) = delete;
  InstanceHandle& operator=(const InstanceHandle&) = delete;

  // Runs the method; each output goes to `sink` before this returns (one copy out of the Module).
  // Returns how this call's adaptive completion wait ended (kNone when it waited otherwise or not).
  AdaptiveWaitPolicy::Ended execute(const std::vector<InputView>& inputs, const StreamSelection& stream,
                                    OutputSink& sink);
  // The same, collecting owned copies (tests and tools).
  std::vector<OutputTensor> execute(const std::vector<InputView>& inputs,
                                    const StreamSelection& stream);

  const std::string& method() const { return method_; }
  // The program's signature plus the loaded method's shape dynamism per tensor.
  const MethodSignature& signature() const { return signature_; }

  // How this instance's completion waits ended so far, and when the last one (any kind) returned,
  // CLOCK_MONOTONIC ns (Java's System.nanoTime on Linux), 0 before the first: a caller can tell
  // the wait from what runs after it. Safe while another thread executes.
  struct Stats {
    AdaptiveWaitPolicy::Stats waits;
    int64_t last_wait_end_ns = 0;
    // Tensor bytes this instance's calls copied: into planned inputs (ExecuTorch's set_input),
    // into its own aligned memory (a misaligned unplanned input) and out of the Module's memory.
    // 0 per call for a program whose inputs and outputs are unplanned.
    int64_t copied_bytes = 0;
  };
  Stats stats() const {
    return {wait_policy_.stats(), last_wait_end_ns_.load(std::memory_order_relaxed),
            copied_bytes_.load(std::memory_order_relaxed)};
  }

 private:
  executorch::runtime::Result<std::vector<executorch::runtime::EValue>> run(
      const std::vector<executorch::runtime::EValue>& values);
  // Points every unplanned output at the memory it is written to this call: the sink's
  // (static shape) or this instance's own bound-sized buffer (dynamic shape). Returns, per
  // output, the sink's memory the method writes in place, or null.
  std::vector<const uint8_t*> place_outputs(OutputSink& sink);

  // Memory of this instance for unplanned values that cannot use the caller's: a dynamic output
  // (the caller's size is known only after the call) and a misaligned input. 64-byte aligned.
  struct AlignedBytes {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  using OwnedBytes = std::unique_ptr<uint8_t, AlignedBytes>;
  static OwnedBytes aligned_bytes(size_t nbytes);
  std::vector<OwnedBytes> output_scratch_;
  std::vector<OwnedBytes> input_scratch_;
  std::vector<size_t> output_bound_bytes_;  // MethodMeta's nbytes: the upper bound of a dynamic shape
  std::vector<size_t> input_bound_bytes_;
  std::atomic<int64_t> copied_bytes_{0};

  std::shared_ptr<ProgramHandle> program_;  // keeps the loader and the data maps alive
  // The Method over the shared Program and shared data map, with this instance's own memory.
  int device_ = -1;
  bool caller_thread_only_ = false;
  std::unique_ptr<PlannedMemory> planned_;
  executorch::extension::MallocMemoryAllocator method_allocator_;
  executorch::extension::MallocMemoryAllocator temp_allocator_;
  std::unique_ptr<executorch::runtime::MemoryManager> memory_manager_;
  std::unique_ptr<executorch::runtime::Method> method_handle_;
  std::string method_;
  MethodSignature signature_;

  // Waits until the work queued on `stream` so far has completed; returns a cudaError_t and sets
  // `ended` to how an adaptive wait ended.
  int wait_for(void* stream, const StreamSelection& selection, AdaptiveWaitPolicy::Ended& ended);

  // The completion wait's event (created on first use, on the call's device) and what this
  // instance has learned about how long its GPU work takes.
  void* event_ = nullptr;
  unsigned int event_flags_ = 0;
  AdaptiveWaitPolicy wait_policy_;
  std::atomic<int64_t> last_wait_end_ns_{0};
};

// Bytes per element of a ScalarType code, or 0 for types the bridge refuses.
size_t element_size(int dtype);

// Every loaded object that *defines* ExecuTorch's getCallerStream: path and soname.
struct CallerStreamDefiner {
  std::string path;
  std::string soname;
};
std::vector<CallerStreamDefiner> caller_stream_definers();

// The calling thread's selection as ExecuTorch's library reports it.
struct ObservedSelection {
  bool has_value;
  uintptr_t handle;
};
ObservedSelection observe_caller_stream();

// Names of the delegates registered in ExecuTorch's one registry.
std::vector<std::string> registered_backends();

// Sizes ExecuTorch's CPU threadpool to `requested` threads (0: leaves it as it is) and returns
// its size. Only before any program loads: XNNPACK's runtimes keep the pool they were built with.
int cpu_threadpool_size(int requested);

}  // namespace etserve
