package io.etserve.repository;

import io.etserve.cuda.CudaRuntime;
import io.etserve.cuda.TensorRtProbe;
import io.etserve.runtime.MethodSignature;
import java.util.List;
import java.util.Optional;
import java.util.Set;

/**
 * What this node can run: the delegates registered in ExecuTorch, CUDA, TensorRT. Decides,
 * before any traffic, whether a model's method can work here.
 */
public record NodeCapabilities(Set<String> registeredBackends, CudaRuntime cuda, TensorRtProbe tensorRt) {

    public static final String TENSORRT_BACKEND = "TensorRTBackend";
    public static final String CUDA_BACKEND = "CudaBackend";

    public NodeCapabilities {
        registeredBackends = Set.copyOf(registeredBackends);
    }

    /** Why {@code signature} cannot run on this node, or empty when it can. */
    public Optional<String> whyNotRunnable(MethodSignature signature) {
        List<String> backends = signature.backends();
        for (String backend : backends) {
            boolean gpuDelegate = backend.equals(TENSORRT_BACKEND) || backend.equals(CUDA_BACKEND);
            if (gpuDelegate && !cuda.available()) {
                return Optional.of("method '" + signature.method() + "' uses " + backend
                        + ", which needs a CUDA device; this node has none ("
                        + cuda.unavailableReason().orElse("unknown") + ")");
            }
            if (backend.equals(TENSORRT_BACKEND) && !tensorRt.available()) {
                return Optional.of("method '" + signature.method() + "' uses " + backend + " but " + tensorRt.reason());
            }
            if (!registeredBackends.contains(backend)) {
                return Optional.of("method '" + signature.method() + "' uses delegate " + backend
                        + ", which is not registered in this runtime (registered: " + registeredBackends + ")");
            }
        }
        return Optional.empty();
    }
}
