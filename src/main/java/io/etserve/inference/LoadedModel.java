package io.etserve.inference;

import io.etserve.runtime.MethodSignature;
import io.etserve.runtime.Program;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * One model version that serves: its program, its description, its instances (always some),
 * its per-request limit and, when its config.yml asks for it, its batcher. Closing it runs what
 * is queued for a batch, then frees the instances and the program.
 */
public final class LoadedModel implements AutoCloseable {

    private final ModelDescription description;
    private final Program program;
    private final InstancePool instances;
    private final long maxElementsPerTensor;
    private final DynamicBatcher batcher;

    /** @param batcher joins this model's requests into batches, or null when it runs each alone */
    public LoadedModel(ModelDescription description, Program program, InstancePool instances,
            long maxElementsPerTensor, DynamicBatcher batcher) {
        this.description = Objects.requireNonNull(description, "description");
        this.program = Objects.requireNonNull(program, "program");
        this.instances = Objects.requireNonNull(instances, "instances");
        this.maxElementsPerTensor = maxElementsPerTensor;
        this.batcher = batcher;
    }

    public ModelDescription description() {
        return description;
    }

    public String name() {
        return description.name();
    }

    public String version() {
        return description.version();
    }

    public MethodSignature signature() {
        return description.signature();
    }

    public List<TensorMetadata> inputs() {
        return description.inputs();
    }

    public List<TensorMetadata> outputs() {
        return description.outputs();
    }

    public InstancePool instances() {
        return instances;
    }

    public long maxElementsPerTensor() {
        return maxElementsPerTensor;
    }

    /** The model's batcher, when its config.yml asks for dynamic batching. */
    public Optional<DynamicBatcher> batcher() {
        return Optional.ofNullable(batcher);
    }

    @Override
    public void close() {
        if (batcher != null) {
            batcher.close();
        }
        instances.close();
        program.close();
    }
}
