package io.etserve.rest;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.grpc.GrpcServer;
import io.etserve.grpc.protocol.GRPCInferenceServiceGrpc;
import io.etserve.grpc.protocol.RepositoryModelLoadRequest;
import io.etserve.grpc.protocol.RepositoryModelUnloadRequest;
import io.etserve.repository.ModelRegistry;
import io.etserve.support.Http;
import io.etserve.support.InlineCalls;
import io.etserve.support.ModelActivity;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.Reference;
import io.etserve.support.TestPaths;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.assertj.core.api.Assertions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import tools.jackson.databind.JsonNode;

/** Triton's repository extension in explicit mode, over real HTTP on the real runtime. */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class RepositoryApiTest {

    static final ModelRepositoryFixture REPO = ModelRepositoryFixture.create("etserve-repository-")
            .copy(TestPaths.demoModels(), "demo-portable")
            .copy(TestPaths.demoModels(), "demo-portable", "rollout")
            .withProgramBytes("broken", new byte[] {1, 2, 3, 4, 5, 6, 7, 8})
            .withSlowProbe("slow")
            .withSlowProbe("straggler");

    @DynamicPropertySource
    static void properties(DynamicPropertyRegistry r) {
        r.add("etserve.model-repository", () -> REPO.root().toString());
        r.add("etserve.native.extra-libraries", () -> TestPaths.probeDelegate().toString());
        InlineCalls.offForRest(r);
        r.add("etserve.repository.mode", () -> "explicit");
        r.add("management.server.port", () -> "0");
    }

    @Value("${local.server.port}")
    int port;

    @Autowired
    ModelRegistry registry;

    Http http;

    @BeforeEach
    void client() {
        http = Http.local(port);
    }

    static String probe(float hostMillis) {
        return "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[2],\"data\":[0," + hostMillis + "]}]}";
    }

    String demoRequest() {
        Reference ref = Reference.load(TestPaths.demoModels().resolve("demo-xnnpack/1/reference.json"));
        return "{\"inputs\":[" + ref.cases().get(0).inputs().get(0).json() + "]}";
    }

    List<String> index(boolean readyOnly) {
        Http.Response r = http.post("/v2/repository/index", readyOnly ? "{\"ready\": true}" : "");
        assertThat(r.status()).as(r.text()).isEqualTo(200);
        List<String> rows = new ArrayList<>();
        for (JsonNode e : r.json()) {
            rows.add(e.path("name").asString() + "/" + e.path("version").asString() + " " + e.path("state").asString());
        }
        return rows;
    }

    /** The index's rows of {@code model}, as JSON text (one row: that row). */
    String indexRow(String model) {
        List<String> rows = new ArrayList<>();
        for (JsonNode e : http.post("/v2/repository/index", "").json()) {
            if (e.path("name").asString().equals(model)) {
                rows.add(e.toString());
            }
        }
        return String.join(",", rows);
    }

    @Test
    void theIndexListsEveryVersionWithItsState() {
        assertThat(index(false)).contains("demo-portable/1 READY", "broken/1 FAILED", "slow/1 READY");
        assertThat(index(true)).contains("demo-portable/1 READY").doesNotContain("broken/1 FAILED");
        JsonNode broken = null;
        for (JsonNode e : http.post("/v2/repository/index", "").json()) {
            if (e.path("name").asString().equals("broken")) {
                broken = e;
            }
        }
        assertThat(broken.path("reason").asString()).contains("cannot load").doesNotContain(REPO.root().toString());
        // As Triton's clients send it: a JSON body without a Content-Type.
        Http.Response untyped = http.post("/v2/repository/index",
                "{\"ready\": true}".getBytes(java.nio.charset.StandardCharsets.UTF_8), java.util.Map.of());
        assertThat(untyped.status()).as(untyped.text()).isEqualTo(200);
        assertThat(untyped.text()).contains("demo-portable").doesNotContain("broken");
        assertThat(http.post("/v2/repository/index", "[true]").status()).isEqualTo(400);
    }

    @Test
    void unloadLetsTheRequestInFlightFinishThenTheModelIsGone() throws Exception {
        assertThat(http.post("/v2/models/slow/infer", probe(0)).status()).isEqualTo(200);
        CompletableFuture<Http.Response> inFlight = CompletableFuture.supplyAsync(
                () -> http.post("/v2/models/slow/infer", probe(1500)));
        ModelActivity.awaitNoIdleInstance(registry, "slow");  // the request runs
        long t0 = System.nanoTime();
        Http.Response unload = http.post("/v2/repository/models/slow/unload", "");
        long tookMs = (System.nanoTime() - t0) / 1_000_000;
        assertThat(unload.status()).as(unload.text()).isEqualTo(200);
        assertThat(tookMs).as("unload waited for the request in flight").isGreaterThan(500);
        assertThat(inFlight.get(10, TimeUnit.SECONDS).status()).isEqualTo(200);
        assertThat(http.post("/v2/models/slow/infer", probe(0)).status()).isEqualTo(404);
        // listed by its name only, as Triton lists a repository model that is not loaded
        assertThat(indexRow("slow")).isEqualTo("{\"name\":\"slow\"}");
        assertThat(index(true)).noneMatch(row -> row.startsWith("slow/"));
        assertThat(http.post("/v2/repository/models/slow/unload", "").status()).isEqualTo(404);

        // ... and loads again from its directory
        assertThat(http.post("/v2/repository/models/slow/load", "").status()).isEqualTo(200);
        assertThat(http.post("/v2/models/slow/infer", probe(0)).status()).isEqualTo(200);
    }

    @Test
    void aRequestThatOutlivesItsVersionsUnloadLeavesNoSeriesBehind(@Value("${local.management.port}") int mgmt)
            throws Exception {
        assertThat(http.post("/v2/models/straggler/infer", probe(0)).status()).isEqualTo(200);
        CompletableFuture<Http.Response> inFlight = CompletableFuture.supplyAsync(
                () -> http.post("/v2/models/straggler/infer", probe(1500)));
        ModelActivity.awaitNoIdleInstance(registry, "straggler");
        registry.setDrainTimeout(java.time.Duration.ofMillis(200));
        try {
            assertThat(http.post("/v2/repository/models/straggler/unload", "").status()).isEqualTo(200);
        } finally {
            registry.setDrainTimeout(java.time.Duration.ofSeconds(30));
        }
        assertThat(inFlight.get(10, TimeUnit.SECONDS).status()).as("the request still ends").isEqualTo(200);
        Thread.sleep(200);  // its metrics are written before it gives the version back, then the version goes
        String prom = Http.local(mgmt).get("/actuator/prometheus").text();
        assertThat(prom.lines().filter(l -> l.startsWith("nv_") && l.contains("model=\"straggler\"")).toList())
                .as("no series of the unloaded version written back by its last request").isEmpty();

        assertThat(http.post("/v2/repository/models/straggler/load", "").status()).isEqualTo(200);
        prom = Http.local(mgmt).get("/actuator/prometheus").text();
        assertThat(prom.lines().filter(l -> l.startsWith("nv_inference_pending_request_count")
                && l.contains("model=\"straggler\"")).toList()).singleElement()
                .satisfies(l -> assertThat(l).endsWith(" 0.0"));
    }

    @Test
    void aModelAddedToTheRepositoryLoadsOnRequestAndServesItsReference() throws Exception {
        assertThat(http.post("/v2/models/late/infer", demoRequest()).status()).isEqualTo(404);
        REPO.copy(TestPaths.demoModels(), "demo-xnnpack", "late");
        assertThat(indexRow("late")).as("found in the repository before it is loaded").isEqualTo("{\"name\":\"late\"}");
        Http.Response load = http.post("/v2/repository/models/late/load", "");
        assertThat(load.status()).as(load.text()).isEqualTo(200);
        Http.Response r = http.post("/v2/models/late/infer", demoRequest());
        assertThat(r.status()).as(r.text()).isEqualTo(200);
        Reference ref = Reference.load(TestPaths.demoModels().resolve("demo-xnnpack/1/reference.json"));
        JsonNode data = r.json().path("outputs").get(0).path("data");
        List<Double> want = ref.cases().get(0).outputs().get(0).data();
        for (int i = 0; i < want.size(); i++) {
            assertThat(ref.close(data.get(i).asDouble(), want.get(i))).isTrue();
        }
        // reloading a model that serves replaces it without a gap in what the index shows
        assertThat(http.post("/v2/repository/models/demo-portable/load", "").status()).isEqualTo(200);
        assertThat(index(true)).contains("demo-portable/1 READY", "late/1 READY");
    }

    private static int answered(Map<Integer, AtomicInteger> statuses) {
        return statuses.values().stream().mapToInt(AtomicInteger::get).sum();
    }

    @Test
    void reloadsUnderLoadLoseNoRequest() throws Exception {
        // demo-portable's reference input (the same program as demo-xnnpack's inputs: [1, 16] FP32)
        Reference ref = Reference.load(TestPaths.demoModels().resolve("demo-portable/1/reference.json"));
        String request = "{\"inputs\":[" + ref.cases().get(0).inputs().get(0).json() + "]}";
        AtomicBoolean running = new AtomicBoolean(true);
        Map<Integer, AtomicInteger> statuses = new ConcurrentHashMap<>();
        AtomicInteger retryAfterMissing = new AtomicInteger();
        List<CompletableFuture<Void>> clients = new ArrayList<>();
        for (int c = 0; c < 4; c++) {
            clients.add(CompletableFuture.runAsync(() -> {
                Http client = Http.local(port);
                while (running.get()) {
                    Http.Response r = client.post("/v2/models/demo-portable/infer", request);
                    statuses.computeIfAbsent(r.status(), k -> new AtomicInteger()).incrementAndGet();
                    if (r.status() == 503 && r.header("Retry-After") == null) {
                        retryAfterMissing.incrementAndGet();
                    }
                }
            }));
        }
        try {
            // At least five reloads, and on until the clients have had 21 answers while they go on
            // (however slow the machine): requests keep being served through the reloads.
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            for (int i = 0; i < 5 || answered(statuses) <= 20; i++) {
                assertThat(System.nanoTime()).as("answers during reloads: %s", statuses).isLessThan(until);
                Thread.sleep(150);
                assertThat(http.post("/v2/repository/models/demo-portable/load", "").status()).isEqualTo(200);
            }
            Thread.sleep(150);
        } finally {
            running.set(false);
        }
        CompletableFuture.allOf(clients.toArray(CompletableFuture[]::new)).get(30, TimeUnit.SECONDS);
        // every answer is a result: a request that found the version being replaced runs on what
        // replaced it; never a 503, a 404, a 500 or a lost connection
        assertThat(statuses.keySet()).as("statuses %s", statuses).containsOnly(200);
        assertThat(retryAfterMissing.get()).isZero();
    }

    @Test
    void grpcUnloadsAndLoadsLikeRest(@Autowired GrpcServer server)
            throws Exception {
        REPO.copy(TestPaths.demoModels(), "demo-portable", "via-grpc");
        ManagedChannel channel = Grpc.newChannelBuilderForAddress("127.0.0.1", server.port(),
                InsecureChannelCredentials.create()).build();
        try {
            var stub = GRPCInferenceServiceGrpc.newBlockingStub(channel)
                    .withDeadlineAfter(30, TimeUnit.SECONDS);
            stub.repositoryModelLoad(RepositoryModelLoadRequest.newBuilder()
                    .setModelName("via-grpc").build());
            assertThat(index(true)).contains("via-grpc/1 READY");
            stub.repositoryModelUnload(RepositoryModelUnloadRequest.newBuilder()
                    .setModelName("via-grpc").build());
            assertThat(indexRow("via-grpc")).isEqualTo("{\"name\":\"via-grpc\"}");
            assertThat(stub.repositoryIndex(io.etserve.grpc.protocol.RepositoryIndexRequest.getDefaultInstance())
                    .getModelsList()).filteredOn(m -> m.getName().equals("via-grpc")).singleElement()
                    .satisfies(m -> assertThat(m.getVersion() + m.getState() + m.getReason()).isEmpty());
            StatusRuntimeException missing = (StatusRuntimeException)
                    Assertions.catchThrowable(() -> stub.repositoryModelUnload(
                            RepositoryModelUnloadRequest.newBuilder().setModelName("via-grpc").build()));
            assertThat(missing.getStatus().getCode()).isEqualTo(Status.Code.NOT_FOUND);
        } finally {
            channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        }
    }

    @Test
    void aNewVersionThatFailsIsRefusedWhileTheOneBeforeItServesOn() throws Exception {
        Path v2 = Files.createDirectories(REPO.root().resolve("rollout/2"));
        Files.writeString(v2.resolve("model.pte"), "not a program");
        Http.Response load = http.post("/v2/repository/models/rollout/load", "");
        assertThat(load.status()).as(load.text()).isEqualTo(400);
        assertThat(load.json().path("error").asString()).contains("failed to load 'rollout' version 2: ",
                "(version 1 answers for the model)");
        assertThat(index(false)).contains("rollout/1 READY", "rollout/2 FAILED");
        assertThat(http.get("/v2/models/rollout/ready").status()).isEqualTo(200);
        Http.Response r = http.post("/v2/models/rollout/infer", demoRequest());
        assertThat(r.status()).as(r.text()).isEqualTo(200);
        assertThat(r.json().path("model_version").asString()).isEqualTo("1");
    }

    @Test
    void loadRefusalsSayWhy() {
        Http.Response missing = http.post("/v2/repository/models/no-such-dir/load", "");
        assertThat(missing.status()).isEqualTo(404);
        assertThat(missing.json().path("error").asString()).contains("no model directory");
        Http.Response broken = http.post("/v2/repository/models/broken/load", "");
        assertThat(broken.status()).isEqualTo(400);
        assertThat(broken.json().path("error").asString()).contains("failed to load 'broken'");
        assertThat(http.post("/v2/repository/models/..%2F..%2Fetc/load", "").status()).isIn(400, 404);
    }

    @Test
    void repositoryBodiesAreSmallPlainJson() {
        // Over the limit: 413, by the declared length or by what arrives (these bodies are read
        // into memory; a large one once took the heap).
        byte[] large = new byte[RepositoryController.MAX_BODY_BYTES + 1];
        java.util.Arrays.fill(large, (byte) ' ');
        for (String path : new String[] {"/v2/repository/index", "/v2/repository/models/demo-portable/load",
                "/v2/repository/models/demo-portable/unload"}) {
            Http.Response r = http.post(path, large, Map.of("Content-Type", "application/json"));
            assertThat(r.status()).as(path).isEqualTo(413);
            assertThat(r.json().path("error").asString()).as(path).contains("at most 1 MiB");
        }
        // A content coding is refused, not ignored.
        Http.Response coded = http.post("/v2/repository/models/demo-portable/load", "{}".getBytes(),
                Map.of("Content-Type", "application/json", "Content-Encoding", "br"));
        assertThat(coded.status()).isEqualTo(415);
        // Fields of the wrong kind are refused rather than read as absent.
        Http.Response ready = http.post("/v2/repository/index", "{\"ready\": \"yes\"}");
        assertThat(ready.status()).isEqualTo(400);
        assertThat(ready.json().path("error").asString()).contains("ready must be true or false");
        Http.Response notJson = http.post("/v2/repository/models/demo-portable/unload", "xx");
        assertThat(notJson.status()).isEqualTo(400);
        assertThat(notJson.json().path("error").asString()).contains("unload request's body is not valid JSON");
        Http.Response parameters = http.post("/v2/repository/models/demo-portable/unload", "{\"parameters\": 3}");
        assertThat(parameters.status()).isEqualTo(400);
        // Nothing above unloaded the model; Triton's own unload body still does.
        assertThat(http.get("/v2/models/demo-portable/ready").status()).isEqualTo(200);
        assertThat(http.post("/v2/repository/models/demo-portable/unload",
                "{\"parameters\": {\"unload_dependents\": false}}").status()).isEqualTo(200);
        assertThat(http.get("/v2/models/demo-portable/ready").status()).isNotEqualTo(200);
        assertThat(http.post("/v2/repository/models/demo-portable/load", "").status()).isEqualTo(200);
        assertThat(http.get("/v2/models/demo-portable/ready").status()).isEqualTo(200);
    }
}
