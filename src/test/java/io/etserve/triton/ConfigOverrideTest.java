package io.etserve.triton;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.etserve.inference.DataType;
import io.etserve.inference.TensorMetadata;
import io.etserve.modelconfig.DynamicBatching;
import io.etserve.modelconfig.ModelConfig;
import io.etserve.modelconfig.VersionPolicy;
import io.etserve.modelconfig.Warmup;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** How a load's Triton configuration maps onto config.yml, and what it refuses. */
class ConfigOverrideTest {

    /** config.yml: 2 instances, batching of 16 rows after 1 ms, the newest 2 versions. */
    static final ModelConfig YML = new ModelConfig("forward", List.of("x"), List.of("y"), Optional.of(2),
            Optional.empty(), Optional.empty(), Optional.empty(), Warmup.NONE, Optional.empty(), Optional.empty(),
            Optional.empty(), Map.of("x", List.of(-1L, 16L)),
            Optional.of(new DynamicBatching(16, Duration.ofMillis(1), List.of())), VersionPolicy.latest(2), true);

    static ModelConfig apply(String json) {
        return ConfigOverride.parse("m", json, Set.of()).apply(YML);
    }

    @Test
    void instanceGroupCountAndKindBecomeInstancesAndPlacement() {
        ModelConfig c = apply("{\"max_batch_size\": 8, \"dynamic_batching\": {}, \"instance_group\": [{\"name\": \"m_0\","
                + " \"count\": 3, \"kind\": \"KIND_CPU\"}]}");
        assertThat(c.instances()).contains(3);
        assertThat(c.placement()).contains(ModelConfig.Placement.CPU);
        assertThat(c.devices()).isEmpty();
        // what the document does not speak of stays config.yml's
        assertThat(c.method()).isEqualTo("forward");
        assertThat(c.inputNames()).containsExactly("x");
        assertThat(c.inputDims()).isEqualTo(Map.of("x", List.of(-1L, 16L)));
        assertThat(c.versionPolicy()).isEqualTo(VersionPolicy.latest(2));
    }

    @Test
    void gpusOnANodeThatServesThemPlaceOnThoseDevices() {
        ModelConfig c = ConfigOverride.parse("m", "{\"instance_group\": [{\"count\": 2, \"kind\": \"KIND_GPU\","
                + " \"gpus\": [1, 0, 1]}]}", Set.of(0, 1)).apply(YML);
        assertThat(c.instances()).contains(2);
        assertThat(c.placement()).contains(ModelConfig.Placement.GPU);
        assertThat(c.devices()).contains(List.of(1, 0));
        assertThatThrownBy(() -> ConfigOverride.parse("m", "{\"instance_group\": [{\"gpus\": [3]}]}", Set.of(0, 1)))
                .hasMessageContaining("'instance_group[0].gpus'").hasMessageContaining("device 3");
    }

    @Test
    void aNameQuotedInARefusalHasItsControlAndFormattingCharactersEscaped() {
        // A line break and a right-to-left override: neither may forge a log line or reorder the message.
        assertThatThrownBy(() -> ConfigOverride.parse("m", "{\"platform\": \"x\\nERROR forged\\u202e\"}", Set.of()))
                .hasMessageContaining("'x\\u000AERROR forged\\u202E'").message().doesNotContain("\n", "\u202e");
    }

    @Test
    void aTensorNamedTwiceIsRefused() {
        assertThatThrownBy(() -> ConfigOverride.parse("m", "{\"input\": [{\"name\": \"x\"}, {\"name\": \"x\"}]}",
                Set.of())).hasMessageContaining("'input[1].name'").hasMessageContaining("'x' a second time");
        assertThatThrownBy(() -> ConfigOverride.parse("m", "{\"output\": [{\"name\": \"y\"}, {\"name\": \"y\"}]}",
                Set.of())).hasMessageContaining("'output[1].name'");
    }

    @Test
    void aCountLeftOutIsOneAndAKindLeftOutLetsTheDelegatesDecide() {
        ModelConfig c = apply("{\"instance_group\": [{}]}");
        assertThat(c.instances()).contains(1);
        assertThat(c.placement()).isEmpty();
    }

    @Test
    void noInstanceGroupKeepsConfigYmlsInstances() {
        assertThat(apply("{}").instances()).contains(2);
    }

    @Test
    void dynamicBatchingWithMaxBatchSizeBecomesTheBatcher() {
        ModelConfig c = apply("{\"max_batch_size\": 8, \"dynamic_batching\": {\"max_queue_delay_microseconds\": 250,"
                + " \"preferred_batch_size\": [8, 4]}}");
        assertThat(c.dynamicBatching()).contains(new DynamicBatching(8, Duration.ofNanos(250_000), List.of(4, 8)));
    }

    @Test
    void aDocumentWithoutDynamicBatchingTurnsBatchingOff() {
        assertThat(YML.dynamicBatching()).isPresent();
        assertThat(apply("{\"max_batch_size\": 0}").dynamicBatching()).isEmpty();
    }

    @Test
    void protobufJsonsCamelCaseAndQuoted64BitNumbersAreRead() {
        ModelConfig c = apply("{\"maxBatchSize\": 4, \"dynamicBatching\": {\"maxQueueDelayMicroseconds\": \"100\"},"
                + " \"instanceGroup\": [{\"count\": 2, \"kind\": \"KIND_CPU\"}], \"versionPolicy\": {\"specific\":"
                + " {\"versions\": [\"1\", \"3\"]}}}");
        assertThat(c.dynamicBatching()).contains(new DynamicBatching(4, Duration.ofNanos(100_000), List.of()));
        assertThat(c.instances()).contains(2);
        assertThat(c.versionPolicy()).isEqualTo(VersionPolicy.specific(List.of(1L, 3L)));
    }

    @Test
    void versionPoliciesMapOneToOne() {
        assertThat(apply("{\"version_policy\": {\"all\": {}}}").versionPolicy()).isEqualTo(VersionPolicy.ALL);
        assertThat(apply("{\"version_policy\": {\"latest\": {\"num_versions\": 3}}}").versionPolicy())
                .isEqualTo(VersionPolicy.latest(3));
    }

    @Test
    void theDefaultsTritonWritesForFeaturesEtserveLacksAreAccepted() {
        // What protobuf JSON with every primitive printed looks like for a plain model.
        ModelConfig c = apply("{\"name\": \"m\", \"platform\": \"executorch\", \"backend\": \"\", \"runtime\": \"\","
                + " \"max_batch_size\": 0, \"input\": [{\"name\": \"x\", \"data_type\": \"TYPE_FP32\", \"format\":"
                + " \"FORMAT_NONE\", \"dims\": [1, 16], \"is_shape_tensor\": false, \"allow_ragged_batch\": false,"
                + " \"optional\": false}], \"output\": [{\"name\": \"y\", \"label_filename\": \"\"}],"
                + " \"batch_input\": [], \"batch_output\": [], \"optimization\": {\"priority\": 0},"
                + " \"model_transaction_policy\": {\"decoupled\": false}, \"response_cache\": {\"enable\": false},"
                + " \"parameters\": {}, \"model_warmup\": [], \"default_model_filename\": \"model.pte\"}");
        assertThat(c.dynamicBatching()).isEmpty();
    }

    /** A document and what its refusal must say (the field it names). */
    static final String[][] REFUSED = {
        {"{\"sequence_batching\": {\"max_sequence_idle_microseconds\": 5}}", "'sequence_batching' cannot be honoured"},
        {"{\"ensemble_scheduling\": {\"step\": [{}, {\"model_name\": \"a\"}]}}", "'ensemble_scheduling'"},
        // the scheduling choice is a oneof: an empty message still makes a model stateful or an ensemble
        {"{\"sequence_batching\": {}}", "'sequence_batching' cannot be honoured"},
        {"{\"sequence_batching\": {\"max_sequence_idle_microseconds\": 0}}", "'sequence_batching' cannot be honoured"},
        {"{\"ensemble_scheduling\": {}}", "'ensemble_scheduling' cannot be honoured"},
        {"{\"instance_group\": [{\"kind\": \"KIND_GPU\"}]}", "'instance_group[0].kind' is KIND_GPU"},
        {"{\"instance_group\": [{\"kind\": \"KIND_MODEL\"}]}", "'instance_group[0].kind' is KIND_MODEL"},
        {"{\"instance_group\": [{\"kind\": \"KIND_TPU\"}]}", "'instance_group[0].kind'"},
        {"{\"instance_group\": [{}, {}]}", "'instance_group' has 2 groups"},
        {"{\"instance_group\": [{\"count\": -1}]}", "'instance_group[0].count' must be 0..1024"},
        {"{\"instance_group\": [{\"count\": 1.5}]}", "'instance_group[0].count' must be a whole number"},
        {"{\"instance_group\": [{\"passive\": true}]}", "'instance_group[0].passive'"},
        {"{\"instance_group\": [{\"kind\": \"KIND_CPU\", \"gpus\": [0]}]}", "'instance_group[0].gpus'"},
        {"{\"instance_group\": {\"count\": 1}}", "'instance_group' must be a JSON array"},
        {"{\"max_batch_size\": 4}", "'max_batch_size' is 4 without dynamic_batching"},
        {"{\"dynamic_batching\": {}}", "'dynamic_batching' needs max_batch_size"},
        {"{\"max_batch_size\": 5000, \"dynamic_batching\": {}}", "'max_batch_size' must be 0..4096"},
        {"{\"max_batch_size\": 12345678901234567890, \"dynamic_batching\": {}}",
            "'max_batch_size' must be 0..4096, got a larger number"},
        {"{\"max_batch_size\": \"12345678901234567890123\"}", "'max_batch_size' must be 0..4096, got a larger number"},
        {"{\"max_batch_size\": \"99999999999999999999\"}", "'max_batch_size' must be 0..4096, got a larger number"},
        {"{\"max_batch_size\": 4, \"dynamic_batching\": {\"preferred_batch_size\": [8]}}", "'dynamic_batching' preferred_batch_size"},
        {"{\"max_batch_size\": 4, \"dynamic_batching\": {\"priority_levels\": 2}}", "'dynamic_batching.priority_levels'"},
        {"{\"max_batch_size\": 4, \"dynamic_batching\": {\"preserve_ordering\": true}}", "'dynamic_batching.preserve_ordering'"},
        {"{\"max_batch_size\": 4, \"dynamic_batching\": {\"max_queue_delay_microseconds\": 60000000}}", "'dynamic_batching.max_queue_delay_microseconds'"},
        {"{\"max_batch_size\": 4, \"dynamic_batching\": {\"nope\": 1}}", "'dynamic_batching.nope'"},
        {"{\"version_policy\": {\"latest\": {\"num_versions\": 0}}}", "'version_policy.latest.num_versions'"},
        {"{\"version_policy\": {\"all\": {}, \"latest\": {}}}", "'version_policy' must hold one"},
        {"{\"name\": \"other\"}", "'name' is 'other'"},
        {"{\"platform\": \"tensorrt_plan\"}", "'platform'"},
        {"{\"model_transaction_policy\": {\"decoupled\": true}}", "'model_transaction_policy.decoupled'"},
        {"{\"response_cache\": {\"enable\": true}}", "'response_cache.enable'"},
        {"{\"optimization\": {\"cuda\": {\"graphs\": true}}}", "'optimization' cannot be honoured"},
        {"{\"input\": [{\"name\": \"x\", \"is_shape_tensor\": true}]}", "'input[0].is_shape_tensor'"},
        {"{\"input\": [{\"dims\": [1]}]}", "'input[0].name' is missing"},
        {"{\"output\": [{\"name\": \"y\", \"label_filename\": \"labels.txt\"}]}", "'output[0].label_filename'"},
        {"{\"no_such_field\": 1}", "'no_such_field' is not a field"},
        {"{\"max_batch_size\": 1, \"maxBatchSize\": 2}", "'max_batch_size' is given twice"},
        {"{\"max_batch_size\": 1, \"max_batch_size\": 2}", "'config' is not valid JSON"},
        {"{\"max_batch_size\":", "'config' is not valid JSON"},
        {"[1]", "'config' must be a JSON object"},
        {"", "'config' is empty"},
    };
    @Test
    void whatCannotBeHonouredIsRefusedNamingTheField() {
        for (String[] c : REFUSED) {
            assertThatThrownBy(() -> apply(c[0])).as(c[0]).isInstanceOf(ConfigOverride.InvalidOverrideException.class)
                    .hasMessageContaining(c[1]);
        }
    }

    @Test
    void tensorsMustBeTheModelsWithItsTypeAndDims() {
        var reported = TritonModelConfig.build("m",
                List.of(new TensorMetadata("x", DataType.FP32, new long[] {-1, 16})),
                List.of(new TensorMetadata("y", DataType.FP32, new long[] {-1, 4})),
                Optional.of(new DynamicBatching(8, Duration.ZERO, List.of())), VersionPolicy.ALL, "cpu", 1);
        ConfigOverride ok = ConfigOverride.parse("m", "{\"max_batch_size\": 8, \"dynamic_batching\": {}, \"input\":"
                + " [{\"name\": \"x\", \"data_type\": \"TYPE_FP32\", \"dims\": [16]}], \"output\": [{\"name\": \"y\"}]}",
                Set.of());
        ok.checkTensors(reported);
        for (String[] bad : new String[][] {
            {"{\"input\": [{\"name\": \"z\"}]}", "'input.name' is 'z'"},
            {"{\"input\": [{\"name\": \"x\", \"data_type\": \"TYPE_INT64\"}]}", "'input.data_type'"},
            {"{\"input\": [{\"name\": \"x\", \"dims\": [-1, 16]}]}", "'input.dims'"},
            {"{\"output\": [{\"name\": \"y\", \"dims\": [5]}]}", "'output.dims'"}}) {
            assertThatThrownBy(() -> ConfigOverride.parse("m", bad[0], Set.of()).checkTensors(reported))
                    .hasMessageContaining(bad[1]);
        }
    }
}
