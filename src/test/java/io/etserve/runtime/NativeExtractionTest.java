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
        // The first-call trial's program runs from there: only its owner may.
        assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(first.resolve(NativeRuntime.FIRST_CALL))))
                .isEqualTo("rwx------");
        assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(base))).isEqualTo("rwx------");
        byte[] bridge = Files.readAllBytes(first.resolve(NativeRuntime.BRIDGE));

        assertThat(NativeRuntime.extract(base)).isEqualTo(first);

        // Someone replaces the bridge in the (predictable) directory.
        Files.write(first.resolve(NativeRuntime.BRIDGE), new byte[] {0x7f, 'E', 'L', 'F'});
        Path second = NativeRuntime.extract(base);
        assertThat(second).isNotEqualTo(first);
        assertThat(Files.readAllBytes(second.resolve(NativeRuntime.BRIDGE))).isEqualTo(bridge);
    }

    @Test
    void aBaseOfOursThatIsTooOpenIsClosedAndOneOfAnotherUserIsNotUsed(@TempDir Path tmp) throws Exception {
        // Ours, left group- and world-writable (an earlier version under a permissive umask): closed now.
        Path base = Files.createDirectory(tmp.resolve("shared"));
        Path first = NativeRuntime.extract(base);
        Files.setPosixFilePermissions(base, PosixFilePermissions.fromString("rwxrwxrwx"));
        assertThat(NativeRuntime.onlyOursToChange(base)).isFalse();
        assertThat(NativeRuntime.extract(base)).isEqualTo(first);
        assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(base))).isEqualTo("rwx------");

        // A link to a directory (planted by someone else) is never used: the libraries go elsewhere.
        Path link = Files.createSymbolicLink(tmp.resolve("link"), base);
        assertThat(NativeRuntime.onlyOursToChange(link)).isFalse();
        Path elsewhere = NativeRuntime.extract(link);
        try {
            assertThat(elsewhere.startsWith(link)).isFalse();
            assertThat(elsewhere.startsWith(base)).isFalse();
            assertThat(elsewhere.resolve(NativeRuntime.BRIDGE)).isRegularFile();
            assertThat(NativeRuntime.onlyOursToChange(elsewhere.getParent())).isTrue();
        } finally {
            try (var walk = Files.walk(elsewhere.getParent())) {
                for (Path p : walk.sorted(java.util.Comparator.reverseOrder()).toList()) {
                    Files.delete(p);
                }
            }
        }
        assertThat(NativeRuntime.onlyOursToChange(tmp.resolve("no-such-directory"))).isFalse();
    }
}
