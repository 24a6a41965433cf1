package io.etserve.inference;

import io.etserve.runtime.MethodSignature;
import io.etserve.runtime.Program;
import java.util.List;

/**
 * One model version whose program loaded: its signature under the protocol's names, its
 * instances, and its per-request limit.
 */
public final class LoadedModel implements AutoCloseable {

    private final String name;
    private final String version;
    private final Program program;
    private final MethodSignature signature;
    private final List<TensorMetadata> inputs;
    private final List<TensorMetadata> outputs;
    private final InstancePool instances;
    private final long maxElementsPerTensor;
    private final DynamicBatcher batcher;

    public LoadedModel(String name, String version, Program program, MethodSignature signature,
            List<TensorMetadata> inputs, List<TensorMetadata> outputs, InstancePool instances,
            long maxElementsPerTensor) {
        this(name, version, program, signature, inputs, outputs, instances, maxElementsPerTensor, null);
    }

    /** @param batcher joins this model's requests into batches, or null when it runs each alone */
    public LoadedModel(String name, String version, Program program, MethodSignature signature,
            List<TensorMetadata> inputs, List<TensorMetadata> outputs, InstancePool instances,
            long maxElementsPerTensor, DynamicBatcher batcher) {
        this.name = name;
        this.version = version;
        this.program = program;
        this.signature = signature;
        this.inputs = List.copyOf(inputs);
        this.outputs = List.copyOf(outputs);
        this.instances = instances;
        this.maxElementsPerTensor = maxElementsPerTensor;
        this.batcher = batcher;
    }

    public String name() {
        return name;
    }

    public String version() {
        return version;
    }

    public MethodSignature signature() {
        return signature;
    }

    public List<TensorMetadata> inputs() {
        return inputs;
    }

    public List<TensorMetadata> outputs() {
        return outputs;
    }

    /** Null while the model is unavailable on this node (no instances were created). */
    public InstancePool instances() {
        return instances;
    }

    public long maxElementsPerTensor() {
        return maxElementsPerTensor;
    }

    /** The model's batcher, when its config.yml asks for dynamic batching. */
    public java.util.Optional<DynamicBatcher> batcher() {
        return java.util.Optional.ofNullable(batcher);
    }

    /** Runs what is queued for a batch, then frees the instances and the program. */
    @Override
    public void close() {
        if (batcher != null) {
            batcher.close();
        }
        if (instances != null) {
            instances.close();
        }
        program.close();
    }
}
