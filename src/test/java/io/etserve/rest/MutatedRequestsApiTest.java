package io.etserve.rest;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.support.Http;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.RawConnection;
import io.etserve.support.Reference;
import io.etserve.support.RequestMutator;
import io.etserve.support.TestPaths;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.node.ObjectNode;

/**
 * Hundreds of seeded, random variants of a valid inference request over real HTTP: JSON with
 * values replaced, removed, added or repeated; the same as bytes flipped, cut or given stray
 * punctuation; binary-extension requests with a changed header, tensor bytes or header length;
 * hostile model names and versions in the path. Each answer is the model's result or a 4xx with
 * the protocol's {@code {"error": ...}} body saying what is wrong (more than the status's
 * words), never a 5xx, never an ERROR in the log; and the
 * model still gives the reference answer after all of them. Replay one seed with
 * {@code -Detserve.test.mutation-seed=N}.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
@ExtendWith(OutputCaptureExtension.class)
class MutatedRequestsApiTest {

    static final ModelRepositoryFixture REPO = ModelRepositoryFixture.create("etserve-mutated-")
            .copy(TestPaths.demoModels(), "demo-portable")
            .copy(TestPaths.demoModels(), "demo-xnnpack");
    static final Reference REF = Reference.load(TestPaths.demoModels().resolve("demo-portable/1/reference.json"));
    static final long SEED = Long.getLong("etserve.test.mutation-seed", 20261207L);
    static final int REQUESTS = 600;

    @DynamicPropertySource
    static void properties(DynamicPropertyRegistry r) {
        r.add("etserve.model-repository", () -> REPO.root().toString());
        r.add("management.server.port", () -> "0");
        // Small, so a repeated tensor can pass it and the size check is among the refusals.
        r.add("etserve.inference.max-request-size", () -> "256KB");
    }

    @Value("${local.server.port}")
    int port;

    static final List<String> PATHS = List.of("/v2/models/demo-portable/infer",
            "/v2/models/demo-portable/versions/1/infer", "/v2/models/demo-xnnpack/infer");
    static final List<String> HOSTILE_PATHS = List.of("/v2/models/%2e%2e/infer", "/v2/models/..%2f..%2fetc/infer",
            "/v2/models/demo-portable/versions/-1/infer", "/v2/models/demo-portable/versions/99999999999999999999/infer",
            "/v2/models/%00/infer", "/v2/models/" + "a".repeat(3000) + "/infer", "/v2/models/demo-portable%20/infer",
            "/v2/models/%E9/infer", "/v2/models/demo-portable/versions/1%2F2/infer", "/v2/models//infer",
            "/v2/models/demo-portable/versions//infer", "/v2/models/demo-portable/infer?x=%zz",
            "/v2/models/demo-portable/versions/01/infer", "/v2/models/%ff%fe/infer", "/v2/models/demo-portable;x=1/infer",
            "/v2/repository/models/%2e%2e/load", "/v2/repository/models/demo-portable%2F..%2F/load");

    @Test
    void everyVariantIsAnsweredOrRefusedClearlyAndTheModelStillAnswersRight(CapturedOutput output) throws IOException {
        RequestMutator mutator = new RequestMutator(SEED);
        JsonNode valid = validRequest();
        List<String> problems = new ArrayList<>();
        int answered = 0;
        for (int i = 0; i < REQUESTS; i++) {
            int kind = mutator.random().nextInt(10);
            String path = PATHS.get(mutator.random().nextInt(PATHS.size()));
            String what;
            RawConnection.Response r;
            if (kind < 4) {
                JsonNode body = mutator.mutate(valid);
                what = "json " + body;
                r = post(port, path, "application/json", Map.of(), bytes(body));
            } else if (kind < 6) {
                byte[] body = mutator.mutate(bytes(valid));
                what = "json bytes " + new String(body, StandardCharsets.ISO_8859_1);
                r = post(port, path, "application/json", Map.of(), body);
            } else if (kind < 9) {
                Binary b = binary(mutator);
                what = "binary " + b.describe();
                r = post(port, path, "application/octet-stream",
                        Map.of("Inference-Header-Content-Length", b.headerLength()), b.body());
            } else {
                path = HOSTILE_PATHS.get(mutator.random().nextInt(HOSTILE_PATHS.size()));
                what = "path";
                r = post(port, path, "application/json", Map.of(), bytes(valid));
            }
            String problem = problem(r);
            if (problem != null) {
                problems.add("#" + i + " " + path.substring(0, Math.min(path.length(), 80)) + " " + problem + "; sent "
                        + what.substring(0, Math.min(what.length(), 400)));
            } else if (r.status() == 200) {
                answered++;
            }
        }
        assertThat(problems).as("seed %d", SEED).isEmpty();
        // Some variants still are valid requests (an unknown parameter, an extra output list entry).
        assertThat(answered).as("answered variants").isPositive();
        assertThat(output.getAll()).doesNotContain(" ERROR ");
        assertReferenceAnswer(port);
    }

    /** What is wrong with an answer to a malformed request, or null when it is a clear one. */
    static String problem(RawConnection.Response r) {
        if (r.status() >= 500) {
            return "status " + r.status() + ": " + r.text();
        }
        if (r.status() == 200) {
            return null;
        }
        if (r.status() < 400) {
            return "status " + r.status();
        }
        try {
            JsonNode error = Http.JSON.readTree(r.body()).path("error");
            if (!error.isString() || error.asString().isBlank()) {
                return "status " + r.status() + " without an error message: " + r.text();
            }
            // The status's own words ("Bad Request") tell the client nothing the status did not.
            return error.asString().equals(ApiException.reasonPhrase(r.status()))
                    ? "status " + r.status() + " that does not say what is wrong: " + r.text() : null;
        } catch (RuntimeException notJson) {
            return "status " + r.status() + " with a body that is not JSON: " + r.text();
        }
    }

    /** A POST of {@code body} on its own connection, with the headers as given (a hostile path as written). */
    static RawConnection.Response post(int port, String path, String type, Map<String, String> headers, byte[] body)
            throws IOException {
        StringBuilder head = new StringBuilder("POST ").append(path).append(" HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                .append("Connection: close\r\nContent-Type: ").append(type).append("\r\nContent-Length: ")
                .append(body.length).append("\r\n");
        headers.forEach((k, v) -> head.append(k).append(": ").append(v).append("\r\n"));
        ByteArrayOutputStream request = new ByteArrayOutputStream();
        request.writeBytes(head.append("\r\n").toString().getBytes(StandardCharsets.ISO_8859_1));
        request.writeBytes(body);
        try (RawConnection c = RawConnection.open(port, 30_000)) {
            return c.send(request.toByteArray()).read();
        }
    }

    /** A binary-extension request: the JSON header, the tensor's bytes and the header's length, each maybe changed. */
    record Binary(byte[] header, byte[] tensor, String headerLength) {
        byte[] body() {
            byte[] all = new byte[header.length + tensor.length];
            System.arraycopy(header, 0, all, 0, header.length);
            System.arraycopy(tensor, 0, all, header.length, tensor.length);
            return all;
        }

        String describe() {
            return new String(header, StandardCharsets.ISO_8859_1) + " + " + tensor.length + " bytes, header length "
                    + headerLength;
        }
    }

    static Binary binary(RequestMutator mutator) {
        ObjectNode header = Http.JSON.createObjectNode();
        ObjectNode input = header.putArray("inputs").addObject();
        input.put("name", "x").put("datatype", "FP32");
        input.putArray("shape").add(1).add(16);
        input.putObject("parameters").put("binary_data_size", 64);
        header.putArray("outputs").addObject().put("name", "y").putObject("parameters").put("binary_data", true);
        java.util.Random random = mutator.random();
        byte[] headerBytes = bytes(random.nextBoolean() ? mutator.mutate(header) : header);
        if (random.nextInt(3) == 0) {
            headerBytes = mutator.mutate(headerBytes);
        }
        byte[] tensor = REF.cases().get(0).inputs().get(0).bytes().array();
        if (random.nextInt(3) == 0) {
            tensor = mutator.mutate(tensor);
        }
        String length = String.valueOf(headerBytes.length);
        if (random.nextInt(6) == 0) {
            List<String> lengths = List.of("-1", "0", String.valueOf(headerBytes.length + tensor.length + 5),
                    "2147483648", "9223372036854775808", "abc", "", " 5", "1e3", "0x10",
                    String.valueOf(headerBytes.length - 1), String.valueOf(headerBytes.length + 1));
            length = lengths.get(random.nextInt(lengths.size()));
        }
        return new Binary(headerBytes, tensor, length);
    }

    static JsonNode validRequest() {
        ObjectNode request = Http.JSON.createObjectNode();
        request.put("id", "r1");
        Reference.TensorValue x = REF.cases().get(0).inputs().get(0);
        ObjectNode input = request.putArray("inputs").addObject();
        input.put("name", x.name()).put("datatype", x.datatype());
        for (long d : x.shape()) {
            input.withArray("shape").add(d);
        }
        x.data().forEach(input.withArray("data")::add);
        request.putArray("outputs").addObject().put("name", "y");
        return request;
    }

    /** demo-portable answers the reference's first case within its tolerance. */
    static void assertReferenceAnswer(int port) {
        Http.Response r = Http.local(port).post(PATHS.get(0), validRequest().toString());
        assertThat(r.status()).as(r.text()).isEqualTo(200);
        JsonNode data = r.json().path("outputs").get(0).path("data");
        List<Double> expected = REF.cases().get(0).outputs().get(0).data();
        assertThat(data.size()).isEqualTo(expected.size());
        for (int i = 0; i < expected.size(); i++) {
            assertThat(REF.close(data.get(i).asDouble(), expected.get(i))).as("output %d", i).isTrue();
        }
    }

    private static byte[] bytes(JsonNode json) {
        return json.toString().getBytes(StandardCharsets.UTF_8);
    }
}
