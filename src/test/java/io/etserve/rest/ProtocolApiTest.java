package io.etserve.rest;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.support.Http;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.RawConnection;
import io.etserve.support.Reference;
import io.etserve.support.TestPaths;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.eclipse.jetty.server.AbstractConnector;
import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.Handler;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.server.handler.StatisticsHandler;
import org.eclipse.jetty.util.thread.Invocable;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.jetty.JettyWebServer;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.web.server.context.WebServerApplicationContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import org.springframework.test.context.TestPropertySource;
import tools.jackson.databind.JsonNode;

/**
 * The Open Inference Protocol over real HTTP, on the real runtime, with a repository that
 * mixes good models and broken ones.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
// What these tests ask of the selector is whether quick calls run there, not where the default
// threshold falls: on a loaded runner demo-xnnpack's recent calls can average above 250us, and
// none would run there. RequestThreadProtocolApiTest's dynamic properties still set it to 0.
@TestPropertySource(properties = "etserve.http.inline-below=20ms")
class ProtocolApiTest {

    static final ModelRepositoryFixture REPO = ModelRepositoryFixture.create("etserve-api-")
            .copy(TestPaths.demoModels(), "demo-portable")
            .copy(TestPaths.demoModels(), "demo-xnnpack")
            .copy(TestPaths.testModels(), "dtypes")
            .copy(TestPaths.testModels(), "two-inputs")
            .copy(TestPaths.testModels(), "caller-stream-probe")
            .copy(TestPaths.testModels(), "needs-tensorrt")
            .copy(TestPaths.testModels(), "needs-cuda-backend")
            .withBrokenModels(TestPaths.demoModels().resolve("demo-portable/1/model.pte"))
            .withFile("bad name!/1/model.pte", "skipped: not a valid model name");

    @DynamicPropertySource
    static void properties(DynamicPropertyRegistry r) {
        r.add("etserve.model-repository", () -> REPO.root().toString());
        r.add("management.server.port", () -> "0");
        r.add("etserve.native.extra-libraries", () -> TestPaths.probeDelegate().toString());
        r.add("etserve.inference.max-request-size", () -> "1MB");
        r.add("etserve.inference.max-elements-per-tensor", () -> "100000");
    }

    @Value("${local.server.port}")
    int port;

    @Value("${local.management.port}")
    int managementPort;

    @Autowired
    CoreInference core;

    @Autowired
    WebServerApplicationContext context;

    Http http;

    @BeforeEach
    void client() {
        http = Http.local(port);
    }

    /**
     * How Jetty calls the public port's handlers: non-blocking (by default, {@code inline-below}
     * set: quick calls may run on the selector).
     */
    Invocable.InvocationType expectedInvocationType() {
        return Invocable.InvocationType.NON_BLOCKING;
    }

    /**
     * Quick calls of several connections ran on the selector since {@code before}, the resuming
     * pool serves the rest, and there is a selector per core (by default).
     */
    void assertSelectorServed(long before) {
        assertThat(core.servedOnSelector()).isGreaterThan(before);
        Server server = ((JettyWebServer) context.getWebServer()).getServer();
        assertThat(server.getThreadPool()).isInstanceOf(ResumingThreadPool.class);
        assertThat(((ServerConnector) server.getConnectors()[0]).getSelectorManager().getSelectorCount())
                .isEqualTo(Runtime.getRuntime().availableProcessors());
    }

    @Test
    void quickCallsOfBusyConnectionsRunOnTheSelectorAndMatchTheReference() throws Exception {
        Reference ref = Reference.load(TestPaths.demoModels().resolve("demo-xnnpack/1/reference.json"));
        for (Reference.Case c : ref.cases()) {  // its forward calls' recent times make it quick
            assertThat(postBinary("demo-xnnpack", binaryRequest(c.inputs(), List.of("y"))).status()).isEqualTo(200);
        }
        long before = core.servedOnSelector();
        // More connections than selectors (at most one per core), each sending before any reads: a
        // selector takes a request right after another connection's, which is when it keeps one.
        List<RawConnection> clients = new ArrayList<>();
        try {
            for (int i = 0; i < 2 * Runtime.getRuntime().availableProcessors() + 1; i++) {
                clients.add(RawConnection.open(port, 10_000));
            }
            for (int round = 0; round < 5; round++) {
                for (Reference.Case c : ref.cases()) {
                    String json = Http.JSON.writeValueAsString(
                            Map.of("inputs", c.inputs().stream().map(ProtocolApiTest::jsonInput).toList()));
                    for (RawConnection client : clients) {
                        client.send(RawConnection.post("/v2/models/demo-xnnpack/infer", json));
                    }
                    for (RawConnection client : clients) {
                        RawConnection.Response r = client.read();
                        assertThat(r.status()).as(r.text()).isEqualTo(200);
                        assertMatches(ref, c.outputs().get(0), Http.JSON.readTree(r.text()).path("outputs").get(0));
                    }
                }
            }
        } finally {
            for (RawConnection client : clients) {
                client.close();
            }
        }
        assertSelectorServed(before);
    }

    @Test
    void theUsualCallIsServedThroughJettysCoreApiAndMatchesTheReference() throws Exception {
        Server server = ((JettyWebServer) context.getWebServer()).getServer();
        assertThat(server.getInvocationType()).isEqualTo(expectedInvocationType());
        // The server's settings applied once, whichever customizer came first (config's classes
        // are package-private: by name).
        assertThat(server.getDescendants(InferHandler.class)).hasSize(1);
        assertThat(server.getDescendants(Handler.class).stream()
                .filter(h -> h.getClass().getSimpleName().equals("EarlyRefusals"))).hasSize(1);
        // Graceful shutdown's count of requests in progress sits in front of everything (the core
        // path included), in place of Jetty's StatisticsHandler.
        assertThat(server.getHandler().getClass().getSimpleName()).isEqualTo("ActiveRequests");
        assertThat(server.getDescendants(StatisticsHandler.class)).hasSize(1);
        for (Connector connector : server.getConnectors()) {
            assertThat(((AbstractConnector) connector).getBeans().stream()
                    .filter(b -> b.getClass().getSimpleName().equals("RequestHeadGuard"))).hasSize(1);
        }
        Reference ref = Reference.load(TestPaths.demoModels().resolve("demo-xnnpack/1/reference.json"));
        long before = core.served();
        try (RawConnection raw = RawConnection.open(port, 10_000)) {
            postEveryCaseInOneWrite(raw, ref);
            RawConnection.Response bad = raw.exchange(RawConnection.post("/v2/models/demo-xnnpack/infer", "{\"inputs\": ["));
            assertThat(bad.status()).isEqualTo(400);
            assertThat(Http.JSON.readTree(bad.text()).path("error").asString()).contains("not valid JSON");
            RawConnection.Response unknown = raw.exchange(RawConnection.post("/v2/models/nope/infer", "{\"inputs\": []}"));
            assertThat(unknown.status()).isEqualTo(404);
            assertThat(Http.JSON.readTree(unknown.text()).path("error").asString()).contains("nope");
        }
        assertThat(core.served() - before).isEqualTo(ref.cases().size() + 2L);
    }

    /**
     * Every reference case of demo-xnnpack as JSON, head and body in one write (one segment on
     * loopback), so the body comes with its head and the core path may serve it (HttpClient may
     * write the two apart: the other tests check answers, not which path gave them).
     */
    static void postEveryCaseInOneWrite(RawConnection raw, Reference ref) throws Exception {
        for (Reference.Case c : ref.cases()) {
            String json = Http.JSON.writeValueAsString(
                    Map.of("inputs", c.inputs().stream().map(ProtocolApiTest::jsonInput).toList()));
            RawConnection.Response r = raw.exchange(RawConnection.post("/v2/models/demo-xnnpack/infer", json));
            assertThat(r.status()).as(r.text()).isEqualTo(200);
            assertThat(r.header("Content-Type")).isEqualTo("application/json");
            assertMatches(ref, c.outputs().get(0), Http.JSON.readTree(r.text()).path("outputs").get(0));
        }
    }

    @Test
    void aBodyLargerThanOneReadTakesTheServletPathWhole() {
        Reference ref = Reference.load(TestPaths.demoModels().resolve("demo-xnnpack/1/reference.json"));
        Reference.Case c = ref.cases().get(0);
        String json = Http.JSON.writeValueAsString(
                Map.of("inputs", c.inputs().stream().map(ProtocolApiTest::jsonInput).toList()));
        // Valid JSON of 200 KB: whitespace before the closing brace, more than one 64 KB read.
        String padded = json.substring(0, json.length() - 1) + " ".repeat(200_000) + "}";
        long before = core.served();
        Http.Response r = http.post("/v2/models/demo-xnnpack/infer", padded.getBytes(StandardCharsets.UTF_8),
                Map.of("Content-Type", "application/json"));
        assertThat(r.status()).as(r.text()).isEqualTo(200);
        assertMatches(ref, c.outputs().get(0), r.json().path("outputs").get(0));
        assertThat(core.served()).isEqualTo(before);
    }

    static Map<String, Object> jsonInput(Reference.TensorValue t) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("name", t.name());
        m.put("datatype", t.datatype());
        m.put("shape", t.shape());
        m.put("data", t.json().path("data"));
        return m;
    }

    static void assertMatches(Reference ref, Reference.TensorValue expected, JsonNode output) {
        assertThat(output.path("name").asString()).isEqualTo(expected.name());
        assertThat(output.path("datatype").asString()).isEqualTo(expected.datatype());
        List<Long> shape = new ArrayList<>();
        output.path("shape").forEach(s -> shape.add(s.asLong()));
        assertThat(shape).containsExactly(Arrays.stream(expected.shape()).boxed().toArray(Long[]::new));
        JsonNode data = output.path("data");
        assertThat(data.size()).isEqualTo(expected.data().size());
        for (int i = 0; i < data.size(); i++) {
            double got = data.get(i).isBoolean() ? (data.get(i).asBoolean() ? 1 : 0) : data.get(i).asDouble();
            assertThat(ref.close(got, expected.data().get(i)))
                    .as("%s[%d]: %s vs %s", expected.name(), i, got, expected.data().get(i)).isTrue();
        }
    }

    @Test
    void serverMetadataAndHealth() {
        JsonNode meta = http.get("/v2").json();
        assertThat(meta.path("name").asString()).isEqualTo("etserve");
        assertThat(meta.path("extensions").toString()).contains("binary_tensor_data");
        assertThat(http.get("/v2/health/live").status()).isEqualTo(200);
        assertThat(http.get("/v2/health/ready").status()).isEqualTo(200);
    }

    /** Registration is off by default (as Triton's without --allow-client-shm); the status still answers. */
    @Test
    void sharedMemoryRegistrationIsOffByDefault() {
        Http.Response r = http.post("/v2/systemsharedmemory/region/r/register", "{\"key\":\"/k\",\"byte_size\":4}");
        assertThat(r.status()).isEqualTo(501);
        assertThat(http.post("/v2/systemsharedmemory/region/r/register", "not json").status())
                .as("off whatever the body holds").isEqualTo(501);
        assertThat(r.json().path("error").asString()).isEqualTo("Client shared memory is off: start the server with"
                + " etserve.shared-memory.enabled=true to register regions.");
        assertThat(http.get("/v2/systemsharedmemory/status").json().toString()).isEqualTo("[]");
        // CUDA shared memory too: none is listed, an unregister has nothing to do (Triton's tools
        // clean up with it).
        assertThat(http.get("/v2/cudasharedmemory/status").json().toString()).isEqualTo("[]");
        Http.Response cuda = http.post("/v2/cudasharedmemory/region/r/register", "{}");
        assertThat(cuda.status()).isEqualTo(501);
        assertThat(cuda.json().path("error").asString()).startsWith("Client shared memory is off");
        assertThat(http.post("/v2/cudasharedmemory/unregister", "").status()).isEqualTo(200);
        assertThat(http.get("/v2/cudasharedmemory/region/r/status").status()).isEqualTo(404);
    }

    /**
     * Requests refused before their body was read, whose body comes after the head (as Java's
     * HttpClient may send it): the body is read once answered, so the connection carries the
     * next request (Jetty closed such a connection without saying so, and the next request on it
     * was lost).
     */
    @Test
    void aRequestRefusedBeforeItsBodyKeepsItsConnectionUsable() throws IOException, InterruptedException {
        String json = "{\"key\":\"/k\",\"byte_size\":4}";
        String[][] cases = {
            {"/v2/systemsharedmemory/region/r/register", "application/json", "501"},
            {"/v2/cudasharedmemory/region/r/register", "application/json", "501"},
            {"/v2/no-such-endpoint", "application/json", "404"},
            {"/v2/health/live", "application/json", "405"},
            {"/v2/repository/index", "text/plain", "415"},
        };
        for (String[] c : cases) {
            String request = RawConnection.post(c[0], json).replace("application/json", c[1]);
            int split = request.indexOf("\r\n\r\n") + 4;
            try (RawConnection connection = RawConnection.open(port, 10_000)) {
                connection.send(request.substring(0, split));
                Thread.sleep(200);  // the head alone has arrived and is being answered
                connection.send(request.substring(split));
                assertThat(connection.read().status()).as(c[0]).isEqualTo(Integer.parseInt(c[2]));
                RawConnection.Response next = connection.exchange("GET /v2/health/live HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
                assertThat(next.status()).as(c[0] + ": the next request on the connection").isEqualTo(200);
            }
        }
    }

    @Test
    void modelMetadata() {
        JsonNode m = http.get("/v2/models/demo-portable").json();
        assertThat(m.path("name").asString()).isEqualTo("demo-portable");
        assertThat(m.path("platform").asString()).isEqualTo("executorch");
        assertThat(m.path("versions").toString()).isEqualTo("[\"1\"]");
        assertThat(m.path("inputs").toString()).isEqualTo("[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,16]}]");
        assertThat(m.path("outputs").toString()).isEqualTo("[{\"name\":\"y\",\"datatype\":\"FP32\",\"shape\":[1,4]}]");
        assertThat(http.get("/v2/models/demo-portable/versions/1").json()).isEqualTo(m);
        assertThat(http.get("/v2/models/dtypes").json().path("inputs").size()).isEqualTo(9);
    }

    @Test
    void unknownModelsAndVersionsAre404WithAnErrorBody() {
        for (String path : List.of("/v2/models/nope", "/v2/models/demo-portable/versions/7",
                "/v2/models/demo-portable/versions/abc", "/v2/models/..%2F..%2Fetc", "/v2/models/" + "x".repeat(300),
                "/v2/models/bad%20name!", "/v2/models/%E2%98%83/ready")) {
            Http.Response r = http.get(path);
            assertThat(r.status()).as(path).isIn(400, 404);
            if (r.status() == 404) {
                assertThat(r.json().path("error").asString()).as(path).isNotBlank();
            }
        }
        Http.Response infer = http.post("/v2/models/nope/infer", "{\"inputs\":[]}");
        assertThat(infer.status()).isEqualTo(404);
        assertThat(infer.json().path("error").asString()).contains("unknown model");
        // A name in any script reads back as sent (not as "?").
        assertThat(http.get("/v2/models/%E2%98%83/ready").json().path("error").asString()).contains("☃");
    }

    @Test
    void brokenModelsReportWhyAndTheRestServes() {
        for (String name : List.of("broken-corrupt", "broken-truncated", "broken-empty", "broken-text",
                "broken-config", "broken-noprogram", "broken-method")) {
            Http.Response ready = http.get("/v2/models/" + name + "/ready");
            assertThat(ready.status()).as(name).isEqualTo(503);
            assertThat(ready.json().path("ready").asBoolean()).isFalse();
            assertThat(ready.json().path("reason").asString()).as(name).isNotBlank();
            Http.Response infer = http.post("/v2/models/" + name + "/infer", "{\"inputs\":[]}");
            assertThat(infer.status()).as(name).isEqualTo(503);
            assertThat(infer.json().path("error").asString()).contains("not ready");
        }
        assertThat(http.get("/v2/models/broken-empty/ready").json().path("reason").asString()).contains("empty file");
        assertThat(http.get("/v2/models/broken-config/ready").json().path("reason").asString()).contains("config.yml");
        assertThat(http.get("/v2/models/broken-method/ready").json().path("reason").asString())
                .contains("no method 'nope'").contains("forward");
        assertThat(http.get("/v2/models/demo-portable/ready").json().path("ready").asBoolean()).isTrue();
        assertThat(http.get("/v2/health/ready").status()).isEqualTo(200);
    }

    @Test
    void gpuDelegateModelsAreNotReadyOnANodeWithoutCuda() {
        for (String model : List.of("needs-tensorrt", "needs-cuda-backend")) {
            Http.Response ready = http.get("/v2/models/" + model + "/ready");
            assertThat(ready.status()).isEqualTo(503);
            assertThat(ready.json().path("reason").asString()).as(model).contains("needs a CUDA device");
            // Its metadata is still there: the program loaded, it just cannot run here.
            assertThat(http.get("/v2/models/" + model).json().path("inputs").get(0).path("name").asString())
                    .isEqualTo("x");
            assertThat(http.post("/v2/models/" + model + "/infer", "{\"inputs\":[]}").status()).isEqualTo(503);
        }
        String readiness = Http.local(managementPort).get("/actuator/health/readiness").text();
        assertThat(readiness).contains("TensorRTBackend, which needs a CUDA device");
        // isBoolean first: a missing field would read false too.
        JsonNode tensorRtAvailable = Http.local(managementPort).get("/actuator/health/readiness").json()
                .path("components").path("cuda").path("details").path("tensorRt").path("available");
        assertThat(tensorRtAvailable.isBoolean()).as("tensorRt.available present").isTrue();
        assertThat(tensorRtAvailable.asBoolean()).isFalse();
    }

    @Test
    void bothDemoVariantsMatchThePyTorchReferenceOverJson() {
        for (String model : List.of("demo-portable", "demo-xnnpack")) {
            Reference ref = Reference.load(TestPaths.demoModels().resolve(model + "/1/reference.json"));
            for (Reference.Case c : ref.cases()) {
                Http.Response r = http.postJson("/v2/models/" + model + "/infer",
                        Map.of("id", "req-1", "inputs", c.inputs().stream().map(ProtocolApiTest::jsonInput).toList()));
                assertThat(r.status()).as(r.text()).isEqualTo(200);
                JsonNode body = r.json();
                assertThat(body.path("model_name").asString()).isEqualTo(model);
                assertThat(body.path("model_version").asString()).isEqualTo("1");
                assertThat(body.path("id").asString()).isEqualTo("req-1");
                assertMatches(ref, c.outputs().get(0), body.path("outputs").get(0));
            }
        }
    }

    /** A request body with the binary extension's framing: the JSON header's length travels beside it. */
    record BinaryBody(byte[] bytes, int headerLength) {}

    /** A binary request: JSON header, then the raw tensors; the named outputs asked back as binary. */
    static BinaryBody binaryRequest(List<Reference.TensorValue> inputs, List<String> outputs) {
        return framed(List.of(), inputs, outputs);
    }

    /**
     * JSON inputs as given, then {@code binary} inputs as raw tensors after the header; outputs
     * listed in {@code binaryOutputs} are asked back as binary (none listed: the server's default).
     */
    static BinaryBody framed(List<Map<String, Object>> jsonInputs, List<Reference.TensorValue> binary,
            List<String> binaryOutputs) {
        List<Object> ins = new ArrayList<>(jsonInputs);
        List<byte[]> blobs = new ArrayList<>();
        for (Reference.TensorValue t : binary) {
            ByteBuffer b = t.bytes();
            byte[] raw = new byte[b.remaining()];
            b.get(raw);
            blobs.add(raw);
            ins.add(Map.of("name", t.name(), "datatype", t.datatype(), "shape", t.shape(),
                    "parameters", Map.of("binary_data_size", raw.length)));
        }
        Map<String, Object> header = new LinkedHashMap<>();
        header.put("inputs", ins);
        if (!binaryOutputs.isEmpty()) {
            header.put("outputs", binaryOutputs.stream()
                    .map(o -> Map.of("name", o, "parameters", Map.of("binary_data", true))).toList());
        }
        byte[] json = Http.JSON.writeValueAsBytes(header);
        ByteBuffer body = ByteBuffer.allocate(json.length + blobs.stream().mapToInt(b -> b.length).sum());
        body.put(json);
        blobs.forEach(body::put);
        return new BinaryBody(body.array(), json.length);
    }

    Http.Response postBinary(String model, BinaryBody body) {
        return http.post("/v2/models/" + model + "/infer", body.bytes(), Map.of("Content-Type",
                "application/octet-stream", "Inference-Header-Content-Length", Integer.toString(body.headerLength())));
    }

    /** Splits a binary response into its JSON header and the output blobs, in order. */
    static Map<String, ByteBuffer> binaryOutputs(Http.Response r) {
        int headerLength = Integer.parseInt(r.header("Inference-Header-Content-Length"));
        JsonNode header = Http.JSON.readTree(new String(r.body(), 0, headerLength, StandardCharsets.UTF_8));
        Map<String, ByteBuffer> out = new LinkedHashMap<>();
        int offset = headerLength;
        for (JsonNode o : header.path("outputs")) {
            int size = o.path("parameters").path("binary_data_size").asInt();
            out.put(o.path("name").asString(), ByteBuffer.wrap(r.body(), offset, size).slice().order(ByteOrder.LITTLE_ENDIAN));
            offset += size;
        }
        assertThat(offset).isEqualTo(r.body().length);
        return out;
    }

    @Test
    void bothDemoVariantsMatchThePyTorchReferenceOverBinary() {
        for (String model : List.of("demo-portable", "demo-xnnpack")) {
            Reference ref = Reference.load(TestPaths.demoModels().resolve(model + "/1/reference.json"));
            for (Reference.Case c : ref.cases()) {
                Http.Response r = postBinary(model, binaryRequest(c.inputs(), List.of("y")));
                assertThat(r.status()).as(r.text()).isEqualTo(200);
                assertMatchesFp32(ref, c.outputs().get(0), binaryOutputs(r).get("y"));
            }
        }
    }

    /** An FP32 output sent as binary data against the reference's values. */
    static void assertMatchesFp32(Reference ref, Reference.TensorValue expected, ByteBuffer got) {
        List<Double> want = expected.data();
        assertThat(got.remaining()).isEqualTo(want.size() * 4);
        for (int i = 0; i < want.size(); i++) {
            assertThat(ref.close(got.getFloat(i * 4), want.get(i))).isTrue();
        }
    }

    @Test
    void everyDatatypeRoundTripsThroughTheDtypesModel() {
        Reference ref = Reference.load(TestPaths.testModels().resolve("dtypes/1/reference.json"));
        for (Reference.Case c : ref.cases()) {
            // Binary both ways: every dtype, FP16 and BF16 included, compared bit for bit.
            List<String> names = c.outputs().stream().map(Reference.TensorValue::name).toList();
            Http.Response r = postBinary("dtypes", binaryRequest(c.inputs(), names));
            assertThat(r.status()).as(r.text()).isEqualTo(200);
            Map<String, ByteBuffer> outs = binaryOutputs(r);
            for (Reference.TensorValue expected : c.outputs()) {
                assertThat(outs.get(expected.name())).as(expected.name()).isEqualTo(expected.bytes());
            }
            // JSON both ways for the types JSON can carry; FP16/BF16 inputs still go binary.
            List<Map<String, Object>> jsonInputs = new ArrayList<>();
            for (Reference.TensorValue t : c.inputs()) {
                if (!t.datatype().equals("FP16") && !t.datatype().equals("BF16")) {
                    jsonInputs.add(jsonInput(t));
                }
            }
            List<Reference.TensorValue> halfInputs = c.inputs().stream()
                    .filter(t -> t.datatype().equals("FP16") || t.datatype().equals("BF16")).toList();
            Http.Response jr = postBinary("dtypes", framed(jsonInputs, halfInputs, List.of()));
            assertThat(jr.status()).as(jr.text()).isEqualTo(200);
            int headerLength = jr.header("Inference-Header-Content-Length") == null ? jr.body().length
                    : Integer.parseInt(jr.header("Inference-Header-Content-Length"));
            JsonNode header = Http.JSON.readTree(new String(jr.body(), 0, headerLength, StandardCharsets.UTF_8));
            for (JsonNode o : header.path("outputs")) {
                String name = o.path("name").asString();
                Reference.TensorValue expected = c.outputs().stream().filter(e -> e.name().equals(name)).findFirst()
                        .orElseThrow();
                if (o.has("data")) {
                    assertMatches(ref, expected, o);
                } else {
                    // FP16/BF16 always travel as binary.
                    assertThat(expected.datatype()).isIn("FP16", "BF16");
                }
            }
        }
    }

    @Test
    void twoInputsAndOutputSelection() {
        Reference ref = Reference.load(TestPaths.testModels().resolve("two-inputs/1/reference.json"));
        Reference.Case c = ref.cases().get(0);
        Map<String, Object> body = Map.of("inputs", c.inputs().stream().map(ProtocolApiTest::jsonInput).toList(),
                "outputs", List.of(Map.of("name", "mean")));
        Http.Response r = http.postJson("/v2/models/two-inputs/infer", body);
        assertThat(r.status()).as(r.text()).isEqualTo(200);
        JsonNode outs = r.json().path("outputs");
        assertThat(outs.size()).isEqualTo(1);
        Reference.TensorValue mean = c.outputs().stream().filter(o -> o.name().equals("mean")).findFirst().orElseThrow();
        assertMatches(ref, mean, outs.get(0));
        // Inputs may come in any order: they are bound by name.
        List<Map<String, Object>> reversed = new ArrayList<>(c.inputs().stream().map(ProtocolApiTest::jsonInput).toList());
        Collections.reverse(reversed);
        Http.Response r2 = http.postJson("/v2/models/two-inputs/infer", Map.of("inputs", reversed));
        assertThat(r2.status()).isEqualTo(200);
        assertThat(r2.json().path("outputs").size()).isEqualTo(2);
    }

    private String demoRequest(String datatype, String shape, String data) {
        return "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"" + datatype + "\",\"shape\":" + shape + ",\"data\":" + data
                + "}]}";
    }

    private static String zeros(int n) {
        return "[" + String.join(",", Collections.nCopies(n, "0")) + "]";
    }

    @Test
    void badRequestsAre400WithAClearError() {
        Map<String, String> cases = new LinkedHashMap<>();
        cases.put("malformed", "{\"inputs\": [");
        cases.put("not-json", "\u0000\u0001garbage");
        cases.put("no-inputs", "{}");
        cases.put("wrong-dtype", demoRequest("FP64", "[1,16]", zeros(16)));
        cases.put("wrong-shape", demoRequest("FP32", "[16]", zeros(16)));
        cases.put("bigger-shape", demoRequest("FP32", "[2,16]", zeros(32)));
        cases.put("count-mismatch", demoRequest("FP32", "[1,16]", zeros(15)));
        cases.put("negative-dim", demoRequest("FP32", "[-1,16]", zeros(16)));
        cases.put("bad-datatype", demoRequest("FLOAT32", "[1,16]", zeros(16)));
        cases.put("value-type", demoRequest("FP32", "[1,16]", "[" + "\"a\",".repeat(15) + "\"a\"]"));
        cases.put("over-element-limit", demoRequest("FP32", "[1,200000]", "[]"));
        cases.put("huge-shape", demoRequest("FP32", "[1099511627776,1099511627776]", "[]"));
        cases.put("unknown-input", "{\"inputs\":[{\"name\":\"z\",\"datatype\":\"FP32\",\"shape\":[1,16],\"data\":"
                + zeros(16) + "}]}");
        cases.put("duplicate-input", "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,16],\"data\":"
                + zeros(16) + "},{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,16],\"data\":" + zeros(16) + "}]}");
        cases.put("unknown-output", "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,16],\"data\":"
                + zeros(16) + "}],\"outputs\":[{\"name\":\"nope\"}]}");
        for (Map.Entry<String, String> e : cases.entrySet()) {
            Http.Response r = http.post("/v2/models/demo-portable/infer", e.getValue());
            assertThat(r.status()).as(e.getKey() + ": " + r.text()).isEqualTo(400);
            assertThat(r.json().path("error").asString()).as(e.getKey()).isNotBlank();
        }
        // Binary framing errors.
        Http.Response lying = http.post("/v2/models/demo-portable/infer", "{\"inputs\":[]}".getBytes(),
                Map.of("Inference-Header-Content-Length", "5000"));
        assertThat(lying.status()).isEqualTo(400);
        Http.Response notANumber = http.post("/v2/models/demo-portable/infer", "{}".getBytes(),
                Map.of("Inference-Header-Content-Length", "abc"));
        assertThat(notANumber.status()).isEqualTo(400);
        // Still serving.
        assertThat(http.post("/v2/models/demo-portable/infer", demoRequest("FP32", "[1,16]", zeros(16))).status())
                .isEqualTo(200);
    }

    @Test
    void withoutStreamPoolsNoStreamIsSelected() {
        // CPU-only node: no lease, no guard; the probe delegate sees no selection.
        Http.Response r = http.post("/v2/models/caller-stream-probe/infer",
                "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[2],\"data\":[0,0]}]}");
        assertThat(r.status()).as(r.text()).isEqualTo(200);
        JsonNode data = r.json().path("outputs").get(0).path("data");
        assertThat(data.get(0).asLong()).isZero();
    }

    @Test
    void unroutedRequestsUnderV2GetTheProtocolsErrorBody() {
        Http.Response wrongMethod = http.post("/v2/models/demo-portable", "{}");
        assertThat(wrongMethod.status()).isEqualTo(405);
        assertThat(wrongMethod.json().path("error").asString()).contains("POST");
        Http.Response unknown = http.get("/v2/nothing/here");
        assertThat(unknown.status()).isEqualTo(404);
        assertThat(unknown.json().path("error").asString()).contains("/v2/nothing/here");
        // Outside the protocol: problem details.
        Http.Response other = http.get("/elsewhere");
        assertThat(other.status()).isEqualTo(404);
        assertThat(other.json().path("status").asInt()).isEqualTo(404);
    }

    @Test
    void oversizedBodiesAre413() throws Exception {
        // Declared far over the limit (more than twice it): refused from Content-Length alone, at
        // once, before a byte of the body is read; the client sends the headers and waits.
        try (RawConnection c = RawConnection.open(port, 10_000)) {
            RawConnection.Response r = c.exchange("POST /v2/models/demo-portable/infer HTTP/1.1\r\n"
                    + "Host: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " + (3 * 1024 * 1024)
                    + "\r\n\r\n");
            assertThat(r.status()).isEqualTo(413);
            assertThat(r.text()).contains("limit");
        }
        // A client that waits for 100-continue is answered before it sends anything.
        try (RawConnection c = RawConnection.open(port, 10_000)) {
            RawConnection.Response r = c.exchange("POST /v2/models/demo-portable/infer HTTP/1.1\r\n"
                    + "Host: 127.0.0.1\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: "
                    + (1536 * 1024) + "\r\n\r\n");
            assertThat(r.status()).isEqualTo(413);
        }
    }

    @Test
    void aClientThatSendsItsWholeOversizedBodyFirstReadsThe413NotAReset() throws Exception {
        byte[] body = new byte[1536 * 1024];  // half as much again as the 1MB limit
        Arrays.fill(body, (byte) ' ');
        // Declared: the body is read and thrown away, then refused on a connection that stays open.
        try (RawConnection c = RawConnection.open(port, 10_000)) {
            c.send("POST /v2/models/demo-portable/infer HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    + "Content-Type: application/json\r\nContent-Length: " + body.length + "\r\n\r\n").send(body);
            RawConnection.Response r = c.read();
            assertThat(r.status()).isEqualTo(413);
            assertThat(r.text()).contains("exceeds the limit");
            assertThat(c.exchange("GET /v2/health/ready HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").status()).isEqualTo(200);
        }
        // Chunked, so the limit is found while reading: the same.
        try (RawConnection c = RawConnection.open(port, 10_000)) {
            c.send("POST /v2/models/demo-portable/infer HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    + "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n");
            for (int off = 0; off < body.length; off += 64 * 1024) {
                c.send(Integer.toHexString(64 * 1024) + "\r\n").send(Arrays.copyOfRange(body, off, off + 64 * 1024))
                        .send("\r\n");
            }
            RawConnection.Response r = c.send("0\r\n\r\n").read();
            assertThat(r.status()).isEqualTo(413);
            assertThat(c.exchange("GET /v2/health/ready HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").status()).isEqualTo(200);
        }
    }

    @Test
    void concurrentRequestsGetTheirOwnCorrectAnswers() throws Exception {
        Reference ref = Reference.load(TestPaths.demoModels().resolve("demo-xnnpack/1/reference.json"));
        ExecutorService pool = Executors.newFixedThreadPool(8);
        List<Future<Integer>> results = new ArrayList<>();
        for (int t = 0; t < 8; t++) {
            int thread = t;
            results.add(pool.submit(() -> {
                int ok = 0;
                for (int i = 0; i < 40; i++) {
                    String model = (thread + i) % 2 == 0 ? "demo-xnnpack" : "demo-portable";
                    Reference.Case c = ref.cases().get((thread + i) % ref.cases().size());
                    Http.Response r = http.postJson("/v2/models/" + model + "/infer",
                            Map.of("inputs", c.inputs().stream().map(ProtocolApiTest::jsonInput).toList()));
                    if (r.status() == 503) {
                        continue; // overload is allowed; a wrong answer is not
                    }
                    assertThat(r.status()).isEqualTo(200);
                    assertMatches(ref, c.outputs().get(0), r.json().path("outputs").get(0));
                    ok++;
                }
                return ok;
            }));
        }
        int total = 0;
        for (Future<Integer> f : results) {
            total += f.get(120, TimeUnit.SECONDS);
        }
        pool.shutdown();
        assertThat(total).isGreaterThan(300);
    }

    @Test
    void actuatorProbesAndMetrics() {
        Http mgmt = Http.local(managementPort);
        Http.Response readiness = mgmt.get("/actuator/health/readiness");
        assertThat(readiness.status()).as(readiness.text()).isEqualTo(200);
        JsonNode components = readiness.json().path("components");
        assertThat(components.path("models").path("status").asString()).isEqualTo("UP");
        assertThat(components.path("callerStream").path("status").asString()).isEqualTo("UP");
        assertThat(components.path("callerStream").path("details").path("soname").asString())
                .isEqualTo("libextension_cuda.so");
        JsonNode cudaAvailable = components.path("cuda").path("details").path("available");
        assertThat(cudaAvailable.isBoolean()).as("cuda.available present").isTrue();  // a missing one reads false
        assertThat(cudaAvailable.asBoolean()).isFalse();
        assertThat(mgmt.get("/actuator/health/liveness").status()).isEqualTo(200);
        http.post("/v2/models/demo-portable/infer", demoRequest("FP32", "[1,16]", zeros(16)));
        http.get("/v2/health/live");
        String prom = mgmt.get("/actuator/prometheus").text();
        assertThat(prom).contains("nv_inference_request_success{model=\"demo-portable\",version=\"1\"}");
        // Inference is counted by Triton's series only; other endpoints keep Spring's http.server.requests.
        assertThat(prom).contains("uri=\"/v2/health/live\"").doesNotContain("/infer\"");
        assertThat(prom).contains("nv_inference_queue_duration_us{");
        assertThat(prom).contains("nv_inference_pending_request_count{");
        // Every series of a loaded version exists from load, at 0 for a model never served (as in Triton).
        assertThat(prom).contains("nv_inference_request_success{model=\"needs-tensorrt\",version=\"1\"} 0.0");
        assertThat(prom).contains("nv_inference_exec_count{model=\"needs-tensorrt\",version=\"1\"} 0.0");
        assertThat(prom).contains("nv_inference_compute_infer_duration_us{model=\"needs-tensorrt\",version=\"1\"} 0.0");
        // Only health, info and prometheus are exposed.
        assertThat(mgmt.get("/actuator/env").status()).isEqualTo(404);
        assertThat(http.get("/actuator/health").status()).isEqualTo(404);
    }

    @Test
    void everyAnswerUnderV2CarriesTheProtocolErrorBody() throws Exception {
        String[] requests = {
            // Jetty refuses these before any servlet runs.
            "POST /v2/models/%zz/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
            "GET /v2 HTTP/1.1\r\nHost: x\r\nX-Big: " + "a".repeat(70_000) + "\r\n\r\n",
            // TRACE is refused (error dispatch).
            "TRACE /v2 HTTP/1.1\r\nHost: x\r\n\r\n",
            // A header the controller cannot bind.
            "POST /v2/models/demo-portable/infer HTTP/1.1\r\nHost: x\r\nInference-Header-Content-Length: abc\r\n"
                    + "Content-Length: 2\r\n\r\n{}",
            // Media types with nothing in them (a 500 once: the direct path split them to nothing).
            "POST /v2/models/demo-portable/infer HTTP/1.1\r\nHost: x\r\nAccept: ;\r\nContent-Type: application/json\r\n"
                    + "Content-Length: 2\r\n\r\n{}",
            "POST /v2/models/demo-portable/infer HTTP/1.1\r\nHost: x\r\nContent-Type: ;\r\n"
                    + "Content-Length: 2\r\n\r\n{}",
            "POST /v2/models/demo-portable/infer HTTP/1.1\r\nHost: x\r\nAccept: ,\r\nContent-Type: application/json\r\n"
                    + "Content-Length: 2\r\n\r\n{}",
            // No endpoint takes a multipart body (Jetty's servlet layer answered one 200, empty).
            "POST /v2/models/demo-portable/infer HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=x\r\n"
                    + "Content-Length: 2\r\n\r\n{}",
            "POST /v2/repository/index HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=x\r\n"
                    + "Content-Length: 2\r\n\r\n{}",
            "GET /v2 HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/mixed; boundary=x\r\n\r\n"};
        for (String raw : requests) {
            try (RawConnection c = RawConnection.open(port, 10_000)) {
                RawConnection.Response r = c.exchange(raw);
                String what = raw.substring(0, Math.min(60, raw.indexOf('\r')));
                assertThat(r.status()).as(what).isBetween(400, 499);
                assertThat(r.header("content-type")).as(what).startsWith("application/json");
                JsonNode body = Http.JSON.readTree(r.body());
                assertThat(body.path("error").isString()).as(what + ": " + r.text()).isTrue();
                assertThat(body.has("timestamp") || body.has("detail")).as(what).isFalse();
            }
        }
    }

    @Test
    void multipartBodiesAreRefusedOnBothPorts() throws Exception {
        String[][] requests = {{Integer.toString(port), "POST /v2/models/demo-xnnpack/infer"},
            {Integer.toString(port), "POST /v2/repository/models/demo-xnnpack/load"},
            {Integer.toString(managementPort), "GET /actuator/health"}};
        for (String[] r : requests) {
            try (RawConnection c = RawConnection.open(Integer.parseInt(r[0]), 10_000)) {
                RawConnection.Response answer = c.exchange(r[1] + " HTTP/1.1\r\nHost: x\r\n"
                        + "Content-Type: multipart/form-data; boundary=x\r\nContent-Length: 2\r\n\r\n{}");
                assertThat(answer.status()).as(r[1]).isEqualTo(415);
                assertThat(Http.JSON.readTree(answer.body()).path("error").asString()).as(r[1]).contains("multipart");
            }
        }
        assertThat(http.get("/v2/models/demo-xnnpack/ready").status()).isEqualTo(200);
    }

    @Test
    void anAcceptListsEmptyMembersAreIgnoredOnBothPorts() throws Exception {
        // The actuator's endpoints answered 500 to these.
        for (String accept : new String[] {",", "application/json,", ", ,application/json"}) {
            for (String[] r : new String[][] {{Integer.toString(managementPort), "/actuator/health"},
                    {Integer.toString(port), "/v2"}}) {
                try (RawConnection c = RawConnection.open(Integer.parseInt(r[0]), 10_000)) {
                    RawConnection.Response answer = c.exchange("GET " + r[1] + " HTTP/1.1\r\nHost: x\r\nAccept: "
                            + accept + "\r\n\r\n");
                    assertThat(answer.status()).as(accept + " " + r[1] + ": " + answer.text()).isEqualTo(200);
                }
            }
        }
    }

    @Test
    void traceIsRefusedOnBothPortsInsteadOfEchoed() throws Exception {
        for (int p : new int[] {port, managementPort}) {
            for (String path : new String[] {"/v2/health/live", "/actuator/health", "/"}) {
                try (RawConnection c = RawConnection.open(p, 10_000)) {
                    RawConnection.Response r = c.exchange(
                            "TRACE " + path + " HTTP/1.1\r\nHost: x\r\nX-Secret: s3cret\r\n\r\n");
                    assertThat(r.status()).as(p + path).isEqualTo(405);
                    assertThat(r.text()).as(p + path).doesNotContain("s3cret").startsWith("{\"error\":");
                }
            }
        }
    }
}
