package io.etserve.cuda;

import java.util.Optional;
import org.bytedeco.javacpp.Loader;

/**
 * Whether TensorRT's runtime loads on this node (JavaCPP's {@code org.bytedeco:tensorrt}, which
 * links libnvinfer), and its version. A load failure means "no TensorRT", never a crash. Where
 * {@code libnvinfer} is nowhere to be found the bindings are not loaded at all
 * ({@link LibrarySearch}: they would load the CUDA libraries they depend on first, only to fail).
 */
public record TensorRtProbe(boolean available, String version, String reason) {

    /** The library JavaCPP's TensorRT bindings link (their JNI library's {@code NEEDED} entry). */
    static final String LIBRARY = "libnvinfer.so.10";
    /** The bindings' JavaCPP preset, whose link paths JavaCPP searches too. */
    static final String PRESET = "org.bytedeco.tensorrt.presets.nvinfer";

    /** The probe {@link CudaEarlyStart} made beside CUDA's start, or, where none did, a probe now. */
    public static TensorRtProbe started() {
        return CudaEarlyStart.takeTensorRtOrProbe();
    }

    public static TensorRtProbe probe() {
        return probe(LibrarySearch.ofThisProcess(PRESET));
    }

    static TensorRtProbe probe(LibrarySearch search) {
        try {
            if (!search.finds(LIBRARY, "org/bytedeco/tensorrt/" + Loader.getPlatform() + "/" + LIBRARY)) {
                return new TensorRtProbe(false, null, "TensorRT not loadable: " + LIBRARY + " not found ("
                        + search.where() + ")");
            }
            Class<?> nvinfer = Class.forName("org.bytedeco.tensorrt.global.nvinfer");
            Loader.load(nvinfer);
            Object v = nvinfer.getMethod("getInferLibVersion").invoke(null);
            int n = ((Number) v).intValue();
            // NV_TENSORRT_VERSION encoding: major * 10000 + minor * 100 + patch (TensorRT 10+).
            return new TensorRtProbe(true, (n / 10000) + "." + (n / 100) % 100 + "." + n % 100, null);
        } catch (Throwable e) {
            Throwable root = e;
            while (root.getCause() != null) {
                root = root.getCause();
            }
            return new TensorRtProbe(false, null, "TensorRT not loadable: "
                    + Optional.ofNullable(root.getMessage()).orElse(root.getClass().getSimpleName()));
        }
    }
}
