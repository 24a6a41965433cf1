package io.etserve.triton;

import io.etserve.execution.LoadedModel;
import io.etserve.grpc.protocol.DataType;
import io.etserve.grpc.protocol.ModelConfig;
import io.etserve.grpc.protocol.ModelDynamicBatching;
import io.etserve.grpc.protocol.ModelInput;
import io.etserve.grpc.protocol.ModelInstanceGroup;
import io.etserve.grpc.protocol.ModelOutput;
import io.etserve.grpc.protocol.ModelResponseCache;
import io.etserve.grpc.protocol.ModelTransactionPolicy;
import io.etserve.grpc.protocol.ModelVersionPolicy;
import io.etserve.inference.TensorMetadata;
import io.etserve.modelconfig.DynamicBatching;
import io.etserve.modelconfig.VersionPolicy;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;

/**
 * A served model version's configuration in Triton's shape (its {@code model_config.proto}), for
 * the model configuration extension: what runs, not what config.yml asked for (a load's override
 * included). {@code max_batch_size} is the dynamic batcher's bound, 0 when the model does not
 * batch; with a bound the batch dimension (dimension 0 of every tensor) is left out of {@code dims},
 * as Triton's clients expect (perf_analyzer skips the first metadata dimension then).
 */
public final class TritonModelConfig {

    public static final String PLATFORM = "executorch";

    private TritonModelConfig() {}

    /** What one model version looks like to Triton's tools. */
    public static ModelConfig of(LoadedModel model) {
        return build(model.name(), model.inputs(), model.outputs(), model.batcher().map(b -> b.policy()),
                model.config().versionPolicy(), model.instances().placement(), model.instances().capacity());
    }

    /**
     * @param placement "cpu" or the devices, "cuda:0,cuda:1" (as {@code InstancePool.placement()})
     * @param capacity instances in all
     */
    public static ModelConfig build(String name, List<TensorMetadata> inputs, List<TensorMetadata> outputs,
            Optional<DynamicBatching> batching, VersionPolicy policy, String placement, int capacity) {
        int maxBatchSize = batching.map(DynamicBatching::maxBatchSize).orElse(0);
        ModelConfig.Builder b = ModelConfig.newBuilder().setName(name).setPlatform(PLATFORM).setBackend(PLATFORM)
                .setVersionPolicy(policy(policy)).setMaxBatchSize(maxBatchSize).setDefaultModelFilename("model.pte")
                .setModelTransactionPolicy(ModelTransactionPolicy.newBuilder().setDecoupled(false))
                .setResponseCache(ModelResponseCache.newBuilder().setEnable(false));
        for (TensorMetadata t : inputs) {
            b.addInput(ModelInput.newBuilder().setName(t.name()).setDataType(dataType(t.dataType()))
                    .addAllDims(dims(t, maxBatchSize)));
        }
        for (TensorMetadata t : outputs) {
            b.addOutput(ModelOutput.newBuilder().setName(t.name()).setDataType(dataType(t.dataType()))
                    .addAllDims(dims(t, maxBatchSize)));
        }
        b.addInstanceGroup(instanceGroup(name, placement, capacity));
        batching.ifPresent(d -> b.setDynamicBatching(ModelDynamicBatching.newBuilder()
                .addAllPreferredBatchSize(d.preferredBatchSizes())
                .setMaxQueueDelayMicroseconds(d.maxQueueDelay().toNanos() / 1000)));
        return b.build();
    }

    /** Triton's {@code TYPE_*} for a protocol datatype (BYTES is Triton's TYPE_STRING). */
    static DataType dataType(io.etserve.inference.DataType t) {
        return t == io.etserve.inference.DataType.BYTES ? DataType.TYPE_STRING : DataType.valueOf("TYPE_" + t.name());
    }

    private static List<Long> dims(TensorMetadata t, int maxBatchSize) {
        long[] shape = t.shape();
        long[] dims = maxBatchSize > 0 && shape.length > 0 ? Arrays.copyOfRange(shape, 1, shape.length) : shape;
        return Arrays.stream(dims).boxed().toList();
    }

    private static ModelVersionPolicy policy(VersionPolicy p) {
        ModelVersionPolicy.Builder b = ModelVersionPolicy.newBuilder();
        switch (p.kind()) {
            case ALL -> b.setAll(ModelVersionPolicy.All.getDefaultInstance());
            case LATEST -> b.setLatest(ModelVersionPolicy.Latest.newBuilder().setNumVersions(p.latest()));
            case SPECIFIC -> b.setSpecific(ModelVersionPolicy.Specific.newBuilder().addAllVersions(p.specific()));
        }
        return b.build();
    }

    /** One group: {@code count} per GPU listed (Triton's meaning of count with gpus), or in all on the CPU. */
    private static ModelInstanceGroup instanceGroup(String name, String placement, int capacity) {
        ModelInstanceGroup.Builder g = ModelInstanceGroup.newBuilder().setName(name);
        List<Integer> gpus = new ArrayList<>();
        for (String p : placement.split(",")) {
            if (p.startsWith("cuda:")) {
                gpus.add(Integer.parseInt(p.substring("cuda:".length())));
            }
        }
        if (gpus.isEmpty()) {
            return g.setKind(ModelInstanceGroup.Kind.KIND_CPU).setCount(capacity).build();
        }
        return g.setKind(ModelInstanceGroup.Kind.KIND_GPU).setCount(capacity / gpus.size()).addAllGpus(gpus).build();
    }
}
