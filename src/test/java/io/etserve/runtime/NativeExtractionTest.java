package io.etserve.runtime;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The jar's libraries are extracted once, privately, and a tampered extraction is never loaded. */
class NativeExtractionTest {

    @Test
    void reusesItsOwnExtractionAndRefusesATamperedOne(@TempDir Path tmp) throws Exception {
        Path base = tmp.resolve("native");
        Path first = NativeRuntime.extract(base);
        assertThat(first.resolve(NativeRuntime.BRIDGE)).isRegularFile();
        assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(base))).isEqualTo("rwx------");
        byte[] bridge = Files.readAllBytes(first.resolve(NativeRuntime.BRIDGE));

        assertThat(NativeRuntime.extract(base)).isEqualTo(first);

        // Someone replaces the bridge in the (predictable) directory.
        Files.write(first.resolve(NativeRuntime.BRIDGE), new byte[] {0x7f, 'E', 'L', 'F'});
        Path second = NativeRuntime.extract(base);
        assertThat(second).isNotEqualTo(first);
        assertThat(Files.readAllBytes(second.resolve(NativeRuntime.BRIDGE))).isEqualTo(bridge);
    }
}
