// What is loaded in the process, as the bridge reports it to Java: the objects that define the
// caller-stream selection (exactly one is the invariant the health indicator checks), the
// calling thread's selection, and the delegates registered with ExecuTorch. Kept apart from
// programs and instances (bridge_core.cpp): this walks the dynamic loader, not a Module.
#include <dlfcn.h>
#include <elf.h>
#include <link.h>

#include <string>
#include <utility>
#include <vector>

#include <executorch/runtime/backend/interface.h>

#include "bridge_core.h"
#include "etserve/caller_stream_api.h"

namespace etserve {
namespace {

constexpr const char* kGetCallerStreamSymbol = "_ZN10executorch9extension4cuda15getCallerStreamEv";

struct LoadedObject {
  std::string path;
  ElfW(Addr) base;
  std::vector<std::pair<uintptr_t, uintptr_t>> segments;
  std::string soname;
};

std::string read_soname(const dl_phdr_info* info) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const auto& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_DYNAMIC) continue;
    const auto* dyn = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + ph.p_vaddr);
    ElfW(Addr) strtab = 0;
    ElfW(Xword) soname_offset = 0;
    bool has_soname = false;
    for (; dyn->d_tag != DT_NULL; ++dyn) {
      if (dyn->d_tag == DT_STRTAB) strtab = dyn->d_un.d_ptr;
      if (dyn->d_tag == DT_SONAME) {
        soname_offset = dyn->d_un.d_val;
        has_soname = true;
      }
    }
    if (!has_soname || strtab == 0) return {};
    // glibc relocates DT_STRTAB in place on most targets; add the bias where it did not.
    if (strtab < info->dlpi_addr) strtab += info->dlpi_addr;
    return reinterpret_cast<const char*>(strtab + soname_offset);
  }
  return {};
}

int collect(dl_phdr_info* info, size_t, void* data) noexcept {
  // Runs under the loader's lock: never let an exception unwind through glibc.
  try {
  auto* objects = static_cast<std::vector<LoadedObject>*>(data);
  LoadedObject obj;
  obj.path = info->dlpi_name ? info->dlpi_name : "";
  obj.base = info->dlpi_addr;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const auto& ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_LOAD) {
      obj.segments.emplace_back(info->dlpi_addr + ph.p_vaddr,
                                info->dlpi_addr + ph.p_vaddr + ph.p_memsz);
    }
  }
  obj.soname = read_soname(info);
  objects->push_back(std::move(obj));
  return 0;
  } catch (...) {
    return 1;  // stop the walk; the caller sees a partial list
  }
}

}  // namespace

std::vector<CallerStreamDefiner> caller_stream_definers() {
  std::vector<LoadedObject> objects;
  if (dl_iterate_phdr(&collect, &objects) != 0) {
    throw BridgeError("Internal", 0x01, "could not walk the loaded objects (out of memory)");
  }
  std::vector<CallerStreamDefiner> definers;
  for (const auto& obj : objects) {
    // The main program has an empty name; the vDSO cannot be opened and defines nothing.
    void* handle = dlopen(obj.path.empty() ? nullptr : obj.path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
    if (handle == nullptr) continue;
    // dlsym on a handle searches that object first, then its dependencies: the address is
    // this object's own definition exactly when it falls inside one of its segments.
    void* sym = dlsym(handle, kGetCallerStreamSymbol);
    dlclose(handle);
    if (sym == nullptr) continue;
    const auto addr = reinterpret_cast<uintptr_t>(sym);
    for (const auto& [lo, hi] : obj.segments) {
      if (addr >= lo && addr < hi) {
        definers.push_back({obj.path.empty() ? "(main program)" : obj.path, obj.soname});
        break;
      }
    }
  }
  return definers;
}

ObservedSelection observe_caller_stream() {
  const auto selection = executorch::extension::cuda::getCallerStream();
  return {selection.has_value(),
          selection.has_value() ? reinterpret_cast<uintptr_t>(*selection) : 0};
}

std::vector<std::string> registered_backends() {
  std::vector<std::string> names;
  const size_t n = executorch::runtime::get_num_registered_backends();
  for (size_t i = 0; i < n; ++i) {
    auto name = executorch::runtime::get_backend_name(i);
    if (name.ok()) names.emplace_back(*name);
  }
  return names;
}

}  // namespace etserve
