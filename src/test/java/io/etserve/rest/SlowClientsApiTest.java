package io.etserve.rest;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.inference.InflightBytes;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.RawConnection;
import io.etserve.support.TestPaths;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Clients that are slow, wrong or refused, on raw sockets: they must cost a connection and the
 * bytes they sent, never request threads or the in-flight budget, and a refusal must not cost a
 * well-behaved client its keep-alive connection.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class SlowClientsApiTest {

    static final int THREADS = 16;
    static final int SLOW_CLIENTS = 3 * THREADS;
    static final long DECLARED = 16L * 1024 * 1024;

    static final ModelRepositoryFixture REPO = ModelRepositoryFixture.create("etserve-slow-")
            .copy(TestPaths.demoModels(), "demo-portable")
            .withProgramBytes("broken-text", "not a program".getBytes());

    @DynamicPropertySource
    static void properties(DynamicPropertyRegistry r) {
        r.add("etserve.model-repository", () -> REPO.root().toString());
        r.add("server.jetty.threads.max", () -> Integer.toString(THREADS));
        // Every slow client declares 16 MB: declared sizes would spend this budget twice over.
        r.add("etserve.inference.max-inflight-request-bytes", () -> "8MB");
        r.add("etserve.inference.body-timeout", () -> "12s");
        r.add("management.server.port", () -> "0");
    }

    @Value("${local.server.port}")
    int port;

    @Autowired
    InflightBytes inflight;

    static final String INFER = "/v2/models/demo-portable/infer";

    static String demoRequest() {
        return "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,16],\"data\":["
                + "0,".repeat(15) + "0]}]}";
    }

    @Test
    void slowUploadsCostConnectionsNotThreadsNorBudgetAndEndIn408() throws Exception {
        List<RawConnection> slow = new ArrayList<>();
        try {
            for (int i = 0; i < SLOW_CLIENTS; i++) {
                RawConnection c = RawConnection.open(port, 30_000);
                String head = i % 2 == 0
                        ? "POST " + INFER + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
                                + DECLARED + "\r\n\r\n"
                        : "POST " + INFER + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                + "Transfer-Encoding: chunked\r\n\r\n8\r\n{\"inputs\r\n";
                c.send(head + (i % 2 == 0 ? "{\"inputs\":[" : ""));
                slow.add(c);
            }
            // Every slow client is mid-body now. Others are served at once, on request threads
            // the slow ones do not hold and from a budget they have barely touched.
            for (int i = 0; i < 2 * THREADS; i++) {
                try (RawConnection ok = RawConnection.open(port, 8_000)) {
                    RawConnection.Response r = ok.exchange(RawConnection.post(INFER, demoRequest()));
                    assertThat(r.status()).as(r.text()).isEqualTo(200);
                    assertThat(ok.exchange("GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n").status()).isEqualTo(200);
                }
            }
            assertThat(inflight.held()).as("bytes reserved by %d stalled uploads", SLOW_CLIENTS)
                    .isLessThanOrEqualTo(SLOW_CLIENTS * 64L * 1024);

            // The body deadline answers each of them and frees its connection.
            for (RawConnection c : slow) {
                RawConnection.Response r = c.read();
                assertThat(r.status()).isEqualTo(408);
                assertThat(r.text()).contains("\"error\"").contains("did not arrive within");
                assertThat(c.closedByServer()).isTrue();
            }
            assertThat(inflight.held()).isZero();
        } finally {
            for (RawConnection c : slow) {
                c.close();
            }
        }
    }

    @Test
    void refusalsKeepTheKeepAliveConnection() throws Exception {
        try (RawConnection c = RawConnection.open(port, 10_000)) {
            RawConnection.Response unavailable = c.exchange(RawConnection.post("/v2/models/broken-text/infer", demoRequest()));
            assertThat(unavailable.status()).isEqualTo(503);
            RawConnection.Response badJson = c.exchange(RawConnection.post(INFER, "{\"inputs\": [}"));
            assertThat(badJson.status()).isEqualTo(400);
            RawConnection.Response badShape = c.exchange(RawConnection.post(INFER,
                    demoRequest().replace("[1,16]", "[1,8]").replace("0,".repeat(15), "0,".repeat(7))));
            assertThat(badShape.status()).isEqualTo(400);
            RawConnection.Response notFound = c.exchange(RawConnection.post("/v2/models/nope/infer", demoRequest()));
            assertThat(notFound.status()).isEqualTo(404);
            // Same socket throughout: none of the refusals closed it.
            RawConnection.Response ok = c.exchange(RawConnection.post(INFER, demoRequest()));
            assertThat(ok.status()).isEqualTo(200);
            assertThat(ok.header("connection")).isNull();
        }
    }

    @Test
    void aDeclaredBodyFarOverTheLimitIsRefusedBeforeItIsRead() throws Exception {
        // More than twice the 64MB limit: not worth reading to answer cleanly (within that, the
        // body is read and thrown away first: ProtocolApiTest).
        try (RawConnection c = RawConnection.open(port, 10_000)) {
            RawConnection.Response r = c.exchange("POST " + INFER + " HTTP/1.1\r\nHost: x\r\n"
                    + "Content-Type: application/json\r\nContent-Length: " + (129L * 1024 * 1024) + "\r\n\r\n{");
            assertThat(r.status()).isEqualTo(413);
            assertThat(r.text()).contains("exceeds the limit");
            assertThat(c.closedByServer()).isTrue();
        }
    }

    @Test
    void theErrorPageIsNotAnEndpoint() throws Exception {
        try (RawConnection c = RawConnection.open(port, 10_000)) {
            RawConnection.Response r = c.exchange("GET /error HTTP/1.1\r\nHost: x\r\n\r\n");
            assertThat(r.status()).isEqualTo(404);
            assertThat(r.text()).doesNotContain("999");
        }
    }
}
