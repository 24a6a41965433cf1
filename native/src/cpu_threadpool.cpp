// ExecuTorch's one CPU threadpool: the threads XNNPACK and the optimized kernels split an
// operator's work over. ExecuTorch sizes it to every logical CPU of the host (cpuinfo), which
// ignores the process's CPU affinity and a container's CPU limit; the service sizes it itself.
#include <cstddef>
#include <cstdint>
#include <string>

#include "bridge_core.h"

// The wheel ships libexecutorch_threadpool.so but not its header: the two members used here,
// declared as that library defines them (non-virtual, called through the pool it returns).
namespace executorch::extension::threadpool {
class ThreadPool {
 public:
  size_t get_thread_count() const;
  bool _unsafe_reset_threadpool(uint32_t new_thread_count);
};
ThreadPool* get_threadpool();
}  // namespace executorch::extension::threadpool

namespace etserve {

int cpu_threadpool_size(int requested) {
  auto* pool = executorch::extension::threadpool::get_threadpool();
  if (pool == nullptr) {
    throw BridgeError("Internal", 0x01, "ExecuTorch's CPU threadpool could not be made (cpuinfo failed)");
  }
  const size_t before = pool->get_thread_count();
  if (requested > 0 && static_cast<size_t>(requested) != before) {
    // Safe only before a program loads: XNNPACK keeps the pool's handle in each runtime it builds.
    pool->_unsafe_reset_threadpool(static_cast<uint32_t>(requested));
    if (pool->get_thread_count() == 0) {
      // pthreadpool could not start them and left no pool, on which the optimized kernels'
      // parallel work would abort the process: back to the pool there was, and say so.
      pool->_unsafe_reset_threadpool(static_cast<uint32_t>(before));
      throw BridgeError("Internal", 0x01,
                        "ExecuTorch's CPU threadpool could not start " + std::to_string(requested) +
                            " threads (etserve.native.cpu-threads); it keeps " + std::to_string(before));
    }
  }
  return static_cast<int>(pool->get_thread_count());
}

}  // namespace etserve
