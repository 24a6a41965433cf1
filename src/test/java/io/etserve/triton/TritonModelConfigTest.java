package io.etserve.triton;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.grpc.protocol.ModelConfig;
import io.etserve.grpc.protocol.ModelInstanceGroup;
import io.etserve.grpc.protocol.ModelStatistics;
import io.etserve.inference.DataType;
import io.etserve.inference.TensorMetadata;
import io.etserve.metrics.VersionStatistics;
import io.etserve.modelconfig.DynamicBatching;
import io.etserve.modelconfig.VersionPolicy;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/** The configuration and statistics documents: Triton's fields, and how REST writes them. */
class TritonModelConfigTest {

    static final JsonMapper JSON = JsonMapper.builder().build();
    static final List<TensorMetadata> IN = List.of(new TensorMetadata("x", DataType.FP32, new long[] {-1, 3, 224}),
            new TensorMetadata("mask", DataType.BOOL, new long[] {-1}));
    static final List<TensorMetadata> OUT = List.of(new TensorMetadata("y", DataType.BF16, new long[] {-1, 1000}));

    @Test
    void aBatchedModelLeavesTheBatchDimensionOutAndReportsItsBatcher() {
        ModelConfig c = TritonModelConfig.build("m", IN, OUT,
                Optional.of(new DynamicBatching(32, Duration.ofNanos(1_500_000), List.of(8, 32))), VersionPolicy.latest(2),
                "cpu", 4);
        assertThat(c.getMaxBatchSize()).isEqualTo(32);
        assertThat(c.getInput(0).getDimsList()).containsExactly(3L, 224L);
        assertThat(c.getInput(1).getDimsList()).isEmpty();
        assertThat(c.getOutput(0).getDimsList()).containsExactly(1000L);
        assertThat(c.getDynamicBatching().getMaxQueueDelayMicroseconds()).isEqualTo(1500);
        assertThat(c.getDynamicBatching().getPreferredBatchSizeList()).containsExactly(8, 32);
        assertThat(c.getVersionPolicy().getLatest().getNumVersions()).isEqualTo(2);
        assertThat(c.getInstanceGroup(0).getKind()).isEqualTo(ModelInstanceGroup.Kind.KIND_CPU);
        assertThat(c.getInstanceGroup(0).getCount()).isEqualTo(4);
    }

    @Test
    void aModelThatDoesNotBatchKeepsEveryDimension() {
        ModelConfig c = TritonModelConfig.build("m", IN, OUT, Optional.empty(), VersionPolicy.ALL, "cpu", 1);
        assertThat(c.getMaxBatchSize()).isZero();
        assertThat(c.getInput(0).getDimsList()).containsExactly(-1L, 3L, 224L);
        assertThat(c.hasDynamicBatching()).isFalse();
        assertThat(c.getVersionPolicy().hasAll()).isTrue();
    }

    @Test
    void gpuInstancesAreCountedPerDeviceAsTritonCountsThem() {
        ModelConfig c = TritonModelConfig.build("m", IN, OUT, Optional.empty(),
                VersionPolicy.specific(List.of(1L, 3L)), "cuda:0,cuda:2", 6);
        ModelInstanceGroup g = c.getInstanceGroup(0);
        assertThat(g.getKind()).isEqualTo(ModelInstanceGroup.Kind.KIND_GPU);
        assertThat(g.getCount()).isEqualTo(3);
        assertThat(g.getGpusList()).containsExactly(0, 2);
        assertThat(c.getVersionPolicy().getSpecific().getVersionsList()).containsExactly(1L, 3L);
    }

    @Test
    void everyProtocolDatatypeHasItsTritonType() {
        assertThat(TritonModelConfig.dataType(DataType.BYTES).name()).isEqualTo("TYPE_STRING");
        assertThat(TritonModelConfig.dataType(DataType.BF16).name()).isEqualTo("TYPE_BF16");
        for (DataType t : DataType.values()) {
            if (t != DataType.BYTES) {
                assertThat(TritonModelConfig.dataType(t).name()).isEqualTo("TYPE_" + t.protocolName());
            }
        }
    }

    @Test
    void restWritesEveryScalarEnumsByNameNumbersAsNumbersAndOnlyTheSchedulerThatIsSet() {
        JsonNode doc = JSON.readTree(TritonJson.write(TritonModelConfig.build("m", IN, OUT, Optional.empty(),
                VersionPolicy.ALL, "cpu", 2)));
        assertThat(doc.has("dynamic_batching")).isFalse();
        assertThat(doc.has("sequence_batching")).isFalse();
        assertThat(doc.path("max_batch_size").isIntegralNumber()).isTrue();
        JsonNode x = doc.path("input").get(0);
        assertThat(x.path("data_type").asString()).isEqualTo("TYPE_FP32");
        assertThat(x.path("format").asString()).isEqualTo("FORMAT_NONE");
        assertThat(x.path("dims").get(0).isIntegralNumber()).isTrue();
        assertThat(x.path("dims").get(0).asLong()).isEqualTo(-1);
        assertThat(x.path("is_shape_tensor").isBoolean()).isTrue();
        assertThat(x.path("optional").isBoolean()).isTrue();
        assertThat(doc.path("model_transaction_policy").path("decoupled").isBoolean()).isTrue();
        assertThat(doc.path("response_cache").path("enable").isBoolean()).isTrue();
        assertThat(doc.path("version_policy").path("all").isObject()).isTrue();
        assertThat(doc.path("instance_group").get(0).path("kind").asString()).isEqualTo("KIND_CPU");
        assertThat(doc.path("instance_group").get(0).path("gpus").isArray()).isTrue();
    }

    @Test
    void statisticsAreWrittenWithUnsigned64BitNumbers() {
        VersionStatistics.Duration d = new VersionStatistics.Duration(3, -1L);  // 2^64 - 1 as unsigned
        ModelStatistics s = TritonStatistics.of(new VersionStatistics("m", "7", 1_700_000_000_000L, 12, 4, d, d, d, d,
                d, d, List.of(new VersionStatistics.Batch(4, d, d, d))));
        JsonNode doc = JSON.readTree(TritonJson.write(s));
        assertThat(doc.path("version").asString()).isEqualTo("7");
        assertThat(doc.path("last_inference").asLong()).isEqualTo(1_700_000_000_000L);
        assertThat(doc.path("inference_stats").path("queue").path("ns").bigIntegerValue().toString())
                .isEqualTo("18446744073709551615");
        assertThat(doc.path("inference_stats").path("cache_hit").path("count").asLong(-1)).isZero();
        assertThat(doc.path("batch_stats").get(0).path("batch_size").asLong()).isEqualTo(4);
        assertThat(doc.path("batch_stats").get(0).path("compute_infer").path("count").asLong()).isEqualTo(3);
    }
}
