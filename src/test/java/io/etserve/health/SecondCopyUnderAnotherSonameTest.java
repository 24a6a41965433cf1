package io.etserve.health;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.runtime.CallerStreamInspector;
import io.etserve.runtime.NativeRuntime;
import io.etserve.support.NativeFixtures;
import io.etserve.support.TestPaths;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.Status;

/**
 * Loads a second copy of ExecuTorch's caller-stream library, renamed to the CUDA wheel's soname,
 * into this JVM — exactly the mistake that splits the thread-local selection in two. Runs in a
 * JVM of its own (tag isolated-jvm) since the damage cannot be undone.
 */
@Tag("isolated-jvm")
class SecondCopyUnderAnotherSonameTest {

    @Test
    void isDetectedAndReportedDown(@TempDir Path dir) throws Exception {
        NativeRuntime.ensureLoaded();
        CallerStreamCheck check = new CallerStreamCheck();
        assertThat(check.check().ok()).isTrue();
        String first = check.check().definers().get(0).path();

        Path copy = dir.resolve("libexecutorch_extension_cuda.so");
        Files.copy(NativeFixtures.stagedCallerStreamLibrary(), copy);
        NativeFixtures.run(List.of(NativeFixtures.patchelf().toString(), "--set-soname",
                "libexecutorch_extension_cuda.so", copy.toString()));
        System.load(copy.toString());

        List<CallerStreamInspector.Definer> definers = CallerStreamInspector.definers();
        assertThat(definers).hasSize(2);
        assertThat(definers).extracting(CallerStreamInspector.Definer::soname)
                .containsExactlyInAnyOrder("libextension_cuda.so", "libexecutorch_extension_cuda.so");

        Health health = new CallerStreamHealthIndicator(check).health();
        assertThat(health.getStatus()).isEqualTo(Status.DOWN);
        assertThat(health.getDetails().get("error").toString()).contains(first).contains(copy.toString());
        assertThat(TestPaths.repoRoot()).exists();
    }
}
