package io.etserve.runtime;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.support.TestPaths;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import java.util.stream.Stream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A build against the CUDA wheel stages its CudaBackend (and AOTI shims) with a
 * {@code delegates.list}; the runtime loads them after the bridge and goes on without one that
 * this host cannot load. Here the test-only probe delegate stands in for a loadable delegate
 * and a file that is no library for one that cannot load (as CudaBackend on a host without a
 * CUDA driver). Its own JVM: the natives load once per process.
 */
@Tag("isolated-jvm")
class DelegatesListTest {

    @Test
    void listedDelegatesLoadAfterTheBridgeAndAnUnloadableOneIsSkipped(@TempDir Path dir) throws Exception {
        Path staged = TestPaths.repoRoot().resolve("target/native-stage/" + NativeRuntime.RESOURCE_DIR);
        try (Stream<Path> files = Files.list(staged)) {
            for (Path f : files.toList()) {
                Files.copy(f, dir.resolve(f.getFileName()));
            }
        }
        Path probe = TestPaths.probeDelegate();
        Files.copy(probe, dir.resolve(probe.getFileName()));
        Files.writeString(dir.resolve("libnot_loadable_here.so"), "not an ELF file");
        Files.writeString(dir.resolve(NativeRuntime.DELEGATES),
                probe.getFileName() + "\nlibnot_loadable_here.so\n");

        NativeRuntime.Info info = NativeRuntime.load(
                new NativeRuntime.Options(Optional.of(dir), dir.resolve("unused"), List.of()));

        assertThat(info.registeredBackends()).contains("CallerStreamProbe", "XnnpackBackend");
        assertThat(info.libraries()).containsKey(probe.getFileName().toString())
                .doesNotContainKey("libnot_loadable_here.so");
    }
}
