package io.etserve.modelconfig;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** config.yml as users write it: what it says, its defaults, and clear refusals. */
class ModelConfigTest {

    @TempDir
    Path dir;

    ModelConfig read(String yaml) throws Exception {
        Files.writeString(dir.resolve(ModelConfig.FILE_NAME), yaml);
        return ModelConfig.read(dir);
    }

    @Test
    void noFileMeansTheDefaults() {
        ModelConfig c = ModelConfig.read(dir);
        assertThat(c.method()).isEqualTo("forward");
        assertThat(c.inputNames()).isEmpty();
        assertThat(c.instances()).isEmpty();
        assertThat(c.placement()).isEmpty();
        assertThat(c.sha256()).isEmpty();
    }

    @Test
    void readsWhatAUserWrites() throws Exception {
        ModelConfig c = read("""
                method: forward
                inputs: [ { name: image, dims: [-1, 3, 224, 224] } ]
                outputs: [ { name: logits } ]
                instances: 3
                devices: [0, 1]
                placement: gpu
                data-files: [ weights.ptd ]
                max-planned-memory: 512MB
                sha256: %s
                """.formatted("ab".repeat(32)));
        assertThat(c.inputNames()).containsExactly("image");
        assertThat(c.outputNames()).containsExactly("logits");
        assertThat(c.inputDims().get("image")).containsExactly(-1L, 3L, 224L, 224L);
        assertThat(c.instances()).contains(3);
        assertThat(c.devices()).contains(List.of(0, 1));
        assertThat(c.placement()).contains(ModelConfig.Placement.GPU);
        assertThat(c.dataFiles()).contains(List.of("weights.ptd"));
        assertThat(c.maxPlannedMemory()).contains(512L * 1024 * 1024);
        assertThat(c.sha256()).contains("ab".repeat(32));
    }

    @Test
    void theCpuThreadpoolIsUsedUnlessTheFileSaysOtherwise() throws Exception {
        assertThat(ModelConfig.defaults().cpuThreadpool()).isTrue();
        assertThat(read("instances: 1\n").cpuThreadpool()).isTrue();
        assertThat(read("cpu-threadpool: false\n").cpuThreadpool()).isFalse();
        assertThat(read("cpu-threadpool: true\n").cpuThreadpool()).isTrue();
        assertThatThrownBy(() -> read("cpu-threadpool: 4\n")).isInstanceOf(ModelConfig.InvalidModelConfigException.class)
                .hasMessageContaining("'cpu-threadpool' must be true or false, got '4'");
        assertThatThrownBy(() -> read("cpu-threadpool: [false]\n")).isInstanceOf(ModelConfig.InvalidModelConfigException.class);
    }

    @Test
    void dynamicBatchingTakesDurationsWithUnitsAndSortsPreferredSizes() throws Exception {
        DynamicBatching b = read("""
                dynamic-batching:
                  max-batch-size: 32
                  max-queue-delay: 500us
                  preferred-batch-sizes: [16, 8, 32]
                """).dynamicBatching().orElseThrow();
        assertThat(b.maxBatchSize()).isEqualTo(32);
        assertThat(b.maxQueueDelay()).isEqualTo(Duration.ofNanos(500_000));
        assertThat(b.preferredBatchSizes()).containsExactly(8, 16, 32);
        assertThat(read("dynamic-batching: { max-batch-size: 4 }\n").dynamicBatching().orElseThrow().maxQueueDelay())
                .isZero();
        assertThat(read("instances: 1\n").dynamicBatching()).isEmpty();
    }

    @Test
    void anAliasThatContainsItselfIsRefusedNotRecursedInto() {
        // Each would have overflowed the stack walking the document (an Error no load catches).
        for (String bad : new String[] {"method: &a [*a]\n", "inputs: &a [*a]\n",
                "version-policy: &p {latest: *p}\n", "dynamic-batching: &b {max-batch-size: 4, x: [*b]}\n"}) {
            assertThatThrownBy(() -> read(bad)).as(bad).isInstanceOf(ModelConfig.InvalidModelConfigException.class)
                    .hasMessageContaining("nests deeper than 8 levels");
        }
    }

    @Test
    void dynamicBatchingRefusalsSayWhatIsWrong() {
        for (String[] bad : new String[][] {
                {"dynamic-batching: { max-queue-delay: 1ms }", "needs max-batch-size"},
                {"dynamic-batching: { max-batch-size: 0 }", "positive integer"},
                {"dynamic-batching: { max-batch-size: 8, max-queue-delay: 500 }", "with its unit"},
                {"dynamic-batching: { max-batch-size: 8, max-queue-delay: soon }", "with its unit"},
                {"dynamic-batching: { max-batch-size: 8, max-queue-delay: 1m }", "0..10s"},
                {"dynamic-batching: { max-batch-size: 8, preferred-batch-sizes: [16] }", "1..max-batch-size (8)"},
                {"dynamic-batching: { max-batch-size: 8, preferred-batch-sizes: 4 }", "must be a list"},
                {"dynamic-batching: { max-batch-size: 8, timeout: 1s }", "unknown key 'dynamic-batching.timeout'"},
                {"dynamic-batching: { max-batch-size: eight }", "'dynamic-batching.max-batch-size' must be a positive integer, got 'eight'"},
                {"dynamic-batching: true", "must be a mapping"}}) {
            assertThatThrownBy(() -> read(bad[0] + "\n")).as(bad[0])
                    .isInstanceOf(ModelConfig.InvalidModelConfigException.class).hasMessageContaining(bad[1]);
        }
    }

    @Test
    void dynamicBatchingsRulesSpeakTheNamesOfTheDocumentTheyCameFrom() {
        Duration none = Duration.ZERO;
        assertThatThrownBy(() -> DynamicBatching.of(8, none, List.of(16), DynamicBatching.Names.TRITON))
                .hasMessage("'dynamic_batching' preferred_batch_size must lie in 1..max_batch_size (8), got 16");
        assertThatThrownBy(() -> DynamicBatching.of(8, none, List.of(16), DynamicBatching.Names.CONFIG_YML))
                .hasMessage("'dynamic-batching' preferred-batch-sizes must lie in 1..max-batch-size (8), got 16");
        assertThatThrownBy(() -> DynamicBatching.of(null, none, null, DynamicBatching.Names.TRITON))
                .hasMessageStartingWith("'dynamic_batching' needs max_batch_size of at least 1");
        assertThatThrownBy(() -> DynamicBatching.of(4097, none, null, DynamicBatching.Names.CONFIG_YML))
                .hasMessageContaining("max-batch-size must be a positive integer up to 4096, got 4097");
        assertThatThrownBy(() -> DynamicBatching.of(8, Duration.ofSeconds(11), null, DynamicBatching.Names.CONFIG_YML))
                .hasMessageContaining("max-queue-delay must be 0..10s, got 11000ms");
        assertThatThrownBy(() -> DynamicBatching.of(8, none, Arrays.asList(2, null), DynamicBatching.Names.CONFIG_YML))
                .hasMessageContaining("got null");
        // The record's own constructor keeps the same rules.
        assertThatThrownBy(() -> new DynamicBatching(0, none, List.of())).hasMessageContaining("positive integer");
        assertThat(DynamicBatching.of(8, none, List.of(8, 2, 2), DynamicBatching.Names.TRITON))
                .isEqualTo(new DynamicBatching(8, none, List.of(2, 8)));
    }

    @Test
    void refusesWithTheFileAndTheKey() throws Exception {
        assertThatThrownBy(() -> read("instance: 2\n")).isInstanceOf(ModelConfig.InvalidModelConfigException.class)
                .hasMessageContaining("unknown key 'instance'");
        assertThatThrownBy(() -> read("sha256: 1234\n")).hasMessageContaining("64 hex digits");
        assertThatThrownBy(() -> read("instances: 2000000000\n")).hasMessageContaining("'instances' must be at most 1024");
        assertThatThrownBy(() -> read("inputs: [ { name: x, dims: [1, ~] } ]\n")).hasMessageContaining("'inputs[0].dims[1]' is empty");
        assertThatThrownBy(() -> read("version-policy: { specific: [1, ~, 3] }\n"))
                .hasMessageContaining("'version-policy.specific[1]' is empty");
        assertThat(read("instances: 1024\n").instances()).contains(1024);
        assertThatThrownBy(() -> read("max-planned-memory: lots\n")).hasMessageContaining("positive size");
        assertThatThrownBy(() -> read("data-files: [a.ptd, a.ptd]\n")).hasMessageContaining("listed twice");
        assertThatThrownBy(() -> read("- just\n- a list\n")).hasMessageContaining("must be a YAML mapping");
        assertThatThrownBy(() -> read("inputs: [ { name: x, dims: [-1, many] } ]\n")).hasMessageContaining("'dims'");
        assertThatThrownBy(() -> read("inputs: [ { name: x, dims: [-1, 0] } ]\n")).hasMessageContaining("'dims'");
    }

    @Test
    void invalidYamlIsRefusedWithWhereNotWithTheFilesLines() throws Exception {
        // A config.yml that is some other file (a link): the reason says where, on one line, and
        // quotes none of it.
        assertThatThrownBy(() -> read("method: forward\nuser: {x: SECRET-VALUE\n")).satisfies(e -> {
            assertThat(e).isInstanceOf(ModelConfig.InvalidModelConfigException.class)
                    .hasMessageContaining("invalid YAML in").hasMessageContaining("line 2, column")
                    .hasMessageNotContaining("SECRET").hasMessageNotContaining("\n");
        });
        assertThatThrownBy(() -> read("a: b: SECRET-VALUE\n")).hasMessageContaining("line 1, column")
                .hasMessageNotContaining("SECRET");
    }

    @Test
    void versionPolicyIsAllLatestOrSpecific() throws Exception {
        assertThat(read("instances: 1\n").versionPolicy()).isEqualTo(VersionPolicy.ALL);
        assertThat(read("version-policy: all\n").versionPolicy()).isEqualTo(VersionPolicy.ALL);
        assertThat(read("version-policy: { latest: 2 }\n").versionPolicy()).isEqualTo(VersionPolicy.latest(2));
        assertThat(read("version-policy: { specific: [1, 3] }\n").versionPolicy())
                .isEqualTo(VersionPolicy.specific(List.of(1L, 3L)));
        TreeSet<Long> on = new TreeSet<>(List.of(1L, 2L, 3L, 7L));
        assertThat(VersionPolicy.latest(2).select(on)).containsExactly(3L, 7L);
        assertThat(VersionPolicy.specific(List.of(2L, 9L)).select(on)).containsExactly(2L);
        assertThat(VersionPolicy.ALL.select(on)).containsExactly(1L, 2L, 3L, 7L);
        assertThatThrownBy(() -> read("version-policy: newest\n")).hasMessageContaining("'version-policy' must be");
        assertThatThrownBy(() -> read("version-policy: { latest: 0 }\n")).hasMessageContaining("N >= 1");
        assertThatThrownBy(() -> read("version-policy: { latest: 1, specific: [1] }\n"))
                .hasMessageContaining("'version-policy' must be");
    }

    @Test
    void everyKeyMustBindAtAnyDepth() {
        // Spring's Binder with no unbound elements: a typo inside a list entry is refused too.
        assertThatThrownBy(() -> read("inputs: [ { nmae: x } ]\n")).hasMessageContaining("unknown key 'inputs[0].nmae'");
        assertThatThrownBy(() -> read("warmup: { samples: 2, dta: random }\n"))
                .hasMessageContaining("unknown key 'warmup.dta'");
        assertThatThrownBy(() -> read("\"in puts\": [x]\n")).hasMessageContaining("unknown key 'in puts'");
    }

    @Test
    void aListOrMappingWhereOneValueGoesIsSaidSoAndAnUnknownKeyOrBadCharacterIsNamedAsWritten() {
        String[][] refused = {
            {"sha256: [ab]\n", "'sha256' takes one value, not a list or mapping"},
            {"instances: { count: 2 }\n", "'instances' takes one value, not a list or mapping: it must be a positive"
                    + " integer"},
            {"method: [forward]\n", "'method' takes one value"},
            {"inputs: [ { name: [x] } ]\n", "'inputs[0].name' takes one value"},
            {"inputs: [ { name: x, dims: [[1, 16]] } ]\n", "'inputs[0].dims[0]' takes one value"},
            {"warmup: { samples: 2, data: { kind: zeros } }\n", "'warmup.data' takes one value"},
            {"dynamic-batching: { max-batch-size: 8, max-queue-delay: [1ms] }\n",
                "'dynamic-batching.max-queue-delay' takes one value"},
            // A key of a section written at the top: the key as written, without the list's index.
            {"preferred-batch-sizes: [8, 16]\n", "unknown key 'preferred-batch-sizes'"},
        };
        for (String[] c : refused) {
            assertThatThrownBy(() -> read(c[0])).as(c[0]).hasMessageContaining(c[1]);
        }
        assertThatThrownBy(() -> read("method: for\u0000ward\n"))
                .hasMessageEndingWith("a character YAML does not allow (U+0000) at character 12");
        // A list's item: its list's words ("must be a list of ...") would not fit it.
        assertThatThrownBy(() -> read("devices: [[0]]\n"))
                .hasMessageEndingWith("'devices[0]' takes one value, not a list or mapping");
    }

    @Test
    void valuesConvertAsInApplicationYmlAndRefusalsNameTheKeyAndValue() throws Exception {
        ModelConfig c = read("""
                inputs: [x, y]
                placement: CPU
                max-planned-memory: 1073741824
                devices: all
                warmup: 3
                """);
        assertThat(c.inputNames()).containsExactly("x", "y");
        assertThat(c.placement()).contains(ModelConfig.Placement.CPU);
        assertThat(c.maxPlannedMemory()).contains(1L << 30);
        assertThat(c.devices()).contains(ModelConfig.ALL_DEVICES);
        assertThat(c.warmup()).isEqualTo(new Warmup(3, Warmup.Data.ZEROS));
        assertThat(read("data-files: []\n").dataFiles()).contains(List.of());
        assertThatThrownBy(() -> read("instances: two\n")).hasMessageContaining("'instances' must be a positive integer, got 'two'");
        assertThatThrownBy(() -> read("instances: 0\n")).hasMessageContaining("'instances' must be a positive integer");
        assertThatThrownBy(() -> read("placement: tpu\n")).hasMessageContaining("'placement' must be cpu or gpu, got 'tpu'");
        assertThatThrownBy(() -> read("devices: [0, x]\n")).hasMessageContaining("'devices' must be 'all' or a list");
        assertThatThrownBy(() -> read("devices: some\n")).hasMessageContaining("'devices' must be 'all' or a list");
        assertThatThrownBy(() -> read("inputs: [x, x]\n")).hasMessageContaining("duplicate name 'x' in inputs");
        assertThatThrownBy(() -> read("inputs: x\n")).hasMessageContaining("'inputs' must be a list");
    }
}
