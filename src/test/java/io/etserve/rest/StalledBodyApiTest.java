package io.etserve.rest;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.inference.InflightBytes;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.RawConnection;
import io.etserve.support.TestPaths;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * A body that stops arriving is answered 408 whichever ends it first: the body timeout, or (as
 * here, and by default: 30 s against 60 s) the connection's idle timeout.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class StalledBodyApiTest {

    static final ModelRepositoryFixture REPO = ModelRepositoryFixture.create("etserve-stalled-")
            .copy(TestPaths.demoModels(), "demo-portable");

    @DynamicPropertySource
    static void properties(DynamicPropertyRegistry r) {
        r.add("etserve.model-repository", () -> REPO.root().toString());
        r.add("server.jetty.connection-idle-timeout", () -> "1s");
        r.add("etserve.inference.body-timeout", () -> "10m");
        r.add("management.server.port", () -> "0");
    }

    @Value("${local.server.port}")
    int port;

    @Autowired
    InflightBytes inflight;

    @Test
    void aBodyEndedByTheIdleTimeoutIs408AndHoldsNothing() throws Exception {
        try (RawConnection c = RawConnection.open(port, 60_000)) {
            c.send("POST /v2/models/demo-portable/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    + "Content-Length: 1000\r\n\r\n{\"inputs\":[");
            RawConnection.Response r = c.read();
            assertThat(r.status()).as(r.text()).isEqualTo(408);
            assertThat(r.text()).contains("\"error\"").contains("the request body stopped arriving (11 bytes received)");
        }
        assertThat(inflight.held()).isZero();
    }
}
