package io.etserve.rest;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.support.Http;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.RawConnection;
import io.etserve.support.TestPaths;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import tools.jackson.databind.JsonNode;

/**
 * Every endpoint of the public port, asked the wrong way over real HTTP (a method it does not
 * serve, a body in a type it does not read, an {@code Accept} it cannot answer, a malformed
 * body): the client's mistake gets its own 4xx with the protocol's {@code {"error": ...}} body,
 * never a 500, never an ERROR in the log, and a refused request changes nothing (an unload
 * refused with 406 leaves the model loaded).
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
@ExtendWith(OutputCaptureExtension.class)
class ClientErrorsApiTest {

    static final ModelRepositoryFixture REPO = ModelRepositoryFixture.create("etserve-client-errors-")
            .copy(TestPaths.demoModels(), "demo-portable");

    @DynamicPropertySource
    static void properties(DynamicPropertyRegistry r) {
        r.add("etserve.model-repository", () -> REPO.root().toString());
        // Load and unload act here, so a refusal that came after the action would show.
        r.add("etserve.repository.mode", () -> "explicit");
        r.add("management.server.port", () -> "0");
    }

    @Value("${local.server.port}")
    int port;

    static final String M = "/v2/models/demo-portable";
    static final String INFER_BODY = "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,16],\"data\":["
            + "0,".repeat(15) + "0]}]}";

    /**
     * One endpoint: its path, the method it serves, whether it reads a request body and whether
     * it answers one (the health endpoints answer with their status alone).
     */
    record Endpoint(String path, String method, boolean readsBody, boolean answersBody) {
        String body() {
            return path.endsWith("/infer") ? INFER_BODY : "{}";
        }
    }

    static final List<Endpoint> ENDPOINTS = List.of(
            new Endpoint("/v2", "GET", false, true),
            new Endpoint("/v2/health/live", "GET", false, false),
            new Endpoint("/v2/health/ready", "GET", false, false),
            new Endpoint(M, "GET", false, true),
            new Endpoint(M + "/versions/1", "GET", false, true),
            new Endpoint(M + "/ready", "GET", false, true),
            new Endpoint(M + "/versions/1/ready", "GET", false, true),
            new Endpoint(M + "/infer", "POST", true, true),
            new Endpoint(M + "/versions/1/infer", "POST", true, true),
            new Endpoint("/v2/repository/index", "POST", true, true),
            new Endpoint("/v2/repository/models/demo-portable/load", "POST", true, true),
            new Endpoint(M + "/config", "GET", false, true),
            new Endpoint(M + "/versions/1/config", "GET", false, true),
            new Endpoint("/v2/models/stats", "GET", false, true),
            new Endpoint(M + "/stats", "GET", false, true),
            new Endpoint(M + "/versions/1/stats", "GET", false, true),
            new Endpoint("/v2/repository/models/demo-portable/unload", "POST", false, true));

    static String request(String method, String path, String contentType, String accept, String body) {
        StringBuilder b = new StringBuilder(method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n");
        if (contentType != null) {
            b.append("Content-Type: ").append(contentType).append("\r\n");
        }
        if (accept != null) {
            b.append("Accept: ").append(accept).append("\r\n");
        }
        byte[] bytes = body == null ? new byte[0] : body.getBytes(StandardCharsets.UTF_8);
        if (body != null) {
            b.append("Content-Length: ").append(bytes.length).append("\r\n");
        }
        return b.append("\r\n").append(body == null ? "" : body).toString();
    }

    RawConnection.Response exchange(String raw) throws IOException {
        try (RawConnection c = RawConnection.open(port, 15_000)) {
            return c.exchange(raw);
        }
    }

    /** What the endpoint answers when asked the right way. */
    int rightWay(Endpoint e) throws IOException {
        return exchange(request(e.method, e.path, e.readsBody ? "application/json" : null, null,
                e.readsBody ? e.body() : null)).status();
    }

    /** A refusal: the expected status and the protocol's JSON error body. */
    static void assertRefused(List<String> failures, String what, RawConnection.Response r, int expected) {
        String seen = what + " -> " + r.status() + " " + r.header("content-type") + " " + r.text();
        if (r.status() != expected) {
            failures.add(seen + " (expected " + expected + ")");
            return;
        }
        if (r.header("content-type") == null || !r.header("content-type").startsWith("application/json")) {
            failures.add(seen + " (expected a JSON body)");
            return;
        }
        JsonNode body = Http.JSON.readTree(r.body());
        if (!body.path("error").isString() || body.path("error").asString().isBlank() || body.size() != 1) {
            failures.add(seen + " (expected {\"error\": ...})");
        }
    }

    @Test
    void everyEndpointRefusesAClientsMistakeWithItsOwn4xxAndTheProtocolsErrorBody(CapturedOutput log)
            throws Exception {
        List<String> failures = new ArrayList<>();
        for (Endpoint e : ENDPOINTS) {
            // A method the endpoint does not serve: 405 naming the ones it does.
            for (String wrong : List.of("GET", "POST", "PUT", "DELETE", "PATCH")) {
                if (wrong.equals(e.method)) {
                    continue;
                }
                boolean withBody = !wrong.equals("GET") && !wrong.equals("DELETE");
                String what = wrong + " " + e.path;
                RawConnection.Response r = exchange(request(wrong, e.path, withBody ? "application/json" : null, null,
                        withBody ? e.body() : null));
                assertRefused(failures, what, r, 405);
                String allow = r.header("allow");
                if (allow == null || !List.of(allow.toUpperCase(Locale.ROOT).split("\\s*,\\s*")).contains(e.method)
                        || allow.toUpperCase(Locale.ROOT).contains(wrong)) {
                    failures.add(what + " -> Allow: " + allow + " (expected it to name " + e.method + ", not " + wrong + ")");
                }
            }

            // A body in a type the endpoint does not read: 415. An endpoint that reads no body
            // ignores the header and answers as it would without it.
            for (String type : List.of("text/plain", "application/xml", "application/x-www-form-urlencoded",
                    "application/json; charset=nope", "not a type;;")) {
                String what = e.method + " " + e.path + " Content-Type: " + type;
                if (e.readsBody) {
                    RawConnection.Response r = exchange(request(e.method, e.path, type, null, e.body()));
                    assertRefused(failures, what, r, 415);
                } else if (!e.path.endsWith("/unload")) {
                    int status = exchange(request(e.method, e.path, type, null, e.method.equals("GET") ? null : "x")).status();
                    if (status != rightWay(e)) {
                        failures.add(what + " -> " + status + " (expected what it answers without the header)");
                    }
                }
            }

            // An Accept the endpoint cannot answer: 406 before it acts. The health endpoints
            // answer with their status alone, which any Accept takes.
            for (String accept : List.of("image/png", "text/html", "application/xml", "not a type;;")) {
                String what = e.method + " " + e.path + " Accept: " + accept;
                RawConnection.Response r = exchange(request(e.method, e.path, e.readsBody ? "application/json" : null,
                        accept, e.readsBody ? e.body() : null));
                if (e.answersBody) {
                    assertRefused(failures, what, r, 406);
                } else if (r.status() != 200 || r.body().length != 0) {
                    failures.add(what + " -> " + r.status() + " " + r.text() + " (expected 200, no body)");
                }
            }
        }

        // Malformed bodies and values: 400.
        for (String body : List.of("{bad", "[1]", "\"ready\"", "{\"ready\": ")) {
            assertRefused(failures, "index " + body,
                    exchange(request("POST", "/v2/repository/index", "application/json", null, body)), 400);
        }
        assertRefused(failures, "infer with Inference-Header-Content-Length: abc",
                exchange(request("POST", M + "/infer", "application/json", null, INFER_BODY)
                        .replace("Host: 127.0.0.1\r\n", "Host: 127.0.0.1\r\nInference-Header-Content-Length: abc\r\n")),
                400);

        assertThat(failures).as("answers that were not the client error they should be").isEmpty();

        // Nothing refused acted: the unloads refused with 406 left the model serving.
        assertThat(exchange(request("GET", M + "/ready", null, null, null)).status()).isEqualTo(200);
        assertThat(exchange(request("POST", M + "/infer", "application/json", null, INFER_BODY)).status()).isEqualTo(200);
        // And none of it is the server's failure.
        assertThat(log.getOut()).doesNotContain("unexpected failure").doesNotContain(" ERROR ");
    }

    @Test
    void aCompressedInferenceBodyIsRefusedWithWhatToDoOnEveryPath() throws Exception {
        // Triton's clients can gzip or deflate a request; this service reads bodies as sent, so
        // it says so (415) instead of failing to parse compressed bytes as JSON (400).
        for (String encoding : List.of("gzip", "deflate", "br")) {
            for (String path : List.of(M + "/infer", M + "/versions/1/infer")) {
                String raw = request("POST", path, "application/json", null, INFER_BODY)
                        .replaceFirst("\r\n", "\r\nContent-Encoding: " + encoding + "\r\n");
                RawConnection.Response r = exchange(raw);
                List<String> failures = new ArrayList<>();
                assertRefused(failures, encoding + " " + path, r, 415);
                assertThat(failures).isEmpty();
                assertThat(r.text()).contains("compressed request bodies are not supported").contains(encoding);
            }
        }
        String identity = request("POST", M + "/infer", "application/json", null, INFER_BODY)
                .replaceFirst("\r\n", "\r\nContent-Encoding: identity\r\n");
        assertThat(exchange(identity).status()).isEqualTo(200);
    }

    @Test
    void tritonsReservedParametersWronglyTypedAreRefusedAndWellTypedOnesServed() throws Exception {
        String[][] refused = {
            {"\"priority\": \"high\"", "'priority' must be a whole number"},
            {"\"priority\": -2", "'priority' must be a whole number"},
            {"\"sequence_id\": true", "'sequence_id' must be a whole number or a string, got the boolean true"},
            {"\"sequence_start\": 1", "'sequence_start' must be a boolean"},
            {"\"sequence_end\": \"yes\\n\"", "'sequence_end' must be a boolean, got the string 'yes\\u000A'"},
        };
        List<String> failures = new ArrayList<>();
        for (String[] c : refused) {
            RawConnection.Response r = exchange(request("POST", M + "/infer", "application/json", null,
                    INFER_BODY.replace("{\"inputs\"", "{\"parameters\": {" + c[0] + "}, \"inputs\"")));
            assertRefused(failures, c[0], r, 400);
            if (r.status() == 400 && !Http.JSON.readTree(r.body()).path("error").asString().contains(c[1])) {
                failures.add(c[0] + " -> " + r.text() + " (expected it to say " + c[1] + ")");
            }
        }
        assertThat(failures).isEmpty();
        String typed = "\"priority\": 3, \"sequence_id\": 42, \"sequence_start\": true, \"sequence_end\": false";
        RawConnection.Response served = exchange(request("POST", M + "/infer", "application/json", null,
                INFER_BODY.replace("{\"inputs\"", "{\"parameters\": {" + typed + "}, \"inputs\"")));
        assertThat(served.status()).as(served.text()).isEqualTo(200);
    }

    @Test
    void theBodyTypesTheEndpointsReadAreAccepted() throws Exception {
        // Triton's clients send no Content-Type; JSON may name its charset; binary requests are octet-stream.
        for (String type : new String[] {null, "application/json", "application/json; charset=utf-8",
                "application/octet-stream"}) {
            RawConnection.Response r = exchange(request("POST", M + "/infer", type, null, INFER_BODY));
            assertThat(r.status()).as("infer, Content-Type " + type + ": " + r.text()).isEqualTo(200);
        }
        for (String type : new String[] {null, "application/json", "application/json; charset=utf-8"}) {
            RawConnection.Response r = exchange(request("POST", "/v2/repository/index", type, null,
                    type == null ? null : "{\"ready\": true}"));
            assertThat(r.status()).as("index, Content-Type " + type + ": " + r.text()).isEqualTo(200);
        }
        // A load as Triton's client sends it: {} without a Content-Type.
        for (String type : new String[] {null, "application/json"}) {
            RawConnection.Response r = exchange(request("POST", "/v2/repository/models/demo-portable/load", type, null,
                    "{}"));
            assertThat(r.status()).as("load, Content-Type " + type + ": " + r.text()).isEqualTo(200);
        }
        // Any Accept that takes JSON.
        for (String accept : new String[] {"*/*", "application/*", "application/json", "text/html, */*;q=0.8"}) {
            assertThat(exchange(request("GET", M, null, accept, null)).status()).as(accept).isEqualTo(200);
            assertThat(exchange(request("POST", M + "/infer", "application/json", accept, INFER_BODY)).status())
                    .as(accept).isEqualTo(200);
        }
    }
}
