package io.etserve.rest;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.support.Http;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.RawConnection;
import io.etserve.support.Reference;
import io.etserve.support.TestPaths;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.zip.DeflaterOutputStream;
import java.util.zip.GZIPOutputStream;
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
        // Small, so a compressed body that inflates past it is cheap to send.
        r.add("etserve.inference.max-request-size", () -> "1MB");
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

    /** A 400 with the protocol's JSON error body, whose message says {@code reason}. */
    static void assertRefusedSaying(List<String> failures, String what, RawConnection.Response r, String reason) {
        assertRefused(failures, what, r, 400);
        if (r.status() == 400 && !r.text().contains(reason)) {
            failures.add(what + " -> " + r.text() + " (expected it to say " + reason + ")");
        }
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
                if (e.readsBody && type.equals("application/x-www-form-urlencoded") && e.path.startsWith("/v2/repository/")) {
                    continue;  // what Triton's C++ client sends them (theBodyTypesTheEndpointsReadAreAccepted)
                }
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

    static final List<String> INFER_PATHS = List.of(M + "/infer", M + "/versions/1/infer");

    static byte[] compress(String coding, byte[] bytes) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        // HTTP's deflate is the zlib format (RFC 1950): what Triton's client sends, zlib.compress(body).
        try (OutputStream z = coding.contains("gzip") ? new GZIPOutputStream(out) : new DeflaterOutputStream(out)) {
            z.write(bytes);
        }
        return out.toByteArray();
    }

    /** A POST of {@code body} as bytes, head and body in one write, or the body after the head when {@code split}. */
    RawConnection.Response post(String path, byte[] body, boolean split, String... headers) throws IOException {
        StringBuilder head = new StringBuilder("POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n");
        for (int i = 0; i < headers.length; i += 2) {
            head.append(headers[i]).append(": ").append(headers[i + 1]).append("\r\n");
        }
        byte[] h = head.append("Content-Length: ").append(body.length).append("\r\n\r\n").toString()
                .getBytes(StandardCharsets.US_ASCII);
        try (RawConnection c = RawConnection.open(port, 15_000)) {
            if (split) {
                c.send(h).send(body);
            } else {
                c.send(ByteBuffer.allocate(h.length + body.length).put(h).put(body).array());
            }
            return c.read();
        }
    }

    /**
     * Paths Jetty refuses before any handler of the service runs (its URI compliance checks and
     * its decoding of escapes): each 400 says what is wrong with the path, not just "Bad Request".
     * The words come from Jetty's messages, so this also fails when a new Jetty changes them.
     */
    @Test
    void aPathJettyRefusesIsAnswered400WithWhatIsWrongWithIt() throws Exception {
        String[][] refused = {
            {M + "%2F..%2F/infer", "an escaped '/' (%2F)"},
            {"/v2/repository/models/%2e%2e/load", "an escaped '.' or '..' segment"},
            {"/v2/models//infer", "an empty segment ('//')"},
            {M + "/versions//ready", "an empty segment ('//')"},
            {"/v2/models/a%25b/infer", "an escaped '%' (%25)"},
            {"/v2/models/%E9/infer", "are not UTF-8"},
            {"/v2/models/a%E2%82/infer", "are not UTF-8"},
            {"/v2/models/a%u0041/infer", "a UTF-16 escape (%uXXXX)"},
            {"/v2/models/a%zzb/infer", "a '%' that is not followed by two hexadecimal digits"},
            {"/v2/models/a%2/infer", "a '%' that is not followed by two hexadecimal digits"},
            {"/v2/models/a%00b/infer", "a character no model's name may hold"},
            {"/v2/models/a%0Ab/infer", "a character no model's name may hold"},
            {"/v2/models/a\\b/infer", "a character no model's name may hold"},
        };
        List<String> failures = new ArrayList<>();
        for (String[] c : refused) {
            for (String method : new String[] {"GET", "POST"}) {
                RawConnection.Response r = exchange(request(method, c[0], "application/json", null, INFER_BODY));
                assertRefusedSaying(failures, method + " " + c[0], r, c[1]);
            }
        }
        assertThat(failures).isEmpty();
        assertThat(Http.local(port).post(M + "/infer", INFER_BODY).status()).isEqualTo(200);
    }

    /** Request heads Jetty's parser refuses: each 400 says what is wrong, in the service's words. */
    @Test
    void aMalformedRequestHeadIsAnswered400WithWhatIsWrongWithIt() throws Exception {
        String infer = " " + M + "/infer HTTP/1.1\r\n";
        String length = "Content-Length: " + INFER_BODY.length() + "\r\n";
        String[][] refused = {
            {"POST" + infer + "Host: x\r\n" + length + "Content-Length: 5\r\n\r\n" + INFER_BODY,
                "more than one Content-Length"},
            {"POST" + infer + "Host: x\r\nContent-Length: 1x\r\n\r\n" + INFER_BODY, "Content-Length is not a number"},
            {"POST" + infer + "Host: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                "both Transfer-Encoding and Content-Length"},
            {"POST" + infer + "Host: x\r\nTransfer-Encoding: gzip\r\n\r\n", "must end with 'chunked'"},
            {"POST" + infer + length + "\r\n" + INFER_BODY, "needs a Host header"},
            {"POST" + infer + "Host: a\r\nHost: b\r\n" + length + "\r\n" + INFER_BODY, "more than one Host header"},
            {"POST http://elsewhere" + M + "/infer HTTP/1.1\r\nHost: x\r\n" + length + "\r\n" + INFER_BODY,
                "names a host other than its Host header"},
            {"POST http://u:p@x" + M + "/infer HTTP/1.1\r\nHost: x\r\n" + length + "\r\n" + INFER_BODY,
                "user information"},
            {"POST " + M + "/infer#f HTTP/1.1\r\nHost: x\r\n" + length + "\r\n" + INFER_BODY, "a fragment"},
            {"POST" + infer + "Host: x\r\nX: a\r\n b\r\n" + length + "\r\n" + INFER_BODY, "line folding"},
            {"POST" + infer + "Host: x\r\nBad Header: y\r\n" + length + "\r\n" + INFER_BODY,
                "a character HTTP does not allow there"},
            {"POST" + infer + "Host: x\r\nX: a\u0001b\r\n" + length + "\r\n" + INFER_BODY,
                "a character HTTP does not allow there"},
        };
        List<String> failures = new ArrayList<>();
        for (String[] c : refused) {
            String what = c[0].substring(0, c[0].indexOf("\r\n\r\n")).replace("\r\n", " | ");
            assertRefusedSaying(failures, what, exchange(c[0]), c[1]);
        }
        assertThat(failures).isEmpty();
        assertThat(Http.local(port).post(M + "/infer", INFER_BODY).status()).isEqualTo(200);
    }

    @Test
    void gzipAndDeflateJsonBodiesAreInflatedOnBothInferPathsAndAnswerAsUncompressed() throws Exception {
        Reference ref = Reference.load(TestPaths.demoModels().resolve("demo-portable/1/reference.json"));
        Http http = Http.local(port);
        for (Reference.Case c : ref.cases()) {
            byte[] json = Http.JSON.writeValueAsBytes(
                    Map.of("inputs", c.inputs().stream().map(ProtocolApiTest::jsonInput).toList()));
            for (String path : INFER_PATHS) {
                Http.Response plain = http.post(path, json, Map.of("Content-Type", "application/json"));
                assertThat(plain.status()).as(plain.text()).isEqualTo(200);
                JsonNode expected = plain.json().path("outputs");
                // In any case and spacing; with a JSON Content-Type, and without one as Triton's client sends it.
                for (String coding : List.of("gzip", "x-gzip", "deflate", " GZip ", "DEFLATE")) {
                    byte[] compressed = compress(coding.toLowerCase(Locale.ROOT), json);
                    for (Map<String, String> type : List.of(Map.of("Content-Type", "application/json"),
                            Map.<String, String>of())) {
                        Map<String, String> headers = new LinkedHashMap<>(type);
                        headers.put("Content-Encoding", coding);
                        String what = headers + " " + path;
                        Http.Response r = http.post(path, compressed, headers);
                        assertThat(r.status()).as(what + ": " + r.text()).isEqualTo(200);
                        assertThat(r.header("Content-Encoding")).as("answers go uncompressed").isNull();
                        assertThat(r.json().path("outputs")).as(what).isEqualTo(expected);
                        ProtocolApiTest.assertMatches(ref, c.outputs().get(0), r.json().path("outputs").get(0));
                    }
                }
            }
        }
    }

    @Test
    void aGzippedBinaryRequestIsSplitAtTheHeaderLengthOfTheInflatedBody() throws Exception {
        Reference ref = Reference.load(TestPaths.demoModels().resolve("demo-portable/1/reference.json"));
        Http http = Http.local(port);
        for (Reference.Case c : ref.cases()) {
            ProtocolApiTest.BinaryBody body = ProtocolApiTest.binaryRequest(c.inputs(), List.of("y"));
            for (String path : INFER_PATHS) {
                // Triton's client: no Content-Type, the header length of the uncompressed body.
                Http.Response r = http.post(path, compress("gzip", body.bytes()), Map.of("Content-Encoding", "gzip",
                        "Inference-Header-Content-Length", Integer.toString(body.headerLength())));
                assertThat(r.status()).as(r.text()).isEqualTo(200);
                ProtocolApiTest.assertMatchesFp32(ref, c.outputs().get(0), ProtocolApiTest.binaryOutputs(r).get("y"));
            }
        }
    }

    @Test
    void anotherCodingIsRefused415NamingItAndTheCodingsAccepted() throws Exception {
        byte[] json = INFER_BODY.getBytes(StandardCharsets.UTF_8);
        List<String> failures = new ArrayList<>();
        for (String coding : List.of("br", "gzip, deflate", "compress")) {
            for (String path : INFER_PATHS) {
                RawConnection.Response r = post(path, json, false, "Content-Type", "application/json",
                        "Content-Encoding", coding);
                assertRefused(failures, coding + " " + path, r, 415);
                assertThat(r.text()).contains("Content-Encoding '" + coding + "' is not supported")
                        .contains("gzip, deflate");
                assertThat(r.header("accept-encoding")).as("RFC 9110 §15.5.16").isEqualTo("gzip, deflate");
            }
        }
        assertThat(failures).isEmpty();
        RawConnection.Response identity = post(M + "/infer", json, false, "Content-Type", "application/json",
                "Content-Encoding", "identity");
        assertThat(identity.status()).as(identity.text()).isEqualTo(200);
    }

    @Test
    void aBodyThatDoesNotInflateIs400AndTheServerServesOn(CapturedOutput log) throws Exception {
        byte[] gzip = compress("gzip", INFER_BODY.getBytes(StandardCharsets.UTF_8));
        byte[] corrupt = gzip.clone();
        for (int i = 12; i < gzip.length - 8; i++) {
            corrupt[i] ^= (byte) 0x5a;
        }
        Map<String, byte[]> bad = new LinkedHashMap<>();
        bad.put("corrupt", corrupt);
        bad.put("truncated", Arrays.copyOf(gzip, gzip.length / 2));
        bad.put("empty", new byte[0]);
        bad.put("not compressed", INFER_BODY.getBytes(StandardCharsets.UTF_8));
        List<String> failures = new ArrayList<>();
        for (var b : bad.entrySet()) {
            for (String path : INFER_PATHS) {
                RawConnection.Response r = post(path, b.getValue(), false, "Content-Type", "application/json",
                        "Content-Encoding", "gzip");
                assertRefused(failures, b.getKey() + " " + path, r, 400);
                assertThat(r.text()).contains("the gzip request body does not inflate: ");
            }
        }
        RawConnection.Response r = post(M + "/infer", Arrays.copyOf(compress("deflate", INFER_BODY.getBytes()), 10),
                false, "Content-Encoding", "deflate");
        assertRefused(failures, "truncated deflate", r, 400);
        assertThat(failures).isEmpty();
        assertThat(exchange(request("POST", M + "/infer", "application/json", null, INFER_BODY)).status())
                .isEqualTo(200);
        assertThat(log.getOut()).doesNotContain("unexpected failure").doesNotContain(" ERROR ");
    }

    @Test
    void aDecompressionBombIs413AtTheRequestSizeLimit() throws Exception {
        // 64 MiB of spaces after the JSON in about 64 KB: far over the 1 MB limit set above
        // once inflated, far under it as sent.
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        try (OutputStream z = new GZIPOutputStream(out)) {
            z.write(INFER_BODY.getBytes(StandardCharsets.UTF_8));
            byte[] spaces = new byte[1 << 20];
            Arrays.fill(spaces, (byte) ' ');
            for (int i = 0; i < 64; i++) {
                z.write(spaces);
            }
        }
        assertThat(out.size()).isLessThan(1 << 17);
        for (boolean split : new boolean[] {false, true}) {
            RawConnection.Response r = post(M + "/infer", out.toByteArray(), split, "Content-Type", "application/json",
                    "Content-Encoding", "gzip");
            List<String> failures = new ArrayList<>();
            assertRefused(failures, "bomb", r, 413);
            assertThat(failures).isEmpty();
            assertThat(r.text()).contains("the gzip request body inflated: request body exceeds the limit of "
                    + (1 << 20) + " bytes");
        }
        assertThat(exchange(request("POST", M + "/infer", "application/json", null, INFER_BODY)).status())
                .isEqualTo(200);
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
        // Triton's C++ client posts these bodies as libcurl's default type, form-urlencoded.
        for (String type : new String[] {null, "application/json", "application/json; charset=utf-8",
                "application/x-www-form-urlencoded"}) {
            RawConnection.Response r = exchange(request("POST", "/v2/repository/index", type, null,
                    type == null ? null : "{\"ready\": true}"));
            assertThat(r.status()).as("index, Content-Type " + type + ": " + r.text()).isEqualTo(200);
            assertThat(r.text()).as("index, Content-Type " + type).contains("demo-portable");
        }
        // Read as the JSON it is, not as a form: a broken one is refused for what it is.
        RawConnection.Response form = exchange(request("POST", "/v2/repository/index",
                "application/x-www-form-urlencoded", null, "{\"ready\": 1}"));
        assertThat(form.status()).as(form.text()).isEqualTo(400);
        assertThat(form.text()).contains("ready must be true or false");
        // A load as Triton's clients send it: {} without a Content-Type (Python), or as a form (C++).
        for (String type : new String[] {null, "application/json", "application/x-www-form-urlencoded"}) {
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
