package io.etserve.rest;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.execution.ExecutionSlot;
import io.etserve.execution.LoadedModel;
import io.etserve.repository.ModelRegistry;
import io.etserve.support.Http;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.Reference;
import io.etserve.support.TestPaths;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Programs exported with unplanned inputs and outputs, served over real HTTP: ExecuTorch reads
 * the request's pooled buffers in place and writes into the response's (docs/large-tensors.md).
 * Answers against eager PyTorch's references, JSON and binary, concurrent and batched.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class UnplannedProgramsApiTest {

    static final ModelRepositoryFixture REPO = ModelRepositoryFixture.create("etserve-unplanned-")
            .copy(TestPaths.testModels(), "unplanned-affine")
            .copy(TestPaths.testModels(), "unplanned-passthrough")
            .copy(TestPaths.testModels(), "unplanned-dynamic-batch")
            .copy(TestPaths.testModels(), "unplanned-dynamic-batch", "unplanned-batched")
            .withFile("unplanned-batched/config.yml", "inputs: [ { name: x, dims: [-1, 16] } ]\noutputs: [ { name: y } ]\n"
                    + "dynamic-batching: { max-batch-size: 32, max-queue-delay: 10s, preferred-batch-sizes: [8] }\n")
            .copy(TestPaths.testModels(), "unplanned-affine", "affine-caller-thread")
            .withFile("affine-caller-thread/config.yml", "inputs: [ { name: x } ]\noutputs: [ { name: y } ]\ninstances: 2\n"
                    + "cpu-threadpool: false\n");

    @DynamicPropertySource
    static void properties(DynamicPropertyRegistry r) {
        r.add("etserve.model-repository", () -> REPO.root().toString());
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

    static Reference reference(String model) {
        return Reference.load(TestPaths.testModels().resolve(model + "/1/reference.json"));
    }

    @Test
    void everyOutputOfEveryCaseMatchesPyTorchOverJson() {
        for (String model : List.of("unplanned-affine", "unplanned-passthrough", "unplanned-dynamic-batch")) {
            Reference ref = reference(model);
            for (Reference.Case c : ref.cases()) {
                Http.Response r = http.postJson("/v2/models/" + model + "/infer",
                        Map.of("inputs", c.inputs().stream().map(ProtocolApiTest::jsonInput).toList()));
                assertThat(r.status()).as(model + ": " + r.text()).isEqualTo(200);
                for (int o = 0; o < c.outputs().size(); o++) {
                    ProtocolApiTest.assertMatches(ref, c.outputs().get(o), r.json().path("outputs").get(o));
                }
            }
        }
    }

    @Test
    void aModelOffTheCpuThreadpoolLoadsEveryInstanceSoAndAnswersAsPyTorch() throws Exception {
        LoadedModel served = registry.serving("affine-caller-thread", null);
        List<ExecutionSlot> slots = new ArrayList<>();
        try {
            for (int i = 0; i < served.instances().capacity(); i++) {
                slots.add(served.instances().acquire(java.time.Duration.ofSeconds(10)));
            }
            assertThat(slots).hasSize(2).allSatisfy(s -> assertThat(s.instance().cpuThreadpool()).isFalse());
        } finally {
            slots.forEach(ExecutionSlot::close);
        }
        assertThat(registry.serving("unplanned-affine", null).instances().acquire(java.time.Duration.ofSeconds(10)))
                .satisfies(s -> {
                    try (s) {
                        assertThat(s.instance().cpuThreadpool()).as("the default").isTrue();
                    }
                });
        Reference ref = reference("unplanned-affine");
        for (Reference.Case c : ref.cases()) {
            Http.Response r = http.postJson("/v2/models/affine-caller-thread/infer",
                    Map.of("inputs", c.inputs().stream().map(ProtocolApiTest::jsonInput).toList()));
            assertThat(r.status()).as(r.text()).isEqualTo(200);
            for (int o = 0; o < c.outputs().size(); o++) {
                ProtocolApiTest.assertMatches(ref, c.outputs().get(o), r.json().path("outputs").get(o));
            }
        }
    }

    @Test
    void dimensionsTheProgramCannotTakeAreTheClientsMistakeAndNeverOpenTheBreaker() {
        // Both dimensions are dynamic, but the graph needs 16 columns: XNNPACK fails to propagate
        // [2, 8] at execute. That is a 400, however often a client sends it, and the model serves on.
        String wrong = "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[2,8],\"data\":["
                + String.join(",", java.util.Collections.nCopies(16, "1")) + "]}]}";
        for (int i = 0; i < 8; i++) {
            Http.Response r = http.post("/v2/models/unplanned-dynamic-batch/infer", wrong);
            assertThat(r.status()).as(r.text()).isEqualTo(400);
            assertThat(r.text()).contains("rejected the input").contains("do not fit the program");
        }
        assertThat(http.get("/v2/models/unplanned-dynamic-batch/ready").status()).isEqualTo(200);
        Reference.Case c = reference("unplanned-dynamic-batch").cases().get(0);
        Http.Response good = http.postJson("/v2/models/unplanned-dynamic-batch/infer",
                Map.of("inputs", c.inputs().stream().map(ProtocolApiTest::jsonInput).toList()));
        assertThat(good.status()).as(good.text()).isEqualTo(200);
    }

    @Test
    void binaryTensorsInAndOutFromFourClientsAtOnceEachGetTheirOwnAnswer() throws Exception {
        Reference ref = reference("unplanned-affine");
        ExecutorService clients = Executors.newFixedThreadPool(4);
        try {
            List<Future<Integer>> done = new ArrayList<>();
            for (int t = 0; t < 4; t++) {
                int first = t;
                done.add(clients.submit(() -> {
                    for (int i = 0; i < 40; i++) {
                        Reference.Case c = ref.cases().get((first + i) % ref.cases().size());
                        assertBinaryAnswer(ref, c, binaryInfer(c));
                    }
                    return 40;
                }));
            }
            for (Future<Integer> f : done) {
                assertThat(f.get(60, TimeUnit.SECONDS)).isEqualTo(40);
            }
        } finally {
            clients.shutdownNow();
        }
    }

    @Test
    void oneRowRequestsBatchedIntoOneCallEachGetTheirOwnRows() throws Exception {
        Reference ref = reference("unplanned-dynamic-batch");
        Reference.Case one = ref.cases().get(1);
        assertThat(one.inputs().get(0).shape()[0]).isEqualTo(1);
        ExecutorService clients = Executors.newFixedThreadPool(8);
        try {
            List<Future<Http.Response>> answers = new ArrayList<>();
            for (int i = 0; i < 8; i++) {
                answers.add(clients.submit(() -> http.postJson("/v2/models/unplanned-batched/infer",
                        Map.of("inputs", one.inputs().stream().map(ProtocolApiTest::jsonInput).toList()))));
            }
            for (Future<Http.Response> a : answers) {
                Http.Response r = a.get(20, TimeUnit.SECONDS);
                assertThat(r.status()).as(r.text()).isEqualTo(200);
                ProtocolApiTest.assertMatches(ref, one.outputs().get(0), r.json().path("outputs").get(0));
            }
        } finally {
            clients.shutdownNow();
        }
    }

    private Http.Response binaryInfer(Reference.Case c) {
        Reference.TensorValue x = c.inputs().get(0);
        int bytes = x.data().size() * 4;
        byte[] json = ("{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":" + java.util.Arrays.toString(x.shape())
                + ",\"parameters\":{\"binary_data_size\":" + bytes + "}}],"
                + "\"outputs\":[{\"name\":\"y\",\"parameters\":{\"binary_data\":true}}]}").getBytes(StandardCharsets.UTF_8);
        ByteBuffer body = ByteBuffer.allocate(json.length + bytes).order(ByteOrder.LITTLE_ENDIAN).put(json);
        x.data().forEach(v -> body.putFloat(v.floatValue()));
        return http.post("/v2/models/unplanned-affine/infer", body.array(), Map.of(
                "Content-Type", "application/octet-stream", "Inference-Header-Content-Length", Integer.toString(json.length)));
    }

    private static void assertBinaryAnswer(Reference ref, Reference.Case c, Http.Response r) {
        assertThat(r.status()).as(r.text()).isEqualTo(200);
        int header = Integer.parseInt(r.header("Inference-Header-Content-Length"));
        List<Double> want = c.outputs().get(0).data();
        assertThat(r.body().length - header).isEqualTo(want.size() * 4);
        ByteBuffer got = ByteBuffer.wrap(r.body(), header, want.size() * 4).slice().order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < want.size(); i++) {
            double v = got.getFloat(i * 4);
            assertThat(ref.close(v, want.get(i))).as("element %d: %s against %s", i, v, want.get(i)).isTrue();
        }
    }
}
