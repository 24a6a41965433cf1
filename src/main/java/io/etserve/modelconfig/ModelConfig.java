package io.etserve.modelconfig;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * A model's optional {@code config.yml}, beside its version directories:
 *
 * <pre>
 * method: forward            # the method to serve
 * inputs: [ { name: x } ]    # tensor names, in the method's input order; a dynamic input may
 *                            # say which dimensions vary: { name: x, dims: [-1, 16] }
 * outputs: [ { name: y } ]
 * instances: 2               # Modules per device it is placed on (or on the CPU)
 * max-elements-per-tensor: 1048576
 * devices: [0]               # GPU placement: a list, or "all" (default: etserve.cuda.placement)
 * placement: gpu             # cpu | gpu; default: gpu only when a method uses a GPU delegate
 * data-files: [weights.ptd]  # named-data files in the version directory (default: every *.ptd there)
 * warmup: 2                  # calls per instance before ready: a count (zeros), or
 *                            # { samples: 2, data: random }, or { samples: 2, file: warmup.json }
 *                            # (a protocol JSON request in the version directory)
 * sha256: 9f86d08...         # model.pte's digest, checked at load (or a model.pte.sha256 file)
 * max-planned-memory: 2GB    # planned working memory per instance (default etserve.inference.max-planned-memory)
 * version-policy: all        # which version directories load: all, {latest: N}, {specific: [1, 3]}
 * dynamic-batching:          # join requests along dimension 0 (every input's first dimension dynamic)
 *   max-batch-size: 32       # rows per forward call
 *   max-queue-delay: 500us   # how long the first queued request waits for company
 *   preferred-batch-sizes: [8, 16, 32]   # optional
 * cpu-threadpool: false      # CPU operators on the calling thread only (default true: ExecuTorch's pool)
 * </pre>
 *
 * @param cpuThreadpool whether the method's CPU operators split their work over ExecuTorch's CPU
 *     threadpool ({@code etserve.native.cpu-threads}) or run on the thread that runs the call
 */
public record ModelConfig(String method, List<String> inputNames, List<String> outputNames,
        Optional<Integer> instances, Optional<Long> maxElementsPerTensor, Optional<List<Integer>> devices,
        Optional<Placement> placement, Warmup warmup, Optional<List<String>> dataFiles, Optional<String> sha256,
        Optional<Long> maxPlannedMemory, Map<String, List<Long>> inputDims, Optional<DynamicBatching> dynamicBatching,
        VersionPolicy versionPolicy, boolean cpuThreadpool) {

    /** Where a model runs when its config.yml says so; otherwise its delegates decide. */
    public enum Placement {
        /** CPU instances, no stream, no guard: refused for programs that need a GPU delegate. */
        CPU,
        /** Leased stream + caller-stream guard on every call, wherever the node has CUDA devices. */
        GPU
    }

    public ModelConfig(String method, List<String> inputNames, List<String> outputNames, Optional<Integer> instances,
            Optional<Long> maxElementsPerTensor, Optional<List<Integer>> devices) {
        this(method, inputNames, outputNames, instances, maxElementsPerTensor, devices, Optional.empty(), Warmup.NONE,
                Optional.empty(), Optional.empty(), Optional.empty(), Map.of(), Optional.empty(), VersionPolicy.ALL, true);
    }

    public static final String FILE_NAME = "config.yml";
    /** {@code devices: all}. */
    public static final List<Integer> ALL_DEVICES = List.of(-1);

    public ModelConfig {
        inputNames = List.copyOf(inputNames);
        outputNames = List.copyOf(outputNames);
        inputDims = Map.copyOf(inputDims);
    }

    public static ModelConfig defaults() {
        return new ModelConfig("forward", List.of(), List.of(), Optional.empty(), Optional.empty(), Optional.empty());
    }

    /** Reads {@code dir/config.yml} ({@link ModelConfigFile}), or the defaults when there is none. */
    public static ModelConfig read(Path modelDir) throws InvalidModelConfigException {
        return ModelConfigFile.read(modelDir);
    }

    /** The config file is malformed: the model fails to load with this message. */
    public static class InvalidModelConfigException extends RuntimeException {
        public InvalidModelConfigException(String message) {
            super(message);
        }
    }
}
