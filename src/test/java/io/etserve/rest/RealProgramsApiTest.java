package io.etserve.rest;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.support.Http;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.Reference;
import io.etserve.support.TestPaths;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import tools.jackson.databind.JsonNode;

/** Programs as users export them, served over real HTTP: weights in .ptd files, a dynamic batch. */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class RealProgramsApiTest {

    static final ModelRepositoryFixture REPO = ModelRepositoryFixture.create("etserve-real-")
            .copy(TestPaths.testModels(), "external-weights-portable")
            .copy(TestPaths.testModels(), "external-weights-xnnpack")
            .copy(TestPaths.testModels(), "dynamic-batch")
            .copy(TestPaths.testModels(), "mobilenet-v3-small")
            .copy(TestPaths.demoModels(), "demo-portable")
            .withProgramBytes("weights-missing", program("external-weights-portable"))
            .copy(TestPaths.testModels(), "dynamic-batch", "batch-dims")
            .withFile("batch-dims/config.yml", "inputs: [ { name: x, dims: [-1, 16] } ]\noutputs: [ { name: y } ]\n")
            .copy(TestPaths.testModels(), "dynamic-batch", "dims-rank")
            .withFile("dims-rank/config.yml", "inputs: [ { name: x, dims: [-1] } ]\n")
            .copy(TestPaths.testModels(), "dynamic-batch", "dims-over-bound")
            .withFile("dims-over-bound/config.yml", "inputs: [ { name: x, dims: [-1, 17] } ]\n")
            .copy(TestPaths.demoModels(), "demo-portable", "dims-on-static")
            .withFile("dims-on-static/config.yml", "inputs: [ { name: x, dims: [-1, 16] } ]\n")
            .copy(TestPaths.testModels(), "dynamic-batch", "warmed-up")
            .withFile("warmed-up/config.yml", "inputs: [ { name: x } ]\noutputs: [ { name: y } ]\ninstances: 2\nwarmup: { samples: 2, data: random }\n")
            .copy(TestPaths.demoModels(), "demo-xnnpack", "warmed-up-static")
            .withFile("warmed-up-static/config.yml", "inputs: [ { name: x } ]\nwarmup: 3\n")
            // Warm-up files are request bodies, read by the server's own decoder and contract.
            .copy(TestPaths.testModels(), "dynamic-batch", "warmed-up-file")
            .withFile("warmed-up-file/config.yml", "inputs: [ { name: x } ]\noutputs: [ { name: y } ]\nwarmup: { samples: 2, file: warmup.json }\n")
            .withFile("warmed-up-file/1/warmup.json", "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\","
                    + "\"shape\":[2,16],\"data\":[" + "0.5,".repeat(31) + "0.5]}]}")
            .copy(TestPaths.testModels(), "dynamic-batch", "warm-up-file-misfits")
            .withFile("warm-up-file-misfits/config.yml", "inputs: [ { name: x } ]\nwarmup: { samples: 1, file: warmup.json }\n")
            .withFile("warm-up-file-misfits/1/warmup.json", "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP64\","
                    + "\"shape\":[1,16],\"data\":[" + "0,".repeat(15) + "0]}]}")
            // data-files: a listed file under any name, instead of the *.ptd scan
            .copy(TestPaths.testModels(), "external-weights-portable", "listed-data")
            .withFile("listed-data/config.yml", "inputs: [ { name: x } ]\noutputs: [ { name: y } ]\n"
                    + "data-files: [ weights.bin ]\n")
            .copy(TestPaths.testModels(), "external-weights-portable", "listed-missing")
            .withFile("listed-missing/config.yml", "inputs: [ { name: x } ]\noutputs: [ { name: y } ]\n"
                    + "data-files: [ other.ptd ]\n")
            // Eight one-row requests make one forward call (a 10 s delay if they did not).
            .copy(TestPaths.testModels(), "dynamic-batch", "batched")
            .withFile("batched/config.yml", "inputs: [ { name: x, dims: [-1, 16] } ]\noutputs: [ { name: y } ]\n"
                    + "dynamic-batching: { max-batch-size: 32, max-queue-delay: 10s, preferred-batch-sizes: [8] }\n")
            .copy(TestPaths.testModels(), "external-weights-portable", "listed-escape")
            .withFile("listed-escape/config.yml", "data-files: [ ../../etc/passwd ]\n");

    static {
        try {
            Files.move(REPO.root().resolve("listed-data/1/_default_external_constant.ptd"),
                    REPO.root().resolve("listed-data/1/weights.bin"));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static byte[] program(String model) {
        try {
            return Files.readAllBytes(TestPaths.testModels().resolve(model + "/1/model.pte"));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    @DynamicPropertySource
    static void properties(DynamicPropertyRegistry r) {
        r.add("etserve.model-repository", () -> REPO.root().toString());
        r.add("management.server.port", () -> "0");
    }

    @Value("${local.server.port}")
    int port;

    @Value("${local.management.port}")
    int managementPort;

    Http http;

    @BeforeEach
    void client() {
        http = Http.local(port);
    }

    void assertServesTheReference(String model) {
        assertServesTheReference(model, model);
    }

    void assertServesTheReference(String served, String model) {
        Reference ref = Reference.load(TestPaths.testModels().resolve(model + "/1/reference.json"));
        for (Reference.Case c : ref.cases()) {
            Http.Response r = http.postJson("/v2/models/" + served + "/infer",
                    Map.of("inputs", c.inputs().stream().map(ProtocolApiTest::jsonInput).toList()));
            assertThat(r.status()).as(r.text()).isEqualTo(200);
            ProtocolApiTest.assertMatches(ref, c.outputs().get(0), r.json().path("outputs").get(0));
        }
    }

    @Test
    void concurrentRequestsShareOneForwardCallAndEachGetsItsOwnRows() throws Exception {
        Reference ref = Reference.load(TestPaths.testModels().resolve("dynamic-batch/1/reference.json"));
        Reference.Case one = ref.cases().get(1);  // one row
        assertThat(one.inputs().get(0).shape()[0]).isEqualTo(1);
        ExecutorService clients = Executors.newFixedThreadPool(8);
        try {
            List<Future<Http.Response>> answers = new ArrayList<>();
            for (int i = 0; i < 8; i++) {
                answers.add(clients.submit(() -> http.postJson("/v2/models/batched/infer",
                        Map.of("inputs", one.inputs().stream().map(ProtocolApiTest::jsonInput).toList()))));
            }
            for (Future<Http.Response> a : answers) {
                Http.Response r = a.get(20, TimeUnit.SECONDS);
                assertThat(r.status()).as(r.text()).isEqualTo(200);
                assertThat(r.json().path("outputs").get(0).path("shape").toString()).isEqualTo("[1,4]");
                ProtocolApiTest.assertMatches(ref, one.outputs().get(0), r.json().path("outputs").get(0));
            }
        } finally {
            clients.shutdownNow();
        }
        String prom = Http.local(managementPort).get("/actuator/prometheus").text();
        assertThat(prom).contains("nv_inference_request_success{model=\"batched\",version=\"1\"} 8.0")
                .contains("nv_inference_count{model=\"batched\",version=\"1\"} 8.0")
                .contains("nv_inference_exec_count{model=\"batched\",version=\"1\"} 1.0")
                .contains("etserve_inference_batch_size_rows_count{model=\"batched\",version=\"1\"} 1")
                .contains("etserve_inference_batch_size_rows_bucket{model=\"batched\",version=\"1\",le=\"8.0\"} 1");
    }

    @Test
    void programsWithTheirWeightsInAPtdMatchPyTorch() {
        assertServesTheReference("external-weights-portable");
        assertServesTheReference("external-weights-xnnpack");
    }

    @Test
    void dataFilesListedInConfigReplaceTheScanAndStayInTheVersionDirectory() {
        assertServesTheReference("listed-data", "external-weights-portable");
        Http.Response missing = http.get("/v2/models/listed-missing/ready");
        assertThat(missing.status()).isEqualTo(503);
        assertThat(missing.json().path("reason").asString()).contains("other.ptd");
        Http.Response escape = http.get("/v2/models/listed-escape/ready");
        assertThat(escape.status()).isEqualTo(503);
        assertThat(escape.json().path("reason").asString()).contains("plain file name");
    }

    @Test
    void warmedUpModelsAreReadyAndServe() {
        for (String model : List.of("warmed-up", "warmed-up-static")) {
            assertThat(http.get("/v2/models/" + model + "/ready").status()).as(model).isEqualTo(200);
        }
        Reference ref = Reference.load(TestPaths.testModels().resolve("dynamic-batch/1/reference.json"));
        Reference.Case c = ref.cases().get(0);
        Http.Response r = http.postJson("/v2/models/warmed-up/infer",
                Map.of("inputs", c.inputs().stream().map(ProtocolApiTest::jsonInput).toList()));
        assertThat(r.status()).as(r.text()).isEqualTo(200);
        ProtocolApiTest.assertMatches(ref, c.outputs().get(0), r.json().path("outputs").get(0));
    }

    @Test
    void aWarmUpFileIsReadAsAClientsRequestAndOneThatDoesNotFitFailsTheLoadWithTheClientsMessage() {
        assertThat(http.get("/v2/models/warmed-up-file/ready").status()).isEqualTo(200);
        assertServesTheReference("warmed-up-file", "dynamic-batch");
        Http.Response misfit = http.get("/v2/models/warm-up-file-misfits/ready");
        assertThat(misfit.status()).isEqualTo(503);
        assertThat(misfit.json().path("reason").asString())
                .contains("warm-up file warmup.json: input 'x' must be FP32, got FP64");
        // The client who sends the same body hears the same words.
        Http.Response client = http.post("/v2/models/warmed-up-file/infer", "{\"inputs\":[{\"name\":\"x\","
                + "\"datatype\":\"FP64\",\"shape\":[1,16],\"data\":[" + "0,".repeat(15) + "0]}]}");
        assertThat(client.status()).isEqualTo(400);
        assertThat(client.json().path("error").asString()).contains("input 'x' must be FP32, got FP64");
    }

    @Test
    void anImageSizedCnnMatchesPyTorch() {
        JsonNode m = http.get("/v2/models/mobilenet-v3-small").json();
        assertThat(m.path("inputs").get(0).path("shape").toString()).isEqualTo("[1,3,224,224]");
        assertServesTheReference("mobilenet-v3-small");
    }

    @Test
    void aProgramWithoutItsPtdFailsWithAReasonAndTheRestServe() {
        Http.Response ready = http.get("/v2/models/weights-missing/ready");
        assertThat(ready.status()).isEqualTo(503);
        assertThat(ready.json().path("reason").asString()).contains("cannot load method 'forward'").contains(".ptd");
        assertThat(http.get("/v2/models/external-weights-portable/ready").status()).isEqualTo(200);
        assertThat(http.get("/v2/health/ready").status()).isEqualTo(200);
    }

    @Test
    void aDynamicBatchIsMinusOneInMetadataAndRunsInsideItsBound() {
        JsonNode m = http.get("/v2/models/dynamic-batch").json();
        assertThat(m.path("inputs").toString()).isEqualTo("[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[-1,-1]}]");
        assertThat(m.path("outputs").get(0).path("shape").toString()).isEqualTo("[-1,-1]");
        assertServesTheReference("dynamic-batch");  // batches 3, 1 and 32, shapes per call
        // A static model keeps its exact shape.
        assertThat(http.get("/v2/models/demo-portable").json().path("inputs").get(0).path("shape").toString())
                .isEqualTo("[1,16]");
    }

    @Test
    void outsideTheBoundIs400NamingTheInputAndTheBound() {
        Http.Response tooBig = http.postJson("/v2/models/dynamic-batch/infer", Map.of("inputs", List.of(
                Map.of("name", "x", "datatype", "FP32", "shape", List.of(33, 16), "data", new float[33 * 16]))));
        assertThat(tooBig.status()).isEqualTo(400);
        assertThat(tooBig.json().path("error").asString()).contains("'x'").contains("dimension 0").contains("33")
                .contains("bound 32");
        Http.Response empty = http.postJson("/v2/models/dynamic-batch/infer", Map.of("inputs", List.of(
                Map.of("name", "x", "datatype", "FP32", "shape", List.of(0, 16), "data", new float[0]))));
        assertThat(empty.status()).isEqualTo(400);
        Http.Response staticWrong = http.postJson("/v2/models/demo-portable/infer", Map.of("inputs", List.of(
                Map.of("name", "x", "datatype", "FP32", "shape", List.of(1, 8), "data", new float[8]))));
        assertThat(staticWrong.status()).isEqualTo(400);
        assertThat(staticWrong.json().path("error").asString()).contains("'x'").contains("must be 16");
        assertThat(http.get("/v2/health/ready").status()).isEqualTo(200);
    }

    @Test
    void configDimsSayWhichDimensionsOfADynamicInputVary() {
        JsonNode m = http.get("/v2/models/batch-dims").json();
        assertThat(m.path("inputs").get(0).path("shape").toString()).isEqualTo("[-1,16]");
        Http.Response three = http.postJson("/v2/models/batch-dims/infer", Map.of("inputs", List.of(
                Map.of("name", "x", "datatype", "FP32", "shape", List.of(3, 16), "data", new float[3 * 16]))));
        assertThat(three.status()).as(three.text()).isEqualTo(200);
        // The feature dimension is fixed now: a narrower one is refused before execution.
        Http.Response narrow = http.postJson("/v2/models/batch-dims/infer", Map.of("inputs", List.of(
                Map.of("name", "x", "datatype", "FP32", "shape", List.of(3, 8), "data", new float[3 * 8]))));
        assertThat(narrow.status()).isEqualTo(400);
        assertThat(narrow.json().path("error").asString()).contains("dimension 1 must be 16");

        assertThat(http.get("/v2/models/dims-rank/ready").json().path("reason").asString())
                .contains("have 1 dimensions; the method's input has 2");
        assertThat(http.get("/v2/models/dims-over-bound/ready").json().path("reason").asString())
                .contains("over the program's bound 16");
        assertThat(http.get("/v2/models/dims-on-static/ready").json().path("reason").asString())
                .contains("is static in the program");
    }
}
