package io.etserve.health;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.runtime.CallerStreamInspector;
import io.etserve.runtime.NativeRuntime;
import io.etserve.support.NativeFixtures;
import io.etserve.support.TestPaths;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A library that NEEDs libextension_cuda.so and whose RUNPATH points at a second copy of it in
 * another directory: the loader matches the soname already loaded and never opens the copy, so
 * there is still one selection. Own JVM (isolated-jvm): the probe delegate it loads stays.
 */
@Tag("isolated-jvm")
class SameSonameFromAnotherPathTest {

    @Test
    void isNotASecondCopy(@TempDir Path dir) throws Exception {
        NativeRuntime.ensureLoaded();
        assertThat(CallerStreamInspector.definers()).hasSize(1);

        Files.copy(NativeFixtures.stagedCallerStreamLibrary(), dir.resolve("libextension_cuda.so"));
        Path user = dir.resolve("libetserve_test_caller_stream_probe.so");
        Files.copy(TestPaths.probeDelegate(), user);
        NativeFixtures.run(List.of(NativeFixtures.patchelf().toString(), "--set-rpath", "$ORIGIN", user.toString()));
        NativeRuntime.load(new NativeRuntime.Options(Optional.empty(), dir, List.of(user)));

        List<CallerStreamInspector.Definer> definers = CallerStreamInspector.definers();
        assertThat(definers).hasSize(1);
        assertThat(definers.get(0).path()).doesNotStartWith(dir.toString());
        assertThat(NativeRuntime.info().registeredBackends()).contains("CallerStreamProbe");
        assertThat(new CallerStreamCheck().check().ok()).isTrue();
    }
}
