package io.etserve.support;

import java.nio.file.Files;
import java.nio.file.Path;

/** Where the committed models and the test build's native artifacts are. */
public final class TestPaths {

    private TestPaths() {}

    public static Path repoRoot() {
        Path p = Path.of("").toAbsolutePath();
        while (p != null && !Files.isRegularFile(p.resolve("pom.xml"))) {
            p = p.getParent();
        }
        if (p == null) {
            throw new IllegalStateException("cannot find the repository root from " + Path.of("").toAbsolutePath());
        }
        return p;
    }

    /** The demo model repository shipped with the service. */
    public static Path demoModels() {
        return repoRoot().resolve("models");
    }

    /** Test-only models (dtypes, two-inputs, the caller-stream probe). */
    public static Path testModels() {
        return repoRoot().resolve("src/test/resources/models");
    }

    public static Path nativeBuildDir() {
        String dir = System.getProperty("etserve.test.native-build-dir");
        return dir != null ? Path.of(dir) : repoRoot().resolve("target/native");
    }

    /** The test-only delegate that reports the caller-stream selection it sees. */
    public static Path probeDelegate() {
        String override = System.getProperty("etserve.test.probe-delegate");
        Path p = override != null ? Path.of(override) : nativeBuildDir().resolve("testing/caller_stream_probe/libetserve_test_caller_stream_probe.so");
        if (!Files.isRegularFile(p)) {
            throw new IllegalStateException("probe delegate not built: " + p + " (run the Maven build first)");
        }
        return p;
    }

    public static Path venv() {
        String dir = System.getProperty("etserve.test.venv");
        return dir != null ? Path.of(dir) : repoRoot().resolve(".venv");
    }
}
