// etserve-first-call: loads a program and runs one call of a method on zero-filled inputs, in a
// process of its own. The service runs it before it loads a program into itself: a malformed
// program that passes ExecuTorch's verification can still fault inside a kernel or a delegate's
// payload, and in the service's process that fault would end the JVM. Here it ends only this
// process, which the service reads from the exit status.
//
// Whether a stray read faults depends on what happens to be mapped beside the data it strays
// from, which differs between this small process and the JVM. So the files are not mapped here
// as the service maps them: every segment ExecuTorch or a delegate loads is copied into pages of
// its own with gigabytes of inaccessible address space on both sides, and a read or write that
// leaves a segment within that distance faults here, whatever the service has mapped there.
//
//   etserve-first-call --program P --method M --verification 0|1 [--data F]... [--library L]...
//                      [--cpu-threads N] [--gpu-backend B]... [--device D] [--max-planned-bytes N]
//                      [--mapped 1]
//
// A method on one of the --gpu-backend delegates runs on CUDA device D (its planned device
// memory there, its host memory page-locked, as a GPU instance of the service), and is not
// tried without --device.
// --mapped 1 maps the files as the service does, without fences (bench/fuzz-programs.py compares).
//
// Exit status: 0 the call returned; 10 ExecuTorch refused the program or the call (the reason
// on stderr: the service's own load reports it); 11 not tried (a method on a GPU delegate, an
// input that is not a tensor, more planned memory than the service allows, a GPU method without
// --device); 2 bad arguments.
// A signal is the program's fault. ExecuTorch's warnings and errors go to stderr.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <executorch/runtime/core/data_loader.h>
#include <executorch/runtime/platform/platform.h>
#include <executorch/runtime/platform/runtime.h>

#include "bridge_core.h"

namespace {

constexpr int kRan = 0;
constexpr int kUsage = 2;
constexpr int kRefused = 10;
constexpr int kNotTried = 11;

struct Arguments {
  std::string program;
  std::string method;
  int verification = 1;
  int cpu_threads = 0;
  int device = -1;
  int64_t max_planned_bytes = INT64_MAX;
  bool mapped = false;
  std::vector<std::string> data_files;
  std::vector<std::string> libraries;
  std::vector<std::string> gpu_backends;
};

bool parse(int argc, char** argv, Arguments& out) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return false;
    const std::string value = argv[++i];
    if (flag == "--program") {
      out.program = value;
    } else if (flag == "--method") {
      out.method = value;
    } else if (flag == "--verification") {
      out.verification = std::atoi(value.c_str());
    } else if (flag == "--device") {
      out.device = std::atoi(value.c_str());
    } else if (flag == "--cpu-threads") {
      out.cpu_threads = std::atoi(value.c_str());
    } else if (flag == "--max-planned-bytes") {
      out.max_planned_bytes = std::atoll(value.c_str());
    } else if (flag == "--mapped") {
      out.mapped = value == "1";
    } else if (flag == "--data") {
      out.data_files.push_back(value);
    } else if (flag == "--library") {
      out.libraries.push_back(value);
    } else if (flag == "--gpu-backend") {
      out.gpu_backends.push_back(value);
    } else {
      return false;
    }
  }
  return !out.program.empty() && !out.method.empty();
}

using executorch::runtime::DataLoader;
using executorch::runtime::Error;
using executorch::runtime::FreeableBuffer;
using executorch::runtime::Result;

// Reads a file segment by segment, each into pages of its own fenced by inaccessible space. A
// segment keeps its offset within a page, as a mapping of the file would, so alignment is the
// service's.
class FencedFileLoader final : public DataLoader {
 public:
  static Result<FencedFileLoader> from(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Error::AccessFailed;
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      ::close(fd);
      return Error::AccessFailed;
    }
    return FencedFileLoader(fd, static_cast<size_t>(st.st_size));
  }
  FencedFileLoader(FencedFileLoader&& other) noexcept : fd_(other.fd_), size_(other.size_) { other.fd_ = -1; }
  FencedFileLoader(const FencedFileLoader&) = delete;
  FencedFileLoader& operator=(const FencedFileLoader&) = delete;
  FencedFileLoader& operator=(FencedFileLoader&&) = delete;
  ~FencedFileLoader() override {
    if (fd_ >= 0) ::close(fd_);
  }

  Result<FreeableBuffer> load(size_t offset, size_t size, const SegmentInfo&) const override {
    if (offset > size_ || size > size_ - offset) return Error::InvalidArgument;
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    const size_t lead = offset % page;
    const size_t pages = (lead + size + page - 1) / page * page;
    const size_t total = 2 * kFence + std::max(pages, page);
    auto* region = static_cast<uint8_t*>(
        ::mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
    if (region == MAP_FAILED) return Error::MemoryAllocationFailed;
    uint8_t* data = region + kFence;
    if (::mprotect(data, std::max(pages, page), PROT_READ | PROT_WRITE) != 0 ||
        !read_fully(data + lead, offset, size) || ::mprotect(data, std::max(pages, page), PROT_READ) != 0) {
      ::munmap(region, total);
      return Error::AccessFailed;
    }
    // FreeableBuffer's free function gets the data pointer: the region is found from it.
    return FreeableBuffer(data + lead, size, &release, reinterpret_cast<void*>(total));
  }

  Error load_into(size_t offset, size_t size, const SegmentInfo&, void* buffer) const override {
    if (offset > size_ || size > size_ - offset) return Error::InvalidArgument;
    return read_fully(static_cast<uint8_t*>(buffer), offset, size) ? Error::Ok : Error::AccessFailed;
  }

  Result<size_t> size() const override { return size_; }

 private:
  // Far enough that a stray offset of a few hundred megabytes still lands in it.
  static constexpr size_t kFence = size_t{4} << 30;

  FencedFileLoader(int fd, size_t size) : fd_(fd), size_(size) {}

  bool read_fully(uint8_t* into, size_t offset, size_t size) const {
    while (size > 0) {
      ssize_t n = ::pread(fd_, into, size, static_cast<off_t>(offset));
      if (n <= 0) return false;
      into += n;
      offset += static_cast<size_t>(n);
      size -= static_cast<size_t>(n);
    }
    return true;
  }

  static void release(void* context, void* data, size_t) {
    const size_t total = reinterpret_cast<size_t>(context);
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    auto* start = static_cast<uint8_t*>(data);
    start -= reinterpret_cast<uintptr_t>(start) % page;
    ::munmap(start - kFence, total);
  }

  int fd_;
  size_t size_;
};

std::unique_ptr<DataLoader> fenced(const std::string& path) {
  auto loader = FencedFileLoader::from(path);
  if (!loader.ok()) {
    throw etserve::BridgeError("AccessFailed", static_cast<int>(loader.error()), "cannot read " + path);
  }
  return std::make_unique<FencedFileLoader>(std::move(*loader));
}

// Warnings and worse only: the service shows the last lines when the process dies.
void emit(et_timestamp_t, et_pal_log_level_t level, const char* filename, const char*, size_t line,
          const char* message, size_t length) {
  if (level == kInfo || level == kDebug) return;
  std::fprintf(stderr, "[executorch %c %s:%zu] %.*s\n", static_cast<char>(level), filename ? filename : "?",
               line, static_cast<int>(length), message);
}

// 64-byte aligned zeros, freed at exit with the process.
void* zeros(size_t nbytes) {
  const size_t rounded = std::max<size_t>(64, (nbytes + 63) / 64 * 64);
  void* p = std::aligned_alloc(64, rounded);
  if (p != nullptr) std::memset(p, 0, rounded);
  return p;
}

int run(const Arguments& args) {
  // Delegates register by name when their library loads, as they do in the service.
  for (const auto& library : args.libraries) {
    if (dlopen(library.c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr) {
      std::fprintf(stderr, "cannot load %s: %s\n", library.c_str(), dlerror());
      return kNotTried;
    }
  }
  etserve::cpu_threadpool_size(args.cpu_threads);
  std::shared_ptr<etserve::ProgramHandle> program;
  if (args.mapped) {
    program = etserve::ProgramHandle::open(args.program, args.verification, args.data_files);
  } else {
    std::vector<std::unique_ptr<DataLoader>> data_loaders;
    for (const auto& file : args.data_files) data_loaders.push_back(fenced(file));
    program = etserve::ProgramHandle::open(fenced(args.program), std::move(data_loaders), args.program,
                                           args.verification, args.data_files);
  }
  const auto signature = program->signature(args.method);
  int device = -1;
  for (const auto& backend : signature.backends) {
    if (std::find(args.gpu_backends.begin(), args.gpu_backends.end(), backend) != args.gpu_backends.end()) {
      if (args.device < 0) {
        std::fprintf(stderr, "not tried: the method runs on %s\n", backend.c_str());
        return kNotTried;
      }
      device = args.device;
    }
  }
  int64_t planned = 0;  // saturating: a file's sizes may be negative or sum past int64
  for (int64_t bytes : signature.planned_buffers) {
    planned = bytes < 0 || bytes > INT64_MAX - planned ? INT64_MAX : planned + bytes;
  }
  if (planned > args.max_planned_bytes) {
    std::fprintf(stderr, "not tried: the method plans %lld bytes, over %lld\n", static_cast<long long>(planned),
                 static_cast<long long>(args.max_planned_bytes));
    return kNotTried;
  }
  std::vector<etserve::InputView> inputs;
  for (const auto& spec : signature.inputs) {
    const size_t element = etserve::element_size(spec.dtype);
    if (spec.tag != 1 || element == 0) {
      std::fprintf(stderr, "not tried: an input is not a tensor the service can serve\n");
      return kNotTried;
    }
    size_t count = 1;
    for (int64_t size : spec.sizes) count *= static_cast<size_t>(std::max<int64_t>(size, 0));
    etserve::InputView view;
    view.capacity = count * element;
    view.data = zeros(view.capacity);
    view.dtype = spec.dtype;
    view.sizes = spec.sizes;  // a dynamic input at its upper bound, the shape its memory is planned for
    if (view.data == nullptr) {
      std::fprintf(stderr, "not tried: no memory for an input of %zu bytes\n", view.capacity);
      return kNotTried;
    }
    inputs.push_back(std::move(view));
  }
  etserve::InstanceHandle instance(program, args.method, device);
  instance.execute(inputs, etserve::StreamSelection{});
  return kRan;
}

}  // namespace

int main(int argc, char** argv) {
  Arguments args;
  if (!parse(argc, argv, args)) {
    std::fprintf(stderr,
                 "usage: %s --program P --method M [--verification 0|1] [--data F]... [--library L]... "
                 "[--cpu-threads N] [--gpu-backend B]... [--device D] [--max-planned-bytes N] [--mapped 1]\n",
                 argv[0]);
    return kUsage;
  }
  // A program may allocate without bound (one changed byte made XNNPACK plan gigabytes): under
  // memory pressure the kernel then ends this process first, not the service. Raising one's own
  // score needs no privilege.
  if (FILE* oom = std::fopen("/proc/self/oom_score_adj", "w")) {
    std::fputs("1000", oom);
    std::fclose(oom);
  }
  executorch::runtime::runtime_init();
  executorch::runtime::register_pal(executorch::runtime::PalImpl::create(&emit, __FILE__));
  try {
    return run(args);
  } catch (const etserve::BridgeError& e) {
    std::fprintf(stderr, "refused: %s\n", e.what());
    return kRefused;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "refused: %s\n", e.what());
    return kRefused;
  }
}
