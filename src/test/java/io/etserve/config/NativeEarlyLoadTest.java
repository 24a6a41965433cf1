package io.etserve.config;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.runtime.NativeRuntime;
import java.nio.file.Path;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.mock.env.MockEnvironment;

class NativeEarlyLoadTest {

    @Test
    void readsTheDirectoriesAsTheBeanBindsThem() {
        NativeRuntime.Options byDefault = NativeEarlyLoad.options(Binder.get(new MockEnvironment()));
        assertThat(byDefault.libraryDir()).isEmpty();
        assertThat(byDefault.extractDir()).isEqualTo(Path.of(System.getProperty("java.io.tmpdir"), "etserve-native"));
        assertThat(byDefault.extraLibraries()).isEmpty();

        NativeRuntime.Options set = NativeEarlyLoad.options(Binder.get(new MockEnvironment()
                .withProperty("etserve.native.libraryDir", "/opt/etserve/native")
                .withProperty("etserve.native.extract-dir", "/var/tmp/x")));
        assertThat(set.libraryDir()).isEqualTo(Optional.of(Path.of("/opt/etserve/native")));
        assertThat(set.extractDir()).isEqualTo(Path.of("/var/tmp/x"));
    }

    @Test
    void anEmptyLibraryDirMeansTheJarsLibraries() {
        // application.yml writes `library-dir: ${ETSERVE_NATIVE_LIBRARY_DIR:}`: unset is empty text.
        NativeRuntime.Options empty = NativeEarlyLoad.options(Binder.get(new MockEnvironment()
                .withProperty("etserve.native.library-dir", "")));
        assertThat(empty.libraryDir()).isEmpty();
    }
}
