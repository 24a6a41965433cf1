package io.etserve.packaging;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.support.FreePorts;
import io.etserve.support.Http;
import io.etserve.support.TestPaths;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The packaged jar, run with `java -jar` as a user would (a JVM of its own): it serves the
 * bundled demo models on the CPU from the libraries it carries, and a missing native library
 * ends startup with one sentence, not a stack of UnsatisfiedLinkErrors.
 */
@Tag("packaged")
class PackagedJarIT {

    static Path jar() {
        String p = System.getProperty("etserve.test.jar");
        Path jar = p != null ? Path.of(p) : TestPaths.repoRoot().resolve("target/etserve-0.1.0-SNAPSHOT.jar");
        assertThat(jar).exists();
        return jar;
    }

    static Process start(Path workDir, Path log, List<String> args) throws IOException {
        return start(Path.of(System.getProperty("java.home")), workDir, log, args);
    }

    static Process start(Path javaHome, Path workDir, Path log, List<String> args) throws IOException {
        return start(javaHome, workDir, log, List.of(), args);
    }

    static Process start(Path javaHome, Path workDir, Path log, List<String> jvmArgs, List<String> args)
            throws IOException {
        List<String> cmd = new ArrayList<>(List.of(javaHome.resolve("bin/java").toString(),
                "--enable-native-access=ALL-UNNAMED", "-Xmx512m"));
        cmd.addAll(jvmArgs);
        cmd.addAll(List.of("-jar", jar().toString()));
        cmd.addAll(args);
        return new ProcessBuilder(cmd).directory(workDir.toFile()).redirectErrorStream(true)
                .redirectOutput(log.toFile()).start();
    }

    /** Built for Java 17, it must run on Java 25 too (pom: etserve.test.java25-home). */
    @Test
    void servesOnJava25(@TempDir Path tmp) throws Exception {
        String home = System.getProperty("etserve.test.java25-home", "");
        Assumptions.assumeTrue(!home.isBlank() && Files.isExecutable(Path.of(home, "bin/java")),
                "no Java 25 at etserve.test.java25-home='" + home + "'");
        servesOn(Path.of(home), tmp);
        assertThat(Files.readString(tmp.resolve("app.log"))).doesNotContain("WARNING: A restricted method");
    }

    /**
     * Spring AOT mode, which a start from the jar uses unless told otherwise: the bean definitions
     * generated when the jar was built (spring-boot:process-aot) make the context, and it serves
     * as one built at startup does.
     */
    @Test
    void startsFromTheContextGeneratedAtBuild(@TempDir Path tmp) throws Exception {
        // The classes the build recorded a start loading were loaded on the preloading threads:
        // the debug line comes when they finish (at ready, or after it on a busy machine).
        servesOn(Path.of(System.getProperty("java.home")), tmp, List.of(),
                List.of("--logging.level.io.etserve.config.StartupClassPreload=debug"),
                "Preloaded classes: [1-9][0-9]{3,} of [0-9]+ listed resolved on [1-4] thread");
        String log = Files.readString(tmp.resolve("app.log"));
        assertThat(log).contains("Starting from the context generated at build time")
                .doesNotContain("Not using the context generated").doesNotContain("Building the context from the settings");
    }

    /**
     * What main() does before Spring starts nothing it should not: no start makes the platform
     * MBean server (Jetty's thread pools asked it about compressed references until main told
     * Jetty: JettyCacheLine), and logging starts when Spring starts it, not in main's helpers.
     * Seen in which classes load, and in what order, with the preloading threads (which would
     * load such classes too, without starting anything) off.
     */
    @Test
    void mainStartsNeitherTheMBeanServerNorLoggingEarly(@TempDir Path tmp) throws Exception {
        Path classes = tmp.resolve("classes.log");
        servesOn(Path.of(System.getProperty("java.home")), tmp,
                List.of("-Detserve.startup.preload-threads=0", "-Xlog:class+load=info:file=" + classes), List.of());
        String loaded = Files.readString(classes);
        assertThat(loaded).as("classes loaded").contains("org.eclipse.jetty.util.MemoryUtils ")
                .doesNotContain("com.sun.jmx.mbeanserver.JmxMBeanServer ");
        assertThat(loaded.indexOf(" org.springframework.boot.SpringApplication "))
                .as("Spring's application class loads before SLF4J's LoggerFactory").isPositive()
                .isLessThan(loaded.indexOf(" org.slf4j.LoggerFactory "));
    }

    /**
     * The build recorded which classes a start loads (scripts/startup-classes.sh), from the jar's
     * own classes to Jetty's and the JDK's, for StartupClassPreload.
     */
    @Test
    void carriesTheClassesAStartLoads() throws Exception {
        try (var zip = new java.util.zip.ZipFile(jar().toFile())) {
            var entry = java.util.stream.Stream.of("META-INF/etserve/startup-classes.txt",
                    "BOOT-INF/classes/META-INF/etserve/startup-classes.txt").map(zip::getEntry)
                    .filter(java.util.Objects::nonNull).findFirst();
            assertThat(entry).as("the recorded list").isPresent();
            List<String> names = new String(zip.getInputStream(entry.get()).readAllBytes(), StandardCharsets.UTF_8).lines()
                    .toList();
            assertThat(names).hasSizeGreaterThan(3000).doesNotHaveDuplicates()
                    .contains("io.etserve.EtServeApplication", "org.eclipse.jetty.server.Server",
                            "org.springframework.boot.SpringApplication")
                    .anyMatch(n -> n.startsWith("java.")).noneMatch(n -> n.contains("/") || n.isBlank());
            // In the order a start loaded them: the application's main class before the inference code.
            assertThat(names.indexOf("io.etserve.EtServeApplication"))
                    .isLessThan(names.indexOf("io.etserve.execution.InferenceService"));
            for (String own : names.stream().filter(n -> n.startsWith("io.etserve.")).toList()) {
                assertThat(zip.getEntry("BOOT-INF/classes/" + own.replace('.', '/') + ".class")).as(own).isNotNull();
            }
        }
    }

    /** {@code --version} prints the version and exits, starting nothing (no port is taken). */
    @Test
    void versionPrintsTheVersionAndStartsNothing(@TempDir Path tmp) throws Exception {
        Path log = tmp.resolve("version.log");
        Process p = start(tmp, log, List.of("--version"));
        assertThat(p.waitFor(30, TimeUnit.SECONDS)).as("exited").isTrue();
        assertThat(p.exitValue()).isZero();
        assertThat(Files.readString(log).strip()).isEqualTo("etserve 0.1.0-SNAPSHOT");
    }

    /** -Dspring.aot.enabled=false builds the context at startup, silently. */
    @Test
    void buildsItsContextAtStartupWhenToldTo(@TempDir Path tmp) throws Exception {
        servesOn(Path.of(System.getProperty("java.home")), tmp, List.of("-Dspring.aot.enabled=false"), List.of());
        assertThat(Files.readString(tmp.resolve("app.log"))).doesNotContain("context generated at build time")
                .doesNotContain("AOT-processed");
    }

    /**
     * A setting the build fixed (which actuator endpoints exist) set otherwise: the start builds
     * its context from its settings instead of ignoring the setting, says so once (a warning when
     * AOT mode was asked for, as the image does), and serves.
     */
    @Test
    void aSettingTheBuildFixedMakesTheStartBuildItsOwnContext(@TempDir Path tmp) throws Exception {
        servesOn(Path.of(System.getProperty("java.home")), tmp, List.of("-Dspring.aot.enabled=true"),
                List.of("--management.endpoints.web.exposure.include=health"));
        assertThat(Files.readString(tmp.resolve("app.log"))).containsPattern("WARN .*Not using the context generated at build time")
                .contains("management.endpoints.web.exposure.include: built with 'health,info,prometheus', now 'health'")
                .doesNotContain("AOT-processed");
    }

    private void servesOn(Path javaHome, Path tmp) throws Exception {
        servesOn(javaHome, tmp, List.of(), List.of());
    }

    private void servesOn(Path javaHome, Path tmp, List<String> jvmArgs, List<String> appArgs) throws Exception {
        servesOn(javaHome, tmp, jvmArgs, appArgs, null);
    }

    /** Serves, and before stopping waits up to 30 s for a line of its log to match {@code awaitInLog}. */
    private void servesOn(Path javaHome, Path tmp, List<String> jvmArgs, List<String> appArgs, String awaitInLog)
            throws Exception {
        int[] ports = FreePorts.take(2);
        int port = ports[0];
        int mgmt = ports[1];
        Path log = tmp.resolve("app.log");
        List<String> args = new ArrayList<>(List.of("--server.port=" + port, "--etserve.grpc.port=0",
                "--management.server.port=" + mgmt, "--etserve.native.extract-dir=" + tmp.resolve("native")));
        args.addAll(appArgs);
        Process app = start(javaHome, TestPaths.repoRoot(), log, jvmArgs, args);
        try {
            Http http = Http.local(port);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
            int status = 0;
            while (System.nanoTime() < deadline && app.isAlive()) {
                try {
                    status = http.get("/v2/health/ready").status();
                    if (status == 200) {
                        break;
                    }
                } catch (RuntimeException notYet) {
                    // not listening yet
                }
                Thread.sleep(250);
            }
            assertThat(status).as(Files.readString(log)).isEqualTo(200);
            String zeros = "[" + String.join(",", Collections.nCopies(16, "0")) + "]";
            Http.Response r = http.post("/v2/models/demo-xnnpack/infer",
                    "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,16],\"data\":" + zeros + "}]}");
            assertThat(r.status()).isEqualTo(200);
            try (var files = Files.list(tmp.resolve("native"))) {
                List<Path> extracted = files.toList();
                assertThat(extracted).as("extracted once, content-addressed").hasSize(1);
                // The first-call trial's program came out runnable, and the demo programs were tried.
                assertThat(Files.isExecutable(extracted.get(0).resolve("etserve-first-call"))).isTrue();
            }
            assertThat(Files.readString(log)).doesNotContain("loads untried");
            assertThat(Http.local(mgmt).get("/actuator/health/readiness").status()).isEqualTo(200);
            if (awaitInLog != null) {
                java.util.regex.Pattern wanted = java.util.regex.Pattern.compile(awaitInLog);
                long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                while (!wanted.matcher(Files.readString(log)).find() && System.nanoTime() < until) {
                    Thread.sleep(100);
                }
                assertThat(Files.readString(log)).containsPattern(wanted);
            }
        } finally {
            app.destroy();
            assertThat(app.waitFor(30, TimeUnit.SECONDS)).isTrue();
        }
    }

    @Test
    void aMissingNativeLibraryEndsStartupWithOneClearSentence(@TempDir Path tmp) throws Exception {
        Path broken = Files.createDirectories(tmp.resolve("libs"));
        Files.writeString(broken.resolve("libraries.txt"), "libextension_cuda.so\nlibetserve_jni.so\n");
        Path log = tmp.resolve("app.log");
        Process app = start(tmp, log, List.of("--server.port=0", "--management.server.port=0", "--etserve.grpc.port=0",
                "--etserve.native.library-dir=" + broken));
        assertThat(app.waitFor(90, TimeUnit.SECONDS)).isTrue();
        String out = Files.readString(log, StandardCharsets.UTF_8);
        assertThat(app.exitValue()).isNotZero();
        assertThat(out).contains("APPLICATION FAILED TO START")
                .contains("Native library libextension_cuda.so is missing from " + broken)
                .doesNotContain("UnsatisfiedLinkError");
    }
}
