package io.etserve.repository;

import io.etserve.cuda.CudaRuntime;
import io.etserve.cuda.StreamPools;
import io.etserve.cuda.TensorRtProbe;
import io.etserve.protocol.DecodeLimits;
import io.etserve.protocol.InferRequestDecoder;
import io.etserve.runtime.NativeRuntime;
import io.etserve.runtime.Program;
import java.util.Set;

/** The real ModelLoader as a CPU-only node configures it, for tests of the inference layer. */
public final class CpuModelLoaders {

    private CpuModelLoaders() {}

    public static ModelLoader create() {
        return create(StreamPools.none("CPU test"), DevicePlacement.Policy.SPREAD);
    }

    /** As {@link #create()}, on a node serving {@code pools} (models run on the CPU all the same). */
    public static ModelLoader create(StreamPools pools, DevicePlacement.Policy placement) {
        return new ModelLoader(Program.Verification.INTERNAL_CONSISTENCY, pools,
                new NodeCapabilities(registeredBackends(), CudaRuntime.unavailable("CPU test"),
                        new TensorRtProbe(false, null, "CPU test")),
                new ModelLoader.Instances(1, 1), Set.of("TensorRTBackend", "CudaBackend"), 1 << 24,
                placement, new ModelLoader.PlannedMemoryLimits(1L << 31, 1L << 33),
                body -> new InferRequestDecoder().decode(body, null, new DecodeLimits(1 << 24, 64)));
    }

    /** The delegates the native runtime really registered (XNNPACK on every build). */
    private static Set<String> registeredBackends() {
        NativeRuntime.ensureLoaded();
        return Set.copyOf(NativeRuntime.info().registeredBackends());
    }
}
