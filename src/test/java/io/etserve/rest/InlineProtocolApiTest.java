package io.etserve.rest;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.support.Http;
import io.etserve.support.RawConnection;
import io.etserve.support.Reference;
import io.etserve.support.TestPaths;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import org.eclipse.jetty.util.thread.Invocable;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.web.server.context.WebServerApplicationContext;
import org.springframework.boot.jetty.JettyWebServer;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Every protocol test again with quick calls served on the thread that read them
 * ({@code etserve.http.inline-below}): the answers, errors and refusals must not change with the
 * thread and API that carry them. Beside them, what only this path has: it really serves (and the
 * server declares itself non-blocking, so its selector calls it), and a body that did not come whole with its head
 * takes the servlet path with its first chunk read again.
 */
class InlineProtocolApiTest extends ProtocolApiTest {

    @DynamicPropertySource
    static void inline(DynamicPropertyRegistry r) {
        r.add("etserve.http.inline-below", () -> "250ms");
    }

    @Autowired
    InlineInference inline;

    @Autowired
    WebServerApplicationContext context;

    @Test
    void quickCallsAreServedOnTheReadingThreadAndMatchTheReference() throws Exception {
        assertThat(((JettyWebServer) context.getWebServer()).getServer().getInvocationType())
                .isEqualTo(Invocable.InvocationType.NON_BLOCKING);
        Reference ref = Reference.load(TestPaths.demoModels().resolve("demo-xnnpack/1/reference.json"));
        long before = inline.served();
        // Head and body in one write (one segment on loopback): the body comes with its head, so
        // each of these is served inline. HttpClient may write the two apart (then the servlet path
        // answers): its binary calls below check the answers, not where they ran.
        try (RawConnection raw = RawConnection.open(port, 10_000)) {
            for (Reference.Case c : ref.cases()) {
                String json = Http.JSON.writeValueAsString(
                        Map.of("inputs", c.inputs().stream().map(ProtocolApiTest::jsonInput).toList()));
                RawConnection.Response r = raw.exchange(RawConnection.post("/v2/models/demo-xnnpack/infer", json));
                assertThat(r.status()).as(r.text()).isEqualTo(200);
                assertThat(r.header("Content-Type")).isEqualTo("application/json");
                assertMatches(ref, c.outputs().get(0), Http.JSON.readTree(r.text()).path("outputs").get(0));
            }
            RawConnection.Response bad = raw.exchange(RawConnection.post("/v2/models/demo-xnnpack/infer", "{\"inputs\": ["));
            assertThat(bad.status()).isEqualTo(400);
            assertThat(Http.JSON.readTree(bad.text()).path("error").asString()).contains("not valid JSON");
        }
        assertThat(inline.served() - before).isEqualTo(ref.cases().size() + 1L);
        for (Reference.Case c : ref.cases()) {
            Http.Response b = postBinary("demo-xnnpack", binaryRequest(c.inputs(), List.of("y")));
            assertThat(b.status()).as(b.text()).isEqualTo(200);
            assertMatchesFp32(ref, c.outputs().get(0), binaryOutputs(b).get("y"));
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
        long before = inline.served();
        Http.Response r = http.post("/v2/models/demo-xnnpack/infer", padded.getBytes(StandardCharsets.UTF_8),
                Map.of("Content-Type", "application/json"));
        assertThat(r.status()).as(r.text()).isEqualTo(200);
        assertMatches(ref, c.outputs().get(0), r.json().path("outputs").get(0));
        assertThat(inline.served()).isEqualTo(before);
    }
}
