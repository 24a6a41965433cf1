package io.etserve.rest;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.repository.ModelRegistry;
import io.etserve.support.Http;
import io.etserve.support.InlineCalls;
import io.etserve.support.ModelActivity;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.Reference;
import io.etserve.support.TestPaths;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import tools.jackson.databind.JsonNode;

/**
 * Zero-downtime versions in the poll mode (500 ms, as an operator runs it), over real HTTP on the
 * real runtime while three clients call the model without a version: a version 2 that is half
 * written, corrupt, written slowly or good, beside a version 1 that serves. Every scenario runs
 * under {@code version-policy: { latest: 1 }} and under the default (all versions). A version that
 * fails never answers for the model: not one 5xx (no 503 either), the model and the service stay
 * ready, and the failure shows in the repository index, the metric and the {@code models} health
 * component.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class VersionRolloutApiTest {

    static final List<String> SCENARIOS = List.of("half", "corrupt", "good", "slow");
    static final ModelRepositoryFixture REPO = repository();
    static final byte[] PROGRAM = read(TestPaths.demoModels().resolve("demo-xnnpack/1/model.pte"));

    static ModelRepositoryFixture repository() {
        ModelRepositoryFixture repo = ModelRepositoryFixture.create("etserve-versions-");
        for (String scenario : SCENARIOS) {
            repo.copy(TestPaths.demoModels(), "demo-xnnpack", scenario + "-all");
            repo.copy(TestPaths.demoModels(), "demo-xnnpack", scenario + "-latest");
            try {
                Files.writeString(repo.root().resolve(scenario + "-latest/config.yml"), "version-policy: { latest: 1 }\n",
                        StandardOpenOption.APPEND);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
        // the caller-stream probe holds its one instance as long as asked: a request in flight on
        // version 1 while version 2 takes over
        repo.withSlowProbe("drain-latest").withFile("drain-latest/config.yml", "inputs: [ { name: x } ]\n"
                + "outputs: [ { name: observed } ]\ninstances: 1\nversion-policy: { latest: 1 }\n");
        return repo;
    }

    @DynamicPropertySource
    static void properties(DynamicPropertyRegistry r) {
        r.add("etserve.model-repository", () -> REPO.root().toString());
        r.add("etserve.native.extra-libraries", () -> TestPaths.probeDelegate().toString());
        InlineCalls.offForRest(r);
        r.add("etserve.repository.mode", () -> "poll");
        r.add("etserve.repository.poll-interval", () -> "500ms");
        r.add("management.server.port", () -> "0");
    }

    @Value("${local.server.port}")
    int port;

    @Autowired
    ModelRegistry registry;

    @Value("${local.management.port}")
    int managementPort;

    static final String REQUEST;

    static {
        Reference ref = Reference.load(TestPaths.demoModels().resolve("demo-xnnpack/1/reference.json"));
        REQUEST = "{\"inputs\":[" + ref.cases().get(0).inputs().get(0).json() + "]}";
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"latest", "all"})
    void aHalfWrittenVersionFailsBesideTheOneThatServesThenTakesOverOnceComplete(String policy) throws Exception {
        String m = "half-" + policy;
        try (Traffic traffic = new Traffic(m)) {
            Thread.sleep(700);
            Path v2 = Files.createDirectories(REPO.root().resolve(m + "/2"));
            Files.write(v2.resolve("model.pte"), Arrays.copyOf(PROGRAM, PROGRAM.length / 2));
            // the half file stops changing for longer than a poll interval: it is loaded, and fails
            await(() -> "FAILED".equals(state(m, "2")), "version 2 FAILED in the index");
            Failure seen = failureSeen(m, "2");
            Thread.sleep(1000);
            Files.write(v2.resolve("model.pte"), Arrays.copyOfRange(PROGRAM, PROGRAM.length / 2, PROGRAM.length),
                    StandardOpenOption.APPEND);
            await(() -> traffic.versions.containsKey("2"), "answers from version 2");
            Thread.sleep(500);
            traffic.stop();

            traffic.assertNoFailure();
            seen.assertVisible();
            assertThat(traffic.versions).containsOnlyKeys("1", "2");
            assertThat(traffic.wentBack.get()).as("a client answered by 2 was then answered by 1").isZero();
            assertThat(state(m, "2")).isEqualTo("READY");
            assertThat(loadFailedGauge(m, "2")).isEqualTo("0.0");
            await(() -> policy.equals("latest") ? state(m, "1") == null : "READY".equals(state(m, "1")),
                    "version 1 " + (policy.equals("latest") ? "gone" : "still READY"));
        }
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"latest", "all"})
    void aCorruptVersionNeverAnswersAndIsNotRetriedWhileItsFilesStayTheSame(String policy) throws Exception {
        String m = "corrupt-" + policy;
        try (Traffic traffic = new Traffic(m)) {
            Thread.sleep(700);
            byte[] corrupt = PROGRAM.clone();
            for (int i = 64; i < Math.min(corrupt.length, 4096); i += 5) {
                corrupt[i] = (byte) 0x5A;
            }
            publish(m, "2", corrupt);
            await(() -> "FAILED".equals(state(m, "2")), "version 2 FAILED in the index");
            Failure seen = failureSeen(m, "2");
            // it stays as it is over many poll intervals: the service keeps serving version 1
            Thread.sleep(3000);
            assertThat(state(m, "2")).isEqualTo("FAILED");
            assertThat(state(m, "1")).isEqualTo("READY");
            traffic.stop();

            traffic.assertNoFailure();
            seen.assertVisible();
            assertThat(traffic.versions).containsOnlyKeys("1");
            // a version addressed by number is that version: 2 did not load
            assertThat(Http.local(port).post("/v2/models/" + m + "/versions/2/infer", REQUEST).status()).isEqualTo(503);
        }
        // the broken version taken away: its row and its metric go, version 1 serves on
        deleteTree(REPO.root().resolve(m + "/2"));
        await(() -> state(m, "2") == null, "version 2 gone from the index");
        assertThat(loadFailedGauge(m, "2")).isNull();
        assertThat(Http.local(port).post("/v2/models/" + m + "/infer", REQUEST).status()).isEqualTo(200);
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"latest", "all"})
    void aGoodVersionPublishedByRenameTakesOverWithoutAGap(String policy) throws Exception {
        String m = "good-" + policy;
        try (Traffic traffic = new Traffic(m)) {
            Thread.sleep(700);
            publish(m, "2", PROGRAM);
            await(() -> traffic.versions.containsKey("2"), "answers from version 2");
            Thread.sleep(500);
            traffic.stop();

            traffic.assertNoFailure();
            assertThat(traffic.versions).containsOnlyKeys("1", "2");
            assertThat(traffic.wentBack.get()).as("a client answered by 2 was then answered by 1").isZero();
            assertThat(state(m, "2")).isEqualTo("READY");
            if (policy.equals("latest")) {
                // version 1 drained and freed: gone from the index and from the metrics
                await(() -> state(m, "1") == null, "version 1 gone from the index");
                assertThat(prometheus()).doesNotContainPattern(
                        "nv_inference_request_success\\{model=\"" + m + "\",version=\"1\"\\}");
            } else {
                assertThat(state(m, "1")).isEqualTo("READY");
            }
        }
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"latest", "all"})
    void aVersionWrittenSlowlyLoadsOnlyOnceItsFilesStopChanging(String policy) throws Exception {
        String m = "slow-" + policy;
        Seen seenStates = new Seen();
        AtomicBoolean watching = new AtomicBoolean(true);
        CountDownLatch polling = new CountDownLatch(1);
        // Its own thread, polling before the first byte is written: the common pool may have one
        // worker on a small machine, and a watcher that starts late sees nothing.
        ExecutorService watcherThread = Executors.newSingleThreadExecutor();
        CompletableFuture<Void> watcher = CompletableFuture.runAsync(() -> {
            while (watching.get()) {
                String s = state(m, "2");
                if (s != null) {
                    seenStates.add(s);
                }
                polling.countDown();
                sleep(25);
            }
        }, watcherThread);
        try (Traffic traffic = new Traffic(m)) {
            assertThat(polling.await(10, TimeUnit.SECONDS)).as("the state watcher runs").isTrue();
            Thread.sleep(700);
            Path v2 = Files.createDirectories(REPO.root().resolve(m + "/2"));
            // 500 bytes every 200 ms (a 500 ms poll interval): never still for one interval until done
            for (int off = 0; off < PROGRAM.length; off += 500) {
                Files.write(v2.resolve("model.pte"), Arrays.copyOfRange(PROGRAM, off, Math.min(PROGRAM.length, off + 500)),
                        off == 0 ? new StandardOpenOption[] {StandardOpenOption.CREATE_NEW}
                                : new StandardOpenOption[] {StandardOpenOption.APPEND});
                Thread.sleep(200);
            }
            await(() -> traffic.versions.containsKey("2"), "answers from version 2");
            // The clients can reach version 2 between two of the watcher's polls: let it look once more.
            await(() -> seenStates.values().contains("READY"), "the watcher sees version 2 ready");
            traffic.stop();
            traffic.assertNoFailure();
        } finally {
            watching.set(false);
            watcher.get(10, TimeUnit.SECONDS);
            watcherThread.shutdown();
        }
        assertThat(seenStates.values()).as("states version 2 went through").containsOnly("READY");
        assertThat(state(m, "2")).isEqualTo("READY");
    }

    @Test
    void theOldVersionDrainsItsRequestInFlightWhileTheNewOneAnswers() throws Exception {
        String m = "drain-latest";
        Http http = Http.local(port);
        assertThat(http.post("/v2/models/" + m + "/infer", probe(0)).status()).isEqualTo(200);
        CompletableFuture<Http.Response> inFlight = CompletableFuture.supplyAsync(
                () -> http.post("/v2/models/" + m + "/infer", probe(4000)));
        ModelActivity.awaitNoIdleInstance(registry, m);  // version 1 runs it
        publish(m, "2", read(REPO.root().resolve(m + "/1/model.pte")));
        await(() -> "READY".equals(state(m, "2")), "version 2 READY");
        Http.Response next = http.post("/v2/models/" + m + "/infer", probe(0));
        assertThat(next.status()).as(next.text()).isEqualTo(200);
        assertThat(next.json().path("model_version").asString()).isEqualTo("2");
        assertThat(inFlight.isDone()).as("version 1's request still runs while 2 answers").isFalse();
        Http.Response drained = inFlight.get(30, TimeUnit.SECONDS);
        assertThat(drained.status()).as(drained.text()).isEqualTo(200);
        assertThat(drained.json().path("model_version").asString()).isEqualTo("1");
        await(() -> state(m, "1") == null, "version 1 gone from the index once drained");
    }

    // ---------------------------------------------------------------------------------------------

    /** What a failed version looked like from the outside, seen while it was FAILED. */
    record Failure(String indexReason, String gauge, String healthStatus, String componentStatus, String componentReason) {
        void assertVisible() {
            assertThat(indexReason).as("index reason").isNotBlank();
            assertThat(gauge).as("etserve_model_load_failed").isEqualTo("1.0");
            assertThat(healthStatus).as("readiness").isEqualTo("UP");
            assertThat(componentStatus).as("models component, the failed version").isEqualTo("FAILED");
            assertThat(componentReason).as("models component, its reason").isNotBlank();
        }
    }

    Failure failureSeen(String model, String version) {
        JsonNode row = indexRow(model, version);
        JsonNode health = Http.local(managementPort).get("/actuator/health/readiness").json();
        JsonNode component = health.path("components").path("models").path("details").path("models")
                .path(model + ":" + version);
        return new Failure(row == null ? null : row.path("reason").asString(), loadFailedGauge(model, version),
                health.path("status").asString(), component.path("status").asString(null),
                component.path("reason").asString(null));
    }

    void publish(String model, String version, byte[] program) throws IOException {
        // the documented way: write elsewhere in the same file system, then rename into place
        Path staging = Files.createDirectories(REPO.root().resolve(model + "/.staging-" + version));
        Files.write(staging.resolve("model.pte"), program);
        Files.move(staging, REPO.root().resolve(model + "/" + version), StandardCopyOption.ATOMIC_MOVE);
    }

    JsonNode indexRow(String model, String version) {
        Http.Response r = Http.local(port).post("/v2/repository/index", "{}");
        assertThat(r.status()).as(r.text()).isEqualTo(200);
        for (JsonNode e : r.json()) {
            if (e.path("name").asString().equals(model) && e.path("version").asString().equals(version)) {
                return e;
            }
        }
        return null;
    }

    String state(String model, String version) {
        JsonNode row = indexRow(model, version);
        return row == null ? null : row.path("state").asString();
    }

    String prometheus() {
        return Http.local(managementPort).get("/actuator/prometheus").text();
    }

    /** The value of etserve_model_load_failed for a version, null without such a series. */
    String loadFailedGauge(String model, String version) {
        Matcher line = Pattern.compile("(?m)^etserve_model_load_failed\\{([^}]*)\\} (\\S+)$").matcher(prometheus());
        while (line.find()) {
            if (line.group(1).contains("model=\"" + model + "\"") && line.group(1).contains("version=\"" + version + "\"")) {
                return line.group(2);
            }
        }
        return null;
    }

    static String probe(float hostMillis) {
        return "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[2],\"data\":[0," + hostMillis + "]}]}";
    }

    static void await(BooleanSupplier done, String what) throws InterruptedException {
        for (long end = System.nanoTime() + 20_000_000_000L; System.nanoTime() < end; Thread.sleep(50)) {
            if (done.getAsBoolean()) {
                return;
            }
        }
        throw new AssertionError("timed out waiting for " + what);
    }

    static byte[] read(Path p) {
        try {
            return Files.readAllBytes(p);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    static void deleteTree(Path dir) throws IOException {
        try (var files = Files.walk(dir)) {
            files.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        }
    }

    /** A thread-safe set of strings, in the order first seen. */
    static final class Seen {
        private final Set<String> values = Collections.synchronizedSet(new LinkedHashSet<>());

        void add(String s) {
            values.add(s);
        }

        List<String> values() {
            synchronized (values) {
                return new ArrayList<>(values);
            }
        }
    }

    /**
     * Three clients calling the model without a version, and a prober of the model's readiness
     * and the service's (actuator readiness), until stopped.
     */
    final class Traffic implements AutoCloseable {
        final Map<String, AtomicInteger> versions = new ConcurrentHashMap<>();
        final Map<Integer, AtomicInteger> statuses = new ConcurrentHashMap<>();
        final List<String> failures = Collections.synchronizedList(new ArrayList<>());
        final AtomicInteger wentBack = new AtomicInteger();
        final Map<String, AtomicInteger> probes = new ConcurrentHashMap<>();
        private final AtomicBoolean running = new AtomicBoolean(true);
        private final List<CompletableFuture<Void>> threads = new ArrayList<>();
        private final ExecutorService pool = Executors.newFixedThreadPool(4);

        Traffic(String model) {
            for (int c = 0; c < 3; c++) {
                threads.add(CompletableFuture.runAsync(() -> {
                    Http client = Http.local(port);
                    long newest = 0;
                    while (running.get()) {
                        Http.Response r = client.post("/v2/models/" + model + "/infer", REQUEST);
                        statuses.computeIfAbsent(r.status(), k -> new AtomicInteger()).incrementAndGet();
                        if (r.status() != 200) {
                            if (failures.size() < 3) {
                                failures.add(r.status() + " " + r.text().substring(0, Math.min(200, r.text().length())));
                            }
                            continue;
                        }
                        String v = r.json().path("model_version").asString();
                        versions.computeIfAbsent(v, k -> new AtomicInteger()).incrementAndGet();
                        if (Long.parseLong(v) < newest) {
                            wentBack.incrementAndGet();
                        }
                        newest = Math.max(newest, Long.parseLong(v));
                    }
                }, pool));
            }
            threads.add(CompletableFuture.runAsync(() -> {
                Http http = Http.local(port);
                Http mgmt = Http.local(managementPort);
                while (running.get()) {
                    count("model ready " + http.get("/v2/models/" + model + "/ready").status());
                    count("service ready " + http.get("/v2/health/ready").status());
                    count("actuator readiness " + mgmt.get("/actuator/health/readiness").status());
                    sleep(50);
                }
            }, pool));
        }

        private void count(String what) {
            probes.computeIfAbsent(what, k -> new AtomicInteger()).incrementAndGet();
        }

        void stop() throws Exception {
            running.set(false);
            CompletableFuture.allOf(threads.toArray(CompletableFuture[]::new)).get(30, TimeUnit.SECONDS);
            pool.shutdown();
        }

        void assertNoFailure() {
            assertThat(statuses.keySet()).as("answers %s, first failures %s", new TreeMap<>(statuses), failures)
                    .containsOnly(200);
            assertThat(statuses.get(200).get()).isGreaterThan(50);
            assertThat(probes.keySet()).as("probes %s", new TreeMap<>(probes))
                    .containsOnly("model ready 200", "service ready 200", "actuator readiness 200");
        }

        @Override
        public void close() throws Exception {
            stop();
        }
    }
}
