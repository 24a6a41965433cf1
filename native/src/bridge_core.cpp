#include "bridge_core.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>

#include <executorch/extension/data_loader/mmap_data_loader.h>
#include <executorch/extension/flat_tensor/flat_tensor_data_map.h>
#include <executorch/extension/named_data_map/merged_data_map.h>
#include <executorch/extension/tensor/tensor.h>
#include <executorch/extension/threadpool/threadpool_guard.h>
#include <executorch/runtime/backend/backend_options_map.h>
#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/backend/options.h>

#include "etserve/caller_stream_api.h"
#include "etserve/cuda_runtime_min.h"
#include "native_log.h"
#include "sha256.h"

namespace etserve {
namespace {

using executorch::extension::Module;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::Program;
using executorch::runtime::Result;
using executorch::runtime::Tag;

// "Error::NotFound" -> "NotFound": the name Java code and users see.
std::string error_name(Error error) {
  std::string name = executorch::runtime::to_string(error);
  const auto colon = name.rfind(':');
  return colon == std::string::npos ? name : name.substr(colon + 1);
}

[[noreturn]] void fail(Error error, const std::string& message) {
  throw BridgeError(error_name(error), static_cast<int>(error), message);
}

TensorSpec to_spec(const executorch::runtime::MethodMeta& meta, size_t index, bool input) {
  TensorSpec spec;
  auto tag = input ? meta.input_tag(index) : meta.output_tag(index);
  if (!tag.ok()) fail(tag.error(), "cannot read the tag of a method value");
  spec.tag = static_cast<int>(tag.get());
  if (tag.get() != Tag::Tensor) return spec;
  auto info = input ? meta.input_tensor_meta(index) : meta.output_tensor_meta(index);
  if (!info.ok()) fail(info.error(), "cannot read the tensor metadata of a method value");
  spec.dtype = static_cast<int>(info->scalar_type());
  for (auto d : info->sizes()) spec.sizes.push_back(d);
  spec.planned = info->is_memory_planned();
  return spec;
}

// The alignment ExecuTorch's memory planner gives every planned tensor (MemoryPlanningPass's
// default): an unplanned input the caller hands over must have it to be read in place.
constexpr uintptr_t kInputAlignment = 16;

std::string describe_sizes(const std::vector<int64_t>& sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(sizes[i]);
  }
  return s + "]";
}

}  // namespace

size_t element_size(int dtype) {
  switch (dtype) {
    case 0: case 1: case 11: return 1;    // Byte, Char, Bool
    case 2: case 5: case 15: case 27: return 2;  // Short, Half, BFloat16, UInt16
    case 3: case 6: case 28: return 4;    // Int, Float, UInt32
    case 4: case 7: case 29: return 8;    // Long, Double, UInt64
    default: return 0;
  }
}

namespace {

bool is_sha256_hex(const char* key) {
  size_t n = 0;
  for (; key[n] != '\0'; ++n) {
    const char c = key[n];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return n == 64;
}

// XNNPACK shares packed weights across every program in the process by the key a file declares
// for each weight, which exporters make the SHA-256 of its bytes. Bytes that do not hash to their
// key (a corrupt file, or one made to pass its weights off under another model's key) would
// change the answers of every model with that key: such a file is refused. Returns whether every
// key was such a hash; keys of another form cannot be trusted to be unique across programs.
bool verify_named_data(const executorch::runtime::NamedDataMap& map, const std::string& where) {
  auto count = map.get_num_keys();
  if (!count.ok()) fail(count.error(), "cannot list the named data of " + where);
  bool all_hashes = true;
  for (uint32_t i = 0; i < *count; ++i) {
    auto key = map.get_key(i);
    if (!key.ok()) fail(key.error(), "cannot read named data key " + std::to_string(i) + " of " + where);
    if (!is_sha256_hex(*key)) {
      all_hashes = false;
      continue;
    }
    auto data = map.get_data(*key);
    if (!data.ok()) fail(data.error(), "cannot read named data '" + std::string(*key) + "' of " + where);
    const std::string actual = Sha256::hex(data->data(), data->size());
    data->Free();
    if (actual != *key) {
      fail(Error::InvalidProgram, "named data '" + std::string(*key).substr(0, 16) + "...' in " + where +
                                      " does not hash to its key: the file is corrupt, or carries weights "
                                      "under another model's key");
    }
  }
  return all_hashes;
}

void require_regular_file(const std::string& path, const char* what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail(Error::NotFound, std::string("no such ") + what + ": " + path);
  if (!S_ISREG(st.st_mode)) fail(Error::InvalidArgument, std::string("not a regular file: ") + path);
  if (st.st_size == 0) fail(Error::InvalidProgram, std::string("empty ") + what + ": " + path);
}

std::string join(const std::vector<std::string>& items) {
  std::string s;
  for (const auto& item : items) s += (s.empty() ? "" : ", ") + item;
  return s;
}

}  // namespace

ProgramHandle::~ProgramHandle() = default;

std::shared_ptr<ProgramHandle> ProgramHandle::open(const std::string& path, int verification,
                                                   const std::vector<std::string>& data_files) {
  require_regular_file(path, "file");
  auto program_loader = executorch::extension::MmapDataLoader::from(
      path.c_str(), executorch::extension::MmapDataLoader::MlockConfig::NoMlock);
  if (!program_loader.ok()) fail(program_loader.error(), "cannot load ExecuTorch program " + path);
  std::vector<std::unique_ptr<executorch::runtime::DataLoader>> data_loaders;
  for (const auto& file : data_files) {
    require_regular_file(file, "data file");
    auto loader = executorch::extension::MmapDataLoader::from(file.c_str());
    if (!loader.ok()) fail(loader.error(), "cannot map data file " + file);
    data_loaders.push_back(std::make_unique<executorch::extension::MmapDataLoader>(std::move(*loader)));
  }
  return open(std::make_unique<executorch::extension::MmapDataLoader>(std::move(*program_loader)),
              std::move(data_loaders), path, verification, data_files);
}

std::shared_ptr<ProgramHandle> ProgramHandle::open(
    std::unique_ptr<executorch::runtime::DataLoader> program_loader,
    std::vector<std::unique_ptr<executorch::runtime::DataLoader>> data_loaders, const std::string& path,
    int verification, const std::vector<std::string>& data_files) {
  auto handle = std::shared_ptr<ProgramHandle>(new ProgramHandle());
  handle->primary_ = std::make_unique<Module>(std::move(program_loader));
  const auto level = verification == 0 ? Program::Verification::Minimal
                                       : Program::Verification::InternalConsistency;
  const Error err = handle->primary_->load(level);
  if (err != Error::Ok) fail(err, "cannot load ExecuTorch program " + path);
  handle->program_ = handle->primary_->program();
  if (!handle->program_) fail(Error::Internal, "ExecuTorch returned no program for " + path);

  for (size_t i = 0; i < data_loaders.size(); ++i) {
    auto map = executorch::extension::FlatTensorDataMap::load(data_loaders[i].get());
    if (!map.ok()) fail(map.error(), "cannot read data file " + data_files[i] + " (not a .ptd?)");
    handle->data_maps_.push_back(
        std::make_unique<executorch::extension::FlatTensorDataMap>(std::move(*map)));
    handle->data_loaders_.push_back(std::move(data_loaders[i]));
  }
  handle->data_files_ = data_files;
  auto embedded = handle->program_->get_named_data_map();
  bool all_hashes = !embedded.ok() || *embedded == nullptr || verify_named_data(**embedded, path);
  for (size_t i = 0; i < handle->data_maps_.size(); ++i) {
    all_hashes = verify_named_data(*handle->data_maps_[i], data_files[i]) && all_hashes;
  }
  handle->shares_packed_weights_ = all_hashes;
  if (handle->data_maps_.size() == 1) {
    handle->data_map_ = handle->data_maps_.front().get();
  } else if (handle->data_maps_.size() > 1) {
    std::vector<const executorch::runtime::NamedDataMap*> maps;
    for (const auto& m : handle->data_maps_) maps.push_back(m.get());
    auto merged = executorch::extension::merged_data_map::MergedDataMap::load(
        executorch::runtime::Span<const executorch::runtime::NamedDataMap*>(maps.data(),
                                                                             maps.size()));
    if (!merged.ok()) {
      fail(merged.error(), "cannot merge data files " + join(data_files) +
                               " (a key present in two files?)");
    }
    handle->merged_ = std::make_unique<executorch::extension::merged_data_map::MergedDataMap>(
        std::move(*merged));
    handle->data_map_ = handle->merged_.get();
  }
  return handle;
}

std::vector<std::string> ProgramHandle::method_names() const {
  std::vector<std::string> names;
  const size_t n = program_->num_methods();
  for (size_t i = 0; i < n; ++i) {
    auto name = program_->get_method_name(i);
    if (!name.ok()) fail(name.error(), "cannot read method name " + std::to_string(i));
    names.emplace_back(*name);
  }
  return names;
}

MethodSignature ProgramHandle::signature(const std::string& method) const {
  auto meta = program_->method_meta(method.c_str());
  if (!meta.ok()) fail(meta.error(), "no method '" + method + "' in the program");
  MethodSignature sig;
  for (size_t i = 0; i < meta->num_inputs(); ++i) sig.inputs.push_back(to_spec(*meta, i, true));
  for (size_t i = 0; i < meta->num_outputs(); ++i) sig.outputs.push_back(to_spec(*meta, i, false));
  for (size_t i = 0; i < meta->num_backends(); ++i) {
    auto name = meta->get_backend_name(i);
    if (!name.ok()) fail(name.error(), "cannot read backend name " + std::to_string(i));
    sig.backends.emplace_back(*name);
  }
  for (size_t i = 0; i < meta->num_memory_planned_buffers(); ++i) {
    auto size = meta->memory_planned_buffer_size(i);
    if (!size.ok()) fail(size.error(), "cannot read planned buffer " + std::to_string(i));
    sig.planned_buffers.push_back(*size);
  }
  return sig;
}

PlannedMemory::PlannedMemory(const executorch::runtime::MethodMeta& meta, int device) {
  using executorch::runtime::etensor::DeviceType;
  const size_t n = meta.num_memory_planned_buffers();
  host_.reserve(n);
  pinned_.reserve(n);  // taking ownership of a pinned buffer then never allocates
  bool any_device = false;
  for (size_t i = 0; i < n; ++i) {
    const std::string which = "planned buffer " + std::to_string(i);
    auto size = meta.memory_planned_buffer_size(i);
    if (!size.ok() || *size < 0) fail(size.ok() ? Error::InvalidProgram : size.error(), "cannot read " + which);
    const auto bytes = static_cast<size_t>(*size);
    auto where = meta.memory_planned_buffer_device(i);
    if (!where.ok()) fail(where.error(), "cannot read the device of " + which);
    if (where->type() == DeviceType::CUDA) {
      if (device < 0) {
        fail(Error::NotSupported, which + " (" + std::to_string(bytes) +
                                      " bytes) is planned on a CUDA device: the program runs on a GPU only");
      }
      auto buffer = executorch::runtime::DeviceMemoryBuffer::create(
          bytes, DeviceType::CUDA, static_cast<executorch::runtime::etensor::DeviceIndex>(device));
      if (!buffer.ok()) {
        fail(buffer.error(), buffer.error() == Error::NotFound
                                 ? which + " is planned on a CUDA device, but no CUDA device allocator is "
                                           "registered (the CUDA delegate's AOTI shims are not loaded)"
                                 : "cannot allocate " + std::to_string(bytes) + " bytes for " + which +
                                       " on cuda:" + std::to_string(device));
      }
      spans_.push_back(buffer->as_span());
      device_.push_back(std::move(*buffer));
      devices_.emplace_back(DeviceType::CUDA, static_cast<executorch::runtime::etensor::DeviceIndex>(device));
      device_bytes_ += bytes;
      any_device = true;
      continue;
    }
    if (device >= 0 && bytes > 0) {
      void* p = nullptr;
      const int rc = cudaHostAlloc(&p, bytes, cuda_min::kHostAllocPortable | cuda_min::kHostAllocMapped);
      if (rc != 0) {
        throw BridgeError("CudaError", rc, "cannot allocate " + std::to_string(bytes) +
                                               " bytes of page-locked host memory for " + which + ": " +
                                               cudaGetErrorName(rc));
      }
      pinned_.emplace_back(p);
      spans_.emplace_back(static_cast<uint8_t*>(p), bytes);
    } else {
      host_.emplace_back(bytes);
      spans_.emplace_back(host_.back().data(), bytes);
    }
    devices_.emplace_back(DeviceType::CPU, 0);
  }
  const executorch::runtime::Span<executorch::runtime::Span<uint8_t>> buffers(spans_.data(), spans_.size());
  allocator_ = any_device
      ? std::make_unique<executorch::runtime::HierarchicalAllocator>(
            buffers, executorch::runtime::Span<const executorch::runtime::etensor::Device>(devices_.data(),
                                                                                          devices_.size()))
      : std::make_unique<executorch::runtime::HierarchicalAllocator>(buffers);
}

void PlannedMemory::PinnedFree::operator()(void* p) const {
  cudaFreeHost(p);  // after a sticky fault this fails; nothing else to do
}

InstanceHandle::InstanceHandle(std::shared_ptr<ProgramHandle> program, const std::string& method, int device,
                               bool caller_thread_only)
    : program_(std::move(program)), device_(device), caller_thread_only_(caller_thread_only), method_(method) {
  signature_ = program_->signature(method);
  const auto& shared = *program_->program();
  auto meta = shared.method_meta(method.c_str());
  if (!meta.ok()) fail(meta.error(), "no method '" + method + "' in the program");
  if (device >= 0) {
    // Delegates allocate their device state (AOTI containers, weights) on the current device.
    const int rc = cudaSetDevice(device);
    if (rc != 0) {
      throw BridgeError("CudaError", rc, "cudaSetDevice(" + std::to_string(device) + ") failed: " +
                                             cudaGetErrorName(rc));
    }
  }
  // Planned memory is per instance; constants (in the program or the data map) are shared.
  planned_ = std::make_unique<PlannedMemory>(*meta, device);
  memory_manager_ = std::make_unique<executorch::runtime::MemoryManager>(
      &method_allocator_, planned_->allocator(), &temp_allocator_);
  // XNNPACK packs weights at init; its weights cache lets instances share the packed copy (the
  // 1.5.1 wheel reads "weight_cache_enabled" from the load-time options). The cache is keyed
  // process-wide by the declared keys, so only a program whose keys were all verified uses it;
  // an entry also keeps XNNPACK's seed of the operator that packed it (the wheel's cache refuses
  // an entry whose seed differs), so the same weights packed another way are packed again.
  executorch::runtime::BackendOptions<1> xnnpack;
  executorch::runtime::LoadBackendOptionsMap options;
  if (xnnpack.set_option("weight_cache_enabled", program_->shares_packed_weights()) != Error::Ok ||
      options.set_options("XnnpackBackend", xnnpack.view()) != Error::Ok) {
    fail(Error::Internal, "cannot build the XNNPACK load options");
  }
  auto loaded = [&] {
    std::optional<executorch::extension::threadpool::NoThreadPoolGuard> no_pool;
    if (caller_thread_only_) no_pool.emplace();  // XNNPACK builds its runtimes without the pool
    return shared.load_method(method.c_str(), memory_manager_.get(), nullptr, program_->data_map(), &options);
  }();
  if (!loaded.ok()) {
    std::string message = "cannot load method '" + method + "'";
    if (!program_->data_files().empty()) {
      message += " with data files " + join(program_->data_files()) +
                 (loaded.error() == Error::NotFound ? " (a named tensor is missing from them)" : "");
    } else if (loaded.error() == Error::InvalidState || loaded.error() == Error::NotFound) {
      message += " (it reads external data: put its .ptd file next to it)";
    }
    fail(loaded.error(), message);
  }
  method_handle_ = std::make_unique<executorch::runtime::Method>(std::move(*loaded));
  // Dynamism lives on the loaded method's values, not in MethodMeta.
  for (size_t i = 0; i < signature_.inputs.size() && i < method_handle_->inputs_size(); ++i) {
    const EValue& v = method_handle_->get_input(i);
    if (v.isTensor()) {
      signature_.inputs[i].dynamism = static_cast<int>(v.toTensor().shape_dynamism());
    }
  }
  for (size_t i = 0; i < signature_.outputs.size() && i < method_handle_->outputs_size(); ++i) {
    const EValue& v = method_handle_->get_output(i);
    if (v.isTensor()) {
      signature_.outputs[i].dynamism = static_cast<int>(v.toTensor().shape_dynamism());
    }
  }
  // Unplanned values' sizes (a dynamic shape's upper bound), and the memory of this instance a
  // dynamic unplanned output is written to: the caller's size is known only after the call.
  const auto bound_bytes = [&](size_t i, bool input) -> size_t {
    auto info = input ? meta->input_tensor_meta(i) : meta->output_tensor_meta(i);
    return info.ok() ? info->nbytes() : 0;
  };
  input_bound_bytes_.resize(signature_.inputs.size());
  input_scratch_.resize(signature_.inputs.size());
  for (size_t i = 0; i < signature_.inputs.size(); ++i) {
    if (signature_.inputs[i].tag == static_cast<int>(Tag::Tensor)) input_bound_bytes_[i] = bound_bytes(i, true);
  }
  output_bound_bytes_.resize(signature_.outputs.size());
  output_scratch_.resize(signature_.outputs.size());
  for (size_t i = 0; i < signature_.outputs.size(); ++i) {
    const auto& spec = signature_.outputs[i];
    if (spec.tag != static_cast<int>(Tag::Tensor)) continue;
    output_bound_bytes_[i] = bound_bytes(i, false);
    if (!spec.planned && spec.dynamism != 0) output_scratch_[i] = aligned_bytes(output_bound_bytes_[i]);
  }
}

InstanceHandle::OwnedBytes InstanceHandle::aligned_bytes(size_t nbytes) {
  constexpr size_t kAlign = 64;
  const size_t rounded = (std::max<size_t>(nbytes, 1) + kAlign - 1) / kAlign * kAlign;
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(kAlign, rounded));
  if (p == nullptr) throw std::bad_alloc();
  return OwnedBytes(p);
}

std::vector<const uint8_t*> InstanceHandle::place_outputs(OutputSink& sink) {
  static uint8_t empty_storage[8];
  std::vector<const uint8_t*> in_place(signature_.outputs.size(), nullptr);
  for (size_t i = 0; i < signature_.outputs.size(); ++i) {
    const auto& spec = signature_.outputs[i];
    if (spec.planned || spec.tag != static_cast<int>(Tag::Tensor)) continue;
    const size_t bytes = output_bound_bytes_[i];
    uint8_t* target = output_scratch_[i].get();
    if (target == nullptr) {
      target = sink.reserve(i, bytes);
      if (target == nullptr && bytes > 0) {
        fail(Error::Internal, "no memory reserved for output " + std::to_string(i));
      }
      if (target == nullptr) target = empty_storage;
      in_place[i] = target;
    }
    // Every unplanned output is repointed before each forward: the memory of an earlier call
    // went back to its request and must never be written again.
    const Error err = method_handle_->set_output_data_ptr(target, std::max<size_t>(bytes, 1), i);
    if (err != Error::Ok) fail(err, "cannot place output " + std::to_string(i) + " of '" + method_ + "'");
  }
  return in_place;
}

Result<std::vector<EValue>> InstanceHandle::run(const std::vector<EValue>& values) {
  // Thread-local: the optimized kernels' parallel_for runs its range on this thread.
  std::optional<executorch::extension::threadpool::NoThreadPoolGuard> no_pool;
  if (caller_thread_only_) no_pool.emplace();
  for (size_t i = 0; i < values.size(); ++i) {
    const Error err = method_handle_->set_input(values[i], i);
    if (err != Error::Ok) return err;
  }
  const Error err = method_handle_->execute();
  if (err != Error::Ok) return err;
  std::vector<EValue> outs(method_handle_->outputs_size());
  const Error got = method_handle_->get_outputs(outs.data(), outs.size());
  if (got != Error::Ok) return got;
  return outs;
}

InstanceHandle::~InstanceHandle() {
  // Delegates free their device state on the current device.
  if (device_ >= 0) cudaSetDevice(device_);
  method_handle_.reset();
  if (event_ != nullptr) {
    cudaEventDestroy(static_cast<cudaEvent_t>(event_));  // a sticky error leaves nothing to free
  }
}

int InstanceHandle::wait_for(void* stream, const StreamSelection& selection, AdaptiveWaitPolicy::Ended& ended) {
  auto* s = static_cast<cudaStream_t>(stream);
  const CompletionWait how = selection.wait;
  if (how == CompletionWait::kSpin) return cudaStreamSynchronize(s);

  const unsigned int flags = cuda_min::kEventDisableTiming |
                             (how == CompletionWait::kBlocking ? cuda_min::kEventBlockingSync : 0u);
  if (event_ != nullptr && event_flags_ != flags) {
    cudaEventDestroy(static_cast<cudaEvent_t>(event_));
    event_ = nullptr;
  }
  if (event_ == nullptr) {
    // The device is current (execute made it so); an instance only ever runs on one device.
    cudaEvent_t created = nullptr;
    // No event (out of resources, not a fault): the stream's own synchronize still waits, and
    // the failure is cleared so no delegate reads it later as its own launch's error.
    if (cudaEventCreateWithFlags(&created, flags) != 0) {
      cudaGetLastError();
      return cudaStreamSynchronize(s);
    }
    event_ = created;
    event_flags_ = flags;
  }
  auto* event = static_cast<cudaEvent_t>(event_);
  if (cudaEventRecord(event, s) != 0) {
    cudaGetLastError();
    return cudaStreamSynchronize(s);
  }
  if (how == CompletionWait::kBlocking) return cudaEventSynchronize(event);

  SystemClock clock;
  wait_policy_.set_sleep_slice_ns(selection.sleep_slice_ns);
  const int r = wait_policy_.wait(
      [event]() {
        const int q = cudaEventQuery(event);
        if (q == 0) return 1;
        if (q == cuda_min::kNotReady) return 0;
        return -q;  // a real error, e.g. a sticky illegal address
      },
      clock, selection.timeout_ns);
  if (r == AdaptiveWaitPolicy::kTimedOut) {
    // The work is still queued or running: nothing here can stop it, and the stream, this
    // instance's memory and the device stay busy with it. CUDA's own code for a kernel that ran
    // too long marks the device faulted (sticky), so it serves no more calls and its health
    // fails until a restart.
    throw BridgeError("CudaError", cuda_min::kLaunchTimeout,
                      "the GPU work of '" + method_ + "' did not complete within " +
                          std::to_string(selection.timeout_ns / 1'000'000) +
                          " ms (etserve.cuda.completion-timeout): the device is taken as hung");
  }
  if (r < 0) return -r;
  ended = wait_policy_.last_ended();
  return 0;
}

std::vector<OutputTensor> InstanceHandle::execute(const std::vector<InputView>& inputs,
                                                  const StreamSelection& stream) {
  struct Collect : OutputSink {
    std::vector<OutputTensor> result;
    void begin(size_t count) override { result.resize(count); }
    uint8_t* reserve(size_t index, size_t nbytes) override {
      result.at(index).bytes.resize(nbytes);
      return result[index].bytes.data();
    }
    void accept(size_t index, int dtype, const std::vector<int64_t>& sizes, const uint8_t* data,
                size_t nbytes) override {
      OutputTensor& out = result.at(index);
      out.dtype = dtype;
      out.sizes = sizes;
      if (data != out.bytes.data()) out.bytes.assign(data, data + nbytes);
      out.bytes.resize(nbytes);
    }
  } collect;
  execute(inputs, stream, collect);
  return std::move(collect.result);
}

AdaptiveWaitPolicy::Ended InstanceHandle::execute(const std::vector<InputView>& inputs,
                                                  const StreamSelection& stream, OutputSink& sink) {
  if (inputs.size() != signature_.inputs.size()) {
    fail(Error::InvalidArgument, "method '" + method_ + "' takes " +
                                     std::to_string(signature_.inputs.size()) + " inputs, got " +
                                     std::to_string(inputs.size()));
  }
  std::vector<executorch::extension::TensorPtr> tensors;
  std::vector<EValue> values;
  int64_t copied_bytes = 0;
  tensors.reserve(inputs.size());
  values.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto& in = inputs[i];
    const auto& spec = signature_.inputs[i];
    const std::string which = "input " + std::to_string(i);
    if (spec.tag != static_cast<int>(Tag::Tensor)) {
      fail(Error::NotSupported, which + " of '" + method_ + "' is not a tensor");
    }
    if (in.dtype != spec.dtype) {
      fail(Error::InvalidArgument, which + ": dtype " + std::to_string(in.dtype) +
                                       " given, the method expects " + std::to_string(spec.dtype));
    }
    const size_t esize = element_size(in.dtype);
    if (esize == 0) fail(Error::NotSupported, which + ": unsupported dtype");
    if (in.sizes.size() != spec.sizes.size()) {
      fail(Error::InvalidArgument, which + ": rank " + std::to_string(in.sizes.size()) +
                                       " given, the method expects " + describe_sizes(spec.sizes));
    }
    std::vector<executorch::aten::SizesType> sizes;
    size_t numel = 1;
    for (auto d : in.sizes) {
      if (d < 0 || d > std::numeric_limits<int32_t>::max()) {
        fail(Error::InvalidArgument, which + ": dimension out of range");
      }
      if (d != 0 && numel > std::numeric_limits<size_t>::max() / static_cast<size_t>(d)) {
        fail(Error::InvalidArgument, which + ": too many elements");
      }
      numel *= static_cast<size_t>(d);
      sizes.push_back(static_cast<executorch::aten::SizesType>(d));
    }
    if (numel > in.capacity / esize) {
      fail(Error::InvalidArgument, which + ": shape " + describe_sizes(in.sizes) + " needs " +
                                       std::to_string(numel * esize) + " bytes, buffer holds " +
                                       std::to_string(in.capacity));
    }
    // numel == 0 may come with a null buffer; ExecuTorch never reads it then.
    static uint8_t empty_storage[8];
    void* data = in.data != nullptr ? in.data : empty_storage;
    const size_t nbytes = numel * esize;
    if (spec.planned) {
      copied_bytes += nbytes;  // set_input copies into the planned input
    } else if (reinterpret_cast<uintptr_t>(data) % kInputAlignment != 0 && nbytes > 0) {
      // ExecuTorch reads an unplanned input where it is: one that is not aligned as the
      // planner would have aligned it goes through this instance's own memory instead.
      if (nbytes > input_bound_bytes_[i]) {
        fail(Error::InvalidArgument, which + ": shape " + describe_sizes(in.sizes) +
                                         " exceeds the method's bound of " +
                                         std::to_string(input_bound_bytes_[i]) + " bytes");
      }
      if (!input_scratch_[i]) input_scratch_[i] = aligned_bytes(input_bound_bytes_[i]);
      std::memcpy(input_scratch_[i].get(), data, nbytes);
      data = input_scratch_[i].get();
      copied_bytes += nbytes;
    }
    tensors.push_back(executorch::extension::from_blob(
        data, std::move(sizes), static_cast<executorch::aten::ScalarType>(in.dtype)));
    values.emplace_back(*tensors.back());
  }

  // Outputs are placed before the inputs are set: an input the program also returns as an
  // output is then repointed at the input by set_input, never the other way round.
  sink.begin(signature_.outputs.size());
  const auto in_place = place_outputs(sink);

  // What is not already in the sink's memory is a view of Module memory: the sink takes its one
  // copy before the next call.
  auto deliver = [&](const std::vector<EValue>& outs) {
    for (size_t i = 0; i < outs.size(); ++i) {
      if (!outs[i].isTensor()) {
        fail(Error::NotSupported, "output " + std::to_string(i) + " of '" + method_ +
                                      "' is not a tensor");
      }
    }
    if (outs.size() != in_place.size()) {
      fail(Error::Internal, "method '" + method_ + "' returned " + std::to_string(outs.size()) +
                                " outputs, its signature declares " + std::to_string(in_place.size()));
    }
    std::vector<int64_t> sizes;
    for (size_t i = 0; i < outs.size(); ++i) {
      const auto& t = outs[i].toTensor();
      sizes.assign(t.sizes().begin(), t.sizes().end());
      const auto* p = static_cast<const uint8_t*>(t.const_data_ptr());
      if (t.nbytes() > 0 && p == nullptr) {
        fail(Error::Internal, "output " + std::to_string(i) + " has no data");
      }
      if (t.unsafeGetTensorImpl()->device_type() != executorch::runtime::etensor::DeviceType::CPU) {
        // A program whose memory plan leaves an output in device memory: a host copy from it
        // would read a device address. Export it with the outputs copied to the host.
        fail(Error::NotSupported, "output " + std::to_string(i) + " of '" + method_ +
                                      "' is in device memory; the server reads outputs from host memory");
      }
      if (p != in_place[i]) copied_bytes += t.nbytes();
      sink.accept(i, static_cast<int>(t.scalar_type()), sizes, p, t.nbytes());
    }
    copied_bytes_.fetch_add(copied_bytes, std::memory_order_relaxed);
  };

  if (stream.mode == StreamMode::kNone) {
    auto outs = run(values);
    if (!outs.ok()) fail(outs.error(), "execution of '" + method_ + "' failed");
    deliver(*outs);
    return AdaptiveWaitPolicy::Ended::kNone;
  }

  if (stream.mode == StreamMode::kCuda) {
    if (device_ >= 0 && stream.device != device_) {
      // Its delegates' device state lives on device_: a stream of another device cannot run it.
      fail(Error::InvalidArgument, "a stream of cuda:" + std::to_string(stream.device) +
                                       " was given to an instance of cuda:" + std::to_string(device_));
    }
    const int rc = cudaSetDevice(stream.device);
    if (rc != 0) {
      throw BridgeError("CudaError", rc, std::string("cudaSetDevice(") +
                                             std::to_string(stream.device) +
                                             ") failed: " + cudaGetErrorName(rc));
    }
  }
  auto* handle = reinterpret_cast<cudaStream_t>(stream.handle);
  // The guard, the forward and the completion wait stay in this one native call, so every
  // delegate of the program sees the same stream and outputs are complete when we copy.
  executorch::extension::cuda::CallerStreamGuard guard(handle);
  // Wait even when execution failed, or threw: work already queued must finish before the
  // stream and this Module go back to their pools.
  struct SynchronizeOnThrow {
    cudaStream_t stream;
    bool armed;
    ~SynchronizeOnThrow() {
      if (armed) cudaStreamSynchronize(stream);
    }
  } unwinding{handle, stream.mode == StreamMode::kCuda};
  auto outs = run(values);
  unwinding.armed = false;
  auto ended = AdaptiveWaitPolicy::Ended::kNone;
  if (stream.mode == StreamMode::kCuda) {
    const int rc = wait_for(handle, stream, ended);
    last_wait_end_ns_.store(SystemClock::monotonic_ns(), std::memory_order_relaxed);
    if (rc != 0) {
      throw BridgeError("CudaError", rc, std::string("waiting for the stream failed: ") +
                                             cudaGetErrorName(rc) + ": " + cudaGetErrorString(rc));
    }
  }
  if (!outs.ok()) fail(outs.error(), "execution of '" + method_ + "' failed");
  deliver(*outs);
  return ended;
}

}  // namespace etserve
