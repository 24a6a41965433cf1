package io.etserve.modelconfig;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.support.RequestMutator;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Seeded, random variants of a config.yml that uses every key: lines dropped, repeated or
 * swapped, values replaced with ones of another kind, YAML's own syntax put in (anchors, aliases,
 * tags, merge keys, flow collections, tabs), bytes flipped or cut. Each reads or is refused with
 * {@link ModelConfig.InvalidModelConfigException} and a one-line message: never another
 * exception, which would reach the operator as a class name instead of the key to fix. Replay one
 * seed with {@code -Detserve.test.mutation-seed=N}.
 */
class MutatedModelConfigTest {

    static final long SEED = Long.getLong("etserve.test.mutation-seed", 20261207L);

    static final String VALID = """
            method: forward
            inputs: [ { name: x, dims: [-1, 16] } ]
            outputs: [ { name: y } ]
            instances: 2
            placement: cpu
            max-elements-per-tensor: 1048576
            devices: [0]
            data-files: [weights.ptd]
            warmup: { samples: 2, data: random }
            sha256: %s
            max-planned-memory: 2GB
            version-policy: { latest: 2 }
            dynamic-batching:
              max-batch-size: 32
              max-queue-delay: 500us
              preferred-batch-sizes: [8, 16, 32]
            """.formatted("ab".repeat(32));

    static final List<String> VALUES = List.of("", "~", "null", "-1", "0", "1.5", "2GB", "-2GB", "1e400",
            "99999999999999999999", "0x10", "0o17", ".inf", "-.inf", ".nan", "true", "no", "'x'", "\"\\u0000\"",
            "[]", "{}", "[[]]", "[1, [2]]", "{ a: 1 }", "all", "gpu", "GPU", "cpu", "forward", "x".repeat(2000),
            "!!binary aGVsbG8=", "!!timestamp 2001-12-14", "!!set { a }", "!!python/object:os.system x", "&a [1]",
            "*a", "*missing", "<<: *a", "10s", "-500us", "1ms", "1 ms", "[0, -1]", "[8, 64]", "{ samples: -1 }",
            "{ samples: 2, file: ../../etc/passwd }", "{ latest: 0 }", "{ specific: [] }", "{ specific: [-1] }");
    static final List<String> SYNTAX = List.of(": ", "- ", "[", "]", "{", "}", ",", "&a ", "*a", "!!str ", "<<: ",
            "\t", "#", "? ", "|\n", ">\n", "---\n", "...\n", "%YAML 1.1\n", "\"", "'", "\\", "\u00e9", "\ufeff",
            "\u0000");

    @TempDir
    Path dir;

    @Test
    void everyVariantReadsOrIsRefusedWithAReason() throws Exception {
        RequestMutator bytes = new RequestMutator(SEED);
        Random random = bytes.random();
        List<String> problems = new ArrayList<>();
        int refused = 0;
        for (int i = 0; i < 2000; i++) {
            byte[] yaml = random.nextInt(4) == 0 ? bytes.mutate(VALID.getBytes(StandardCharsets.UTF_8))
                    : mutate(VALID, random).getBytes(StandardCharsets.UTF_8);
            Files.write(dir.resolve(ModelConfig.FILE_NAME), yaml);
            try {
                ModelConfig.read(dir);
            } catch (ModelConfig.InvalidModelConfigException e) {
                refused++;
                if (e.getMessage() == null || e.getMessage().isBlank() || e.getMessage().contains("\tat ")) {
                    problems.add("#" + i + " a refusal without a clear message: " + e.getMessage());
                }
            } catch (RuntimeException | StackOverflowError e) {
                problems.add("#" + i + " " + e + "\n" + new String(yaml, StandardCharsets.UTF_8));
            }
        }
        assertThat(problems).as("seed %d", SEED).isEmpty();
        assertThat(refused).as("refused variants").isPositive();
    }

    @Test
    void aBillionLaughsIsRefusedQuickly() throws Exception {
        StringBuilder yaml = new StringBuilder("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for (int i = 1; i < 12; i++) {
            String prev = "*a" + (i - 1);
            yaml.append("a").append(i).append(": &a").append(i).append(" [").append(String.join(", ",
                    java.util.Collections.nCopies(10, prev))).append("]\n");
        }
        yaml.append("instances: 1\n");
        Files.writeString(dir.resolve(ModelConfig.FILE_NAME), yaml);
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> ModelConfig.read(dir))
                .isInstanceOf(ModelConfig.InvalidModelConfigException.class);
    }

    /** One to three line-level changes: a value replaced, syntax put in, a line dropped, repeated or moved. */
    static String mutate(String yaml, Random random) {
        List<String> lines = new ArrayList<>(List.of(yaml.split("\n")));
        for (int n = 1 + random.nextInt(3); n > 0 && !lines.isEmpty(); n--) {
            int at = random.nextInt(lines.size());
            String line = lines.get(at);
            switch (random.nextInt(6)) {
                case 0 -> {
                    int colon = line.indexOf(':');
                    if (colon > 0) {
                        lines.set(at, line.substring(0, colon + 1) + " " + VALUES.get(random.nextInt(VALUES.size())));
                    }
                }
                case 1 -> {
                    int where = random.nextInt(line.length() + 1);
                    lines.set(at, line.substring(0, where) + SYNTAX.get(random.nextInt(SYNTAX.size()))
                            + line.substring(where));
                }
                case 2 -> lines.remove(at);
                case 3 -> lines.add(random.nextInt(lines.size() + 1), line);
                case 4 -> {
                    String moved = lines.remove(at);
                    lines.add(random.nextInt(lines.size() + 1), moved);
                }
                default -> lines.set(at, "  ".repeat(random.nextInt(3)) + line.strip());
            }
        }
        return String.join("\n", lines) + "\n";
    }
}
