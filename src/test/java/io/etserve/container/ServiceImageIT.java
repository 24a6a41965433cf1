package io.etserve.container;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.github.dockerjava.api.DockerClient;
import com.github.dockerjava.api.exception.NotFoundException;
import com.github.dockerjava.api.model.PruneType;
import com.google.protobuf.ByteString;
import io.etserve.grpc.protocol.GRPCInferenceServiceGrpc;
import io.etserve.grpc.protocol.ModelInferRequest;
import io.etserve.grpc.protocol.ServerReadyRequest;
import io.etserve.support.FreePorts;
import io.etserve.support.Http;
import io.etserve.support.Reference;
import io.etserve.support.TestPaths;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.testcontainers.DockerClientFactory;
import org.testcontainers.containers.Container.ExecResult;
import org.testcontainers.containers.GenericContainer;
import org.testcontainers.containers.wait.strategy.AbstractWaitStrategy;
import org.testcontainers.images.builder.ImageFromDockerfile;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.node.ArrayNode;
import tools.jackson.databind.node.ObjectNode;

/**
 * The real image, built from the project's Dockerfile with the jar this build packaged, run
 * the way a cluster runs it: non-root, read-only root file system, a tmpfs at /tmp.
 *
 * <p>Needs a container engine that can build without pulling: the CPU flavour's base images
 * come from {@code .ci/base-images.sh}, the engine from {@code .ci/container-engine.sh start}.
 * Environment for Testcontainers on such an engine (set by {@code .ci/run}):
 * {@code DOCKER_HOST=unix:///var/run/docker.sock}, {@code TESTCONTAINERS_RYUK_DISABLED=true}
 * (Ryuk's image cannot be pulled) and {@code TESTCONTAINERS_HOST_OVERRIDE=localhost} (there is
 * no bridge network). The engine has no bridge, so the container shares the host's network and
 * gets free ports through {@code SERVER_PORT} and {@code MANAGEMENT_SERVER_PORT}.
 * Other bases: {@code -Detserve.test.image.build-base=...} and {@code ...runtime-base=...}
 * (they must already be in the engine).
 *
 * <p>Without an engine or its base images this class fails; it never skips.
 */
@Tag("container")
class ServiceImageIT {

    private static final String BUILD_BASE =
            System.getProperty("etserve.test.image.build-base", "etserve-base/tools-cpu:trixie");
    private static final String RUNTIME_BASE =
            System.getProperty("etserve.test.image.runtime-base", "etserve-base/runtime-cpu:trixie");
    private static final Duration STARTUP_TIMEOUT = Duration.ofSeconds(
            Long.getLong("etserve.test.image.startup-timeout-s", 180));
    private static final String MODEL = "demo-portable";

    private static String imageName;
    private static GenericContainer<?> service;
    private static int grpcPort;
    private static Http api;
    private static Http management;

    @BeforeAll
    static void startImage() {
        if (!DockerEngine.available()) {
            fail("No container engine answers at " + DockerEngine.host()
                    + ". Start one with `.ci/container-engine.sh start` and make the base images with"
                    + " `.ci/base-images.sh`.");
        }
        requireLocalImage(BUILD_BASE);
        requireLocalImage(RUNTIME_BASE);
        Path root = TestPaths.repoRoot();
        requirePackagedJar(root);
        int[] ports = FreePorts.take(3);
        int apiPort = ports[0];
        int managementPort = ports[1];
        grpcPort = ports[2];

        // Removed in stopImage(): without Ryuk nothing else would.
        imageName = "etserve-it/service:" + Long.toHexString(System.nanoTime());
        ImageFromDockerfile image = new ImageFromDockerfile(imageName, false)
                // The repository root is the context; its .dockerignore keeps it to sources and the jar.
                .withDockerfile(root.resolve("Dockerfile"))
                .withBuildArg("APP_JAR_SOURCE", "prebuilt")
                .withBuildArg("BUILD_BASE", BUILD_BASE)
                .withBuildArg("RUNTIME_BASE", RUNTIME_BASE)
                .withBuildImageCmdModifier(cmd -> cmd.withNetworkMode("host"));

        service = new GenericContainer<>(image)
                .withNetworkMode("host")
                .withEnv("SERVER_PORT", Integer.toString(apiPort))
                .withEnv("MANAGEMENT_SERVER_PORT", Integer.toString(managementPort))
                .withEnv("ETSERVE_GRPC_PORT", Integer.toString(grpcPort))
                // exec: JavaCPP and the CUDA delegate load libraries they write under /tmp.
                .withTmpFs(Map.of("/tmp", "rw,exec,nosuid,nodev,size=512m,mode=1777"))
                .withCreateContainerCmdModifier(cmd -> cmd.getHostConfig().withReadonlyRootfs(true))
                .waitingFor(new ReadinessProbe(managementPort).withStartupTimeout(STARTUP_TIMEOUT));
        service.start();
        api = Http.local(apiPort);
        management = Http.local(managementPort);
    }

    @AfterAll
    static void stopImage() {
        if (service != null) {
            service.stop();
        }
        if (imageName != null) {
            DockerClient docker = DockerClientFactory.instance().client();
            try {
                docker.removeImageCmd(imageName).withForce(true).exec();
            } catch (NotFoundException e) {
                // The build failed before tagging it.
            }
            // The build stage's image is left untagged by every build: drop ours, nothing else.
            docker.pruneCmd(PruneType.IMAGES).withDangling(true).withLabelFilter("io.etserve.stage=app").exec();
        }
    }

    @Test
    void probesAnswerUp() {
        for (String probe : List.of("/actuator/health/liveness", "/actuator/health/readiness")) {
            Http.Response r = management.get(probe);
            assertEquals(200, r.status(), probe + ": " + r.text());
            assertEquals("UP", r.json().path("status").asString(), probe + ": " + r.text());
        }
        Http.Response ready = api.get("/v2/health/ready");
        assertEquals(200, ready.status(), "/v2/health/ready: " + ready.text());
    }

    @Test
    void inferenceMatchesTheExportedReference() {
        Reference reference = Reference.load(TestPaths.demoModels().resolve(MODEL + "/1/reference.json"));
        Reference.Case first = reference.cases().get(0);

        ObjectNode request = Http.JSON.createObjectNode();
        ArrayNode inputs = request.putArray("inputs");
        for (Reference.TensorValue input : first.inputs()) {
            inputs.add(input.json());
        }
        Http.Response r = api.post("/v2/models/" + MODEL + "/infer", request.toString());
        assertEquals(200, r.status(), r.text());

        JsonNode outputs = r.json().path("outputs");
        assertEquals(first.outputs().size(), outputs.size(), r.text());
        for (Reference.TensorValue expected : first.outputs()) {
            JsonNode actual = outputNamed(outputs, expected.name());
            assertEquals(expected.datatype(), actual.path("datatype").asString(), r.text());
            assertEquals(expected.json().path("shape"), actual.path("shape"), r.text());
            JsonNode data = actual.path("data");
            assertEquals(expected.data().size(), data.size(), r.text());
            List<String> mismatches = new ArrayList<>();
            for (int i = 0; i < data.size(); i++) {
                double want = expected.data().get(i);
                double got = data.get(i).asDouble();
                if (!reference.close(got, want)) {
                    mismatches.add("[" + i + "] " + got + " != " + want);
                }
            }
            assertTrue(mismatches.isEmpty(), expected.name() + " outside atol=" + reference.atol() + " rtol="
                    + reference.rtol() + ": " + mismatches);
        }
    }

    @Test
    void grpcServesTheSameModelWithRawTensors() throws Exception {
        Reference reference = Reference.load(TestPaths.demoModels().resolve(MODEL + "/1/reference.json"));
        Reference.Case first = reference.cases().get(0);
        ManagedChannel channel = Grpc.newChannelBuilderForAddress("127.0.0.1", grpcPort,
                InsecureChannelCredentials.create()).build();
        try {
            var stub = GRPCInferenceServiceGrpc.newBlockingStub(channel)
                    .withDeadlineAfter(60, TimeUnit.SECONDS);
            assertTrue(stub.serverReady(ServerReadyRequest.getDefaultInstance()).getReady());
            var request = ModelInferRequest.newBuilder().setModelName(MODEL);
            for (Reference.TensorValue input : first.inputs()) {
                request.addInputsBuilder().setName(input.name()).setDatatype(input.datatype())
                        .addAllShape(Arrays.stream(input.shape()).boxed().toList());
                request.addRawInputContents(ByteString.copyFrom(input.bytes()));
            }
            var response = stub.modelInfer(request.build());
            Reference.TensorValue expected = first.outputs().get(0);
            ByteBuffer got = response.getRawOutputContents(0).asReadOnlyByteBuffer()
                    .order(ByteOrder.LITTLE_ENDIAN);
            assertEquals(expected.data().size() * 4, got.remaining());
            for (int i = 0; i < expected.data().size(); i++) {
                assertTrue(reference.close(got.getFloat(i * 4), expected.data().get(i)),
                        "[" + i + "] " + got.getFloat(i * 4) + " != " + expected.data().get(i));
            }
        } finally {
            channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        }
    }

    @Test
    void runsAsNonRootOnAReadOnlyRootFileSystem() throws Exception {
        ExecResult uid = service.execInContainer("id", "-u");
        assertEquals("10001", uid.getStdout().strip(), uid.getStderr());

        ExecResult write = service.execInContainer("touch", "/opt/etserve/probe");
        assertNotEquals(0, write.getExitCode(), "the root file system accepted a write");
        assertTrue(write.getStderr().contains("Read-only file system"), write.getStderr());

        ExecResult tmp = service.execInContainer("touch", "/tmp/probe");
        assertEquals(0, tmp.getExitCode(), tmp.getStderr());
    }

    @Test
    void loadsTheNativeLibrariesTheImageShips() throws Exception {
        // ETSERVE_NATIVE_LIBRARY_DIR names /opt/etserve/native: nothing may be extracted to /tmp.
        ExecResult extracted = service.execInContainer("test", "-e", "/tmp/etserve-native");
        assertNotEquals(0, extracted.getExitCode(),
                "the service extracted its libraries to /tmp instead of loading /opt/etserve/native");
        ExecResult listed = service.execInContainer("cat", "/opt/etserve/native/libraries.txt");
        assertTrue(listed.getStdout().contains("libetserve_jni.so"), listed.getStdout());
    }

    @Test
    void runsTheFirstCallTrialAsTheServicesUser() throws Exception {
        String trial = "/opt/etserve/native/etserve-first-call";
        ExecResult healthy = service.execInContainer(trial, "--program", "/models/demo-xnnpack/1/model.pte",
                "--method", "forward");
        assertEquals(0, healthy.getExitCode(), healthy.getStderr());
        // Through the exec's arguments: /tmp is a tmpfs, which the engine's copy does not reach.
        String faults = Base64.getEncoder().encodeToString(Files.readAllBytes(
                TestPaths.repoRoot().resolve("src/test/resources/corrupt/op-index-out-of-range.pte")));
        ExecResult written = service.execInContainer("bash", "-c", "base64 -d <<<\"$1\" > /tmp/faults.pte", "_", faults);
        assertEquals(0, written.getExitCode(), written.getStderr());
        ExecResult faulting = service.execInContainer(trial, "--program", "/tmp/faults.pte", "--method", "forward");
        assertEquals(128 + 11, faulting.getExitCode(), "expected SIGSEGV: " + faulting.getStderr());
        assertFalse(service.getLogs().contains("has no etserve-first-call"), service.getLogs());
    }

    @Test
    void startsFromTheAotCacheItsTrainingRunMade() throws Exception {
        // The image's training run (scripts/aot-training.sh) served inference calls; had it failed,
        // the image would start without a cache, and only slower.
        ExecResult args = service.execInContainer("cat", "/opt/etserve/jvm.args");
        assertTrue(args.getStdout().contains("-XX:AOTCache=/opt/etserve/app.aot"), args.getStdout());
        // the cache holds the classes: the jar's preloading threads would only cost CPU
        assertTrue(args.getStdout().contains("-Detserve.startup.preload-threads=0"), args.getStdout());
        // reflection through native accessors: the start's hundreds of first calls spin no classes
        assertTrue(args.getStdout().contains("-Djdk.reflect.useNativeAccessorOnly=true"), args.getStdout());
        ExecResult cache = service.execInContainer("test", "-s", "/opt/etserve/app.aot");
        assertEquals(0, cache.getExitCode(), "no AOT cache in the image");
        ExecResult script = service.execInContainer("test", "-e", "/opt/etserve/aot-training.sh");
        assertNotEquals(0, script.getExitCode(), "the training script was left in the image");
    }

    @Test
    void startsFromTheContextGeneratedAtBuild() {
        // Spring AOT mode (jvm.args): the settings the test passes (ports) keep the build's beans,
        // so the context generated with the jar is the one serving (AotFixedSettings).
        String logs = service.getLogs();
        assertTrue(logs.contains("Starting from the context generated at build time"), logs);
        assertFalse(logs.contains("Not using the context generated"), logs);
    }

    private static JsonNode outputNamed(JsonNode outputs, String name) {
        for (JsonNode o : outputs) {
            if (name.equals(o.path("name").asString())) {
                return o;
            }
        }
        throw new AssertionError("no output named " + name + " in " + outputs);
    }

    /**
     * Fails at once when a base image is not in the engine: Testcontainers would otherwise try
     * to pull it, retrying for minutes against a registry that may not be reachable.
     */
    private static void requireLocalImage(String name) {
        try {
            DockerClientFactory.instance().client().inspectImageCmd(name).exec();
        } catch (NotFoundException e) {
            fail("Base image " + name + " is not in the engine: make the local ones with `.ci/base-images.sh`"
                    + " (or pull it first)");
        }
    }

    /** The jar failsafe names, which must be the one the Dockerfile's prebuilt path copies. */
    private static void requirePackagedJar(Path root) {
        String property = System.getProperty("etserve.test.jar");
        if (property == null) {
            fail("System property etserve.test.jar is not set (failsafe sets it to the packaged jar)");
        }
        Path jar = Path.of(property).toAbsolutePath().normalize();
        if (!Files.isRegularFile(jar)) {
            fail("No packaged jar at " + jar + ": run `mvn package` first");
        }
        if (!jar.getParent().equals(root.resolve("target")) || !jar.getFileName().toString().startsWith("etserve-")) {
            fail("The image is built from target/etserve-*.jar in " + root + ", but etserve.test.jar is " + jar);
        }
    }

    /**
     * Polls the readiness probe on the host's loopback: with host networking there are no mapped
     * ports for Testcontainers' own HTTP wait strategy. Fails at once when the container exits.
     */
    private static final class ReadinessProbe extends AbstractWaitStrategy {
        private final Http management;

        ReadinessProbe(int managementPort) {
            this.management = Http.local(managementPort);
        }

        @Override
        protected void waitUntilReady() {
            Instant deadline = Instant.now().plus(startupTimeout);
            String last = "no answer";
            while (Instant.now().isBefore(deadline)) {
                if (!waitStrategyTarget.isRunning()) {
                    throw new IllegalStateException("the container exited before it was ready; its log:\n"
                            + waitStrategyTarget.getLogs());
                }
                try {
                    Http.Response r = management.get("/actuator/health/readiness");
                    if (r.status() == 200) {
                        return;
                    }
                    last = r.status() + " " + r.text();
                } catch (UncheckedIOException e) {
                    last = e.getCause().toString();
                }
                try {
                    Thread.sleep(500);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new IllegalStateException(e);
                }
            }
            throw new IllegalStateException("not ready within " + startupTimeout + " (last: " + last + "); its log:\n"
                    + waitStrategyTarget.getLogs());
        }
    }
}
