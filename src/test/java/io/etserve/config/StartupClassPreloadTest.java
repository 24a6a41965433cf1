package io.etserve.config;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.URL;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class StartupClassPreloadTest {

    /** Set by {@link Probe}'s static initializer, which preloading must not run. */
    static final AtomicBoolean probeInitialized = new AtomicBoolean();

    static final class Probe {
        static {
            probeInitialized.set(true);
        }
    }

    @Test
    void aQuarterOfTheCoresBetweenOneAndFourUnlessSet() {
        assertThat(StartupClassPreload.threads(null, null, 2)).isEqualTo(1);
        assertThat(StartupClassPreload.threads(null, null, 8)).isEqualTo(2);
        assertThat(StartupClassPreload.threads(null, null, 16)).isEqualTo(4);
        assertThat(StartupClassPreload.threads(null, null, 128)).isEqualTo(4);
        assertThat(StartupClassPreload.threads("0", null, 16)).as("off").isZero();
        assertThat(StartupClassPreload.threads(null, " 6 ", 16)).as("the environment").isEqualTo(6);
        assertThat(StartupClassPreload.threads("2", "6", 16)).as("the property first").isEqualTo(2);
        assertThat(StartupClassPreload.threads(" ", "6", 16)).as("a blank property is unset").isEqualTo(6);
        assertThat(StartupClassPreload.threads("1000", null, 16)).as("one per core at most").isEqualTo(16);
        assertThat(StartupClassPreload.threads("many", null, 16)).as("unreadable: the default").isEqualTo(4);
        assertThat(StartupClassPreload.threads("-3", null, 16)).isZero();
    }

    @Test
    void loadsWithoutInitializingAndSkipsNamesThatAreGone() {
        List<String> names = List.of(Probe.class.getName(), "io.etserve.NoSuchClass", "java.util.concurrent.Phaser");
        int loaded = StartupClassPreload.load(names, 0, 1, getClass().getClassLoader());
        assertThat(loaded).isEqualTo(2);
        assertThat(probeInitialized).as("no static initializer ran").isFalse();
    }

    @Test
    void eachThreadTakesEveryNthNameFromItsOwn() {
        List<String> names = List.of("java.lang.String", "io.etserve.Gone1", "java.lang.Integer", "io.etserve.Gone2",
                "java.lang.Long");
        ClassLoader loader = getClass().getClassLoader();
        assertThat(StartupClassPreload.load(names, 0, 2, loader)).as("0, 2, 4").isEqualTo(3);
        assertThat(StartupClassPreload.load(names, 1, 2, loader)).as("1, 3").isZero();
    }

    @Test
    void preloadsTheListItsLoaderHolds(@TempDir Path dir) throws Exception {
        Path list = dir.resolve("startup-classes.txt");
        Files.writeString(list, String.join("\n", Probe.class.getName(), "", "  java.util.concurrent.Exchanger  ",
                "io.etserve.NoSuchClass", "java.util.zip.Adler32") + "\n");
        ClassLoader loader = withList(list);
        URL found = loader.getResource(StartupClassPreload.LIST);
        assertThat(StartupClassPreload.read(found)).hasSize(4);
        StartupClassPreload.Summary done = StartupClassPreload.preload(loader, found, 3, new CompletableFuture<>())
                .get(30, TimeUnit.SECONDS);
        assertThat(done.listed()).isEqualTo(4);
        assertThat(done.resolved()).isEqualTo(3);
        assertThat(done.threads()).isEqualTo(3);
        assertThat(probeInitialized).isFalse();
    }

    /** This test's class loader, but with the given file as its list (a built target/classes has one). */
    private ClassLoader withList(Path list) {
        return new ClassLoader(getClass().getClassLoader()) {
            @Override
            public URL getResource(String name) {
                if (!name.equals(StartupClassPreload.LIST)) {
                    return super.getResource(name);
                }
                try {
                    return Files.exists(list) ? list.toUri().toURL() : null;
                } catch (java.net.MalformedURLException e) {
                    throw new IllegalStateException(e);
                }
            }
        };
    }

    @Test
    void noListNoNames(@TempDir Path dir) throws Exception {
        ClassLoader loader = withList(dir.resolve("absent.txt"));
        URL absent = loader.getResource(StartupClassPreload.LIST);
        assertThat(absent).isNull();
        assertThat(StartupClassPreload.read(absent)).isEmpty();
        assertThat(StartupClassPreload.preload(loader, absent, 2, new CompletableFuture<>()).get(30, TimeUnit.SECONDS)
                .resolved()).isZero();
    }
}
