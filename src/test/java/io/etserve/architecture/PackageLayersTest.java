package io.etserve.architecture;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The packages' layering (docs/architecture.md): an import may only point to a lower layer, so
 * no package depends on one above it or beside it, and there are no cycles between packages.
 */
class PackageLayersTest {

    /** Lower number, lower layer. Packages on one layer may not import each other. */
    private static final Map<String, Integer> LAYERS = Map.ofEntries(
            Map.entry("runtime", 0),
            Map.entry("grpc.protocol", 0), // generated from the protocol's .proto files
            Map.entry("cuda", 1),
            Map.entry("inference", 2),
            Map.entry("modelconfig", 3),
            Map.entry("execution", 4),
            Map.entry("repository", 5),
            Map.entry("protocol", 6),
            Map.entry("resilience", 6),
            Map.entry("security", 6),
            Map.entry("metrics", 6),
            Map.entry("health", 6),
            Map.entry("triton", 7),
            Map.entry("sharedmemory", 7),
            Map.entry("rest", 8),
            Map.entry("grpc", 8),
            Map.entry("tracing", 9),
            Map.entry("config", 10),
            Map.entry("", 11)); // EtServeApplication

    private static final Path SOURCES = Path.of("src/main/java/io/etserve");
    private static final Pattern IMPORT = Pattern.compile("^import (?:static )?io\\.etserve\\.([a-z.]+)\\.[A-Z]", Pattern.MULTILINE);

    @Test
    void everyImportPointsToALowerLayer() throws IOException {
        List<String> upwards = new ArrayList<>();
        List<String> unknown = new ArrayList<>();
        try (Stream<Path> files = Files.walk(SOURCES)) {
            for (Path file : files.filter(f -> f.toString().endsWith(".java")).toList()) {
                String from = SOURCES.relativize(file.getParent() == null ? SOURCES : file.getParent())
                        .toString().replace('/', '.');
                Integer fromLayer = LAYERS.get(from);
                if (fromLayer == null) {
                    unknown.add(from + " (" + file.getFileName() + ")");
                    continue;
                }
                Matcher m = IMPORT.matcher(Files.readString(file));
                while (m.find()) {
                    String to = m.group(1);
                    Integer toLayer = LAYERS.get(to);
                    if (toLayer == null) {
                        unknown.add(to + " (imported by " + file.getFileName() + ")");
                    } else if (!to.equals(from) && toLayer >= fromLayer) {
                        upwards.add(from + " -> " + to + " in " + file.getFileName());
                    }
                }
            }
        }
        assertThat(unknown).as("packages without a layer: give each new package one here and in docs/architecture.md")
                .isEmpty();
        assertThat(upwards).as("imports that point up or sideways").isEmpty();
    }

    @Test
    void theCheckSeesAnUpwardImport() {
        Matcher m = IMPORT.matcher("package io.etserve.execution;\n\nimport io.etserve.repository.ModelRegistry;\n");
        assertThat(m.find()).isTrue();
        assertThat(LAYERS.get(m.group(1))).isGreaterThan(LAYERS.get("execution"));
    }
}
