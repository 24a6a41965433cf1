package io.etserve.rest;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.RawConnection;
import io.etserve.support.TestPaths;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Slow request heads (slowloris) on raw sockets: a head that does not arrive within
 * {@code etserve.http.header-timeout} loses its connection, a kept-alive connection idle between
 * requests does not, and more slow heads than the port has connections never keep a good client
 * out.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class SlowHeadersApiTest {

    static final int MAX_CONNECTIONS = 64;

    static final ModelRepositoryFixture REPO = ModelRepositoryFixture.create("etserve-slow-heads-")
            .copy(TestPaths.demoModels(), "demo-portable");

    @DynamicPropertySource
    static void properties(DynamicPropertyRegistry r) {
        r.add("etserve.model-repository", () -> REPO.root().toString());
        r.add("etserve.http.header-timeout", () -> "1s");
        r.add("server.jetty.max-connections", () -> Integer.toString(MAX_CONNECTIONS));
        r.add("management.server.port", () -> "0");
    }

    @Value("${local.server.port}")
    int port;

    static final String LIVE = "GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n";
    static final String INFER_BODY = "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,16],\"data\":["
            + "0,".repeat(15) + "0]}]}";

    Socket open() throws IOException {
        Socket s = new Socket();
        s.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 5_000);
        s.setSoTimeout(5_000);
        return s;
    }

    /** Milliseconds until the server closes {@code s} (it sends nothing first), or -1 if it did not within 5 s. */
    static long millisUntilClosed(Socket s, long since) throws IOException {
        try {
            InputStream in = s.getInputStream();
            return in.read() < 0 ? (System.nanoTime() - since) / 1_000_000 : -1;
        } catch (SocketTimeoutException e) {
            return -1;
        } catch (IOException reset) {
            return (System.nanoTime() - since) / 1_000_000;
        }
    }

    @Test
    void aRequestHeadThatDoesNotArriveInTimeLosesItsConnection() throws Exception {
        // Nothing sent at all.
        try (Socket s = open()) {
            long closed = millisUntilClosed(s, System.nanoTime());
            // Closed (within the read's 5 s; -1 otherwise), and not before the header timeout.
            assertThat(closed).as("a connection that sends nothing").isGreaterThanOrEqualTo(900L);
        }
        // A head trickled a byte every 200 ms: never idle, never done.
        try (Socket s = open()) {
            long t0 = System.nanoTime();
            OutputStream out = s.getOutputStream();
            out.write("GET /v2/health/live HTTP/1.1\r\nHost: x\r\nX-Slow: ".getBytes(StandardCharsets.US_ASCII));
            Thread trickle = new Thread(() -> {
                try {
                    for (int i = 0; i < 25; i++) {
                        Thread.sleep(200);
                        out.write('a');
                    }
                } catch (IOException | InterruptedException closed) {
                    // the server closed it: expected
                }
            });
            trickle.start();
            long closed = millisUntilClosed(s, t0);
            trickle.interrupt();
            assertThat(closed).as("a trickled head").isGreaterThanOrEqualTo(900L);
        }
        // Kept alive: idle between requests is not a slow head (the idle timeout's business);
        // a later head that trickles is.
        try (RawConnection c = RawConnection.open(port, 5_000)) {
            assertThat(c.exchange(LIVE).status()).isEqualTo(200);
            Thread.sleep(2_000);
            assertThat(c.exchange(LIVE).status()).as("after 2 s idle, twice the header timeout").isEqualTo(200);
            c.send("GET /v2/health/live HTTP/1.1\r\nHost: x\r\n");
            long t0 = System.nanoTime();
            assertThat(c.closedByServer()).isTrue();
            assertThat((System.nanoTime() - t0) / 1_000_000).as("a later head").isGreaterThanOrEqualTo(800L);
        }
    }

    @Test
    void moreSlowHeadsThanThePortHasConnectionsNeverKeepAGoodClientOut() throws Exception {
        // Warm first: the bound below tells eviction (at once) from a slot freed by a slow head's
        // 1 s timeout, and a cold first inference must not blur the two.
        try (RawConnection warm = RawConnection.open(port, 5_000)) {
            assertThat(warm.exchange(RawConnection.post("/v2/models/demo-portable/infer", INFER_BODY)).status())
                    .isEqualTo(200);
        }
        List<Socket> slow = new ArrayList<>();
        try {
            for (int i = 0; i < 3 * MAX_CONNECTIONS; i++) {
                Socket s = open();
                s.getOutputStream().write("GET /v2/health/live HTTP/1.1\r\nHost: x\r\nX-Slow: a"
                        .getBytes(StandardCharsets.US_ASCII));
                slow.add(s);
            }
            // Every connection the port allows has been taken by a slow head (and more wait):
            // good clients on new connections are served at once, each evicting the oldest.
            long worst = 0;
            for (int i = 0; i < 2 * MAX_CONNECTIONS; i++) {
                long t0 = System.nanoTime();
                try (RawConnection ok = RawConnection.open(port, 5_000)) {
                    RawConnection.Response r = ok.exchange(i % 2 == 0 ? LIVE
                            : RawConnection.post("/v2/models/demo-portable/infer", INFER_BODY));
                    assertThat(r.status()).as(r.text()).isEqualTo(200);
                }
                worst = Math.max(worst, (System.nanoTime() - t0) / 1_000_000);
            }
            assertThat(worst).as("slowest good call, ms").isLessThan(1_000);
        } finally {
            for (Socket s : slow) {
                s.close();
            }
        }
    }
}
