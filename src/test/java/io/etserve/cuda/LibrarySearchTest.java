package io.etserve.cuda;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.bytedeco.javacpp.Loader;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class LibrarySearchTest {

    @TempDir
    Path tmp;

    private final ClassLoader nothing = new URLClassLoader(new URL[0], null);

    @Test
    void findsALibraryInADirectoryByItsExactFileName() throws Exception {
        Path lib = Files.createDirectories(tmp.resolve("lib"));
        Files.writeString(lib.resolve("libfoo.so.3"), "elf");
        Path empty = Files.createDirectories(tmp.resolve("empty"));
        LibrarySearch search = new LibrarySearch(List.of(empty, lib), tmp.resolve("no-cache"), nothing);
        assertThat(search.finds("libfoo.so.3", null)).isTrue();
        assertThat(search.finds("libfoo.so.30", null)).isFalse();
        assertThat(search.finds("libfoo.so", null)).isFalse();
    }

    @Test
    void findsASonameTheLinkersCacheNames() throws Exception {
        Path cache = tmp.resolve("ld.so.cache");
        Files.write(cache, ("glibc-ld.so.cache1.1\0\0libbar.so.2\0/usr/lib/x86_64-linux-gnu/libbaz.so.7\0"
                + "libqux.so.10\0").getBytes(StandardCharsets.US_ASCII));
        LibrarySearch search = new LibrarySearch(List.of(), cache, nothing);
        assertThat(search.finds("libbar.so.2", null)).isTrue();
        assertThat(search.finds("libbaz.so.7", null)).isTrue();  // by its path
        assertThat(search.finds("libqux.so.10", null)).isTrue();
        assertThat(search.finds("libqux.so.1", null)).isFalse();  // a prefix is not the name
        assertThat(search.finds("ibbar.so.2", null)).isFalse();  // nor a suffix
        assertThat(search.finds("libnone.so.1", null)).isFalse();
    }

    @Test
    void findsALibraryAJarOnTheClassPathBundles() throws Exception {
        Path root = tmp.resolve("classes");
        Files.createDirectories(root.resolve("org/example/linux-x86_64"));
        Files.writeString(root.resolve("org/example/linux-x86_64/libfoo.so.3"), "elf");
        try (URLClassLoader jar = new URLClassLoader(new URL[] {root.toUri().toURL()}, null)) {
            LibrarySearch search = new LibrarySearch(List.of(), tmp.resolve("no-cache"), jar);
            assertThat(search.finds("libfoo.so.3", "org/example/linux-x86_64/libfoo.so.3")).isTrue();
            assertThat(search.finds("libfoo.so.3", "org/example/linux-x86_64/libfoo.so.4")).isFalse();
        }
    }

    @Test
    void findsWhatThisProcessLinksAndNotWhatNobodyHas() {
        LibrarySearch here = LibrarySearch.ofThisProcess(TensorRtProbe.PRESET);
        assertThat(here.finds("libc.so.6", null)).isTrue();
        assertThat(here.finds("libetserve-no-such-library.so.1", null)).isFalse();
    }

    @Test
    void looksLastWhereTheBindingsPresetSaysAndOnlyWhenNothingElseFound() throws Exception {
        Path preset = Files.createDirectories(tmp.resolve("preset"));
        Files.writeString(preset.resolve("libfoo.so.3"), "elf");
        int[] asked = {0};
        LibrarySearch search = new LibrarySearch(List.of(), tmp.resolve("no-cache"), nothing, () -> {
            asked[0]++;
            return List.of(preset);
        });
        assertThat(search.finds("libfoo.so.3", null)).isTrue();
        assertThat(asked[0]).isEqualTo(1);

        Path lib = Files.createDirectories(tmp.resolve("lib"));
        Files.writeString(lib.resolve("libfoo.so.3"), "elf");
        LibrarySearch early = new LibrarySearch(List.of(lib), tmp.resolve("no-cache"), nothing, () -> {
            throw new AssertionError("asked though found");
        });
        assertThat(early.finds("libfoo.so.3", null)).isTrue();
    }

    /** JavaCPP's TensorRT preset names its own link paths (NVIDIA's /usr/local/tensorrt among them). */
    @Test
    void readsTheTensorRtPresetsLinkPathsWithoutLoadingIt() {
        List<Path> paths = LibrarySearch.presetPaths(TensorRtProbe.PRESET, getClass().getClassLoader());
        if (Loader.getPlatform().startsWith("linux-")) {
            assertThat(paths).contains(Path.of("/usr/local/tensorrt/lib"));
        }
        assertThat(LibrarySearch.presetPaths("org.example.NoSuchPreset", getClass().getClassLoader())).isEmpty();
    }

    @Test
    void tensorRtIsNotLoadedWhereItsLibraryIsNowhere() {
        LibrarySearch none = new LibrarySearch(List.of(tmp), tmp.resolve("no-cache"), nothing);
        TensorRtProbe probe = TensorRtProbe.probe(none);
        assertThat(probe.available()).isFalse();
        assertThat(probe.reason()).contains("libnvinfer.so.10 not found");
    }

    /** The name looked for is the one the bindings' JNI library needs: a new preset version must not slip by. */
    @Test
    void theBindingsNeedTheLibraryLookedFor() throws Exception {
        String jni = "org/bytedeco/tensorrt/" + Loader.getPlatform() + "/libjninvinfer.so";
        byte[] elf;
        try (InputStream in = TensorRtProbe.class.getClassLoader().getResourceAsStream(jni)) {
            assertThat(in).as(jni).isNotNull();
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            in.transferTo(out);
            elf = out.toByteArray();
        }
        String strings = new String(elf, StandardCharsets.ISO_8859_1);
        assertThat(strings).contains("\0" + TensorRtProbe.LIBRARY + "\0");
    }
}
