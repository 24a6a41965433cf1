package io.etserve.rest;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.support.Http;
import io.etserve.support.RawConnection;
import io.etserve.support.Reference;
import io.etserve.support.TestPaths;
import java.util.List;
import org.eclipse.jetty.util.thread.Invocable;
import org.junit.jupiter.api.Test;
import org.springframework.boot.jetty.JettyWebServer;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Every protocol test again with quick calls served on the selector thread that read them
 * ({@code etserve.http.inline-below}): the answers, errors and refusals must not change with the
 * thread that carries them. Beside them, what only this setting does: the server declares itself
 * non-blocking (so its selector calls the handler), and quick calls really run there.
 */
class InlineProtocolApiTest extends ProtocolApiTest {

    @DynamicPropertySource
    static void inline(DynamicPropertyRegistry r) {
        r.add("etserve.http.inline-below", () -> "250ms");
    }

    @Override
    Invocable.InvocationType expectedInvocationType() {
        return Invocable.InvocationType.NON_BLOCKING;
    }

    @Test
    void theRequestPoolResumesConnectionsOnTheThreadThatAnswered() {
        assertThat(((JettyWebServer) context.getWebServer()).getServer().getThreadPool())
                .isInstanceOf(ResumingThreadPool.class);
    }

    @Test
    void quickCallsAreServedOnTheReadingThreadAndMatchTheReference() throws Exception {
        Reference ref = Reference.load(TestPaths.demoModels().resolve("demo-xnnpack/1/reference.json"));
        long before = core.servedOnSelector();
        // Head and body in one write, so each of these is served where it was read.
        try (RawConnection raw = RawConnection.open(port, 10_000)) {
            postEveryCaseInOneWrite(raw, ref);
            RawConnection.Response bad = raw.exchange(RawConnection.post("/v2/models/demo-xnnpack/infer", "{\"inputs\": ["));
            assertThat(bad.status()).isEqualTo(400);
        }
        assertThat(core.servedOnSelector() - before).isEqualTo(ref.cases().size() + 1L);
        for (Reference.Case c : ref.cases()) {
            Http.Response b = postBinary("demo-xnnpack", binaryRequest(c.inputs(), List.of("y")));
            assertThat(b.status()).as(b.text()).isEqualTo(200);
            assertMatchesFp32(ref, c.outputs().get(0), binaryOutputs(b).get("y"));
        }
    }
}
