package io.etserve.config;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.support.Http;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.RawConnection;
import io.etserve.support.TestPaths;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.eclipse.jetty.io.ArrayByteBufferPool;
import org.eclipse.jetty.server.AbstractConnector;
import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.Server;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.jetty.JettyWebServer;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.TestConfiguration;
import org.springframework.boot.web.server.context.WebServerInitializedEvent;
import org.springframework.context.ApplicationListener;
import org.springframework.context.annotation.Bean;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Both of the service's Jetty servers (the public port and the management port's child context)
 * lease their connection buffers through {@link ReleaseOnceBufferPool} over a
 * {@link ConnectionBufferPool} that keeps request buffers of {@code etserve.http.input-buffer-size},
 * and serve through it: inference answers, a body larger than Jetty's default pool keeps,
 * malformed request lines refused, health on the management port, and every buffer taken given
 * back.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class ReleaseOnceJettyFactoryApiTest {

    static final ModelRepositoryFixture REPO = ModelRepositoryFixture.create("etserve-release-once-")
            .copy(TestPaths.demoModels(), "demo-portable");

    @DynamicPropertySource
    static void properties(DynamicPropertyRegistry r) {
        r.add("etserve.model-repository", () -> REPO.root().toString());
        r.add("management.server.port", () -> "0");
        r.add("etserve.http.input-buffer-size", () -> "256KB");
    }

    /** Each server as it started, by namespace ("" for the public port, "management"). */
    static final class Servers implements ApplicationListener<WebServerInitializedEvent> {
        final Map<String, Server> byNamespace = new ConcurrentHashMap<>();

        @Override
        public void onApplicationEvent(WebServerInitializedEvent event) {
            String namespace = event.getApplicationContext().getServerNamespace();
            byNamespace.put(namespace == null ? "" : namespace, ((JettyWebServer) event.getWebServer()).getServer());
        }
    }

    @TestConfiguration(proxyBeanMethods = false)
    static class Capture {
        @Bean
        Servers servers() {
            return new Servers();
        }
    }

    @Autowired
    Servers servers;

    @Value("${local.server.port}")
    int port;

    @Value("${local.management.port}")
    int managementPort;

    @Test
    void bothServersLeaseTheirBuffersThroughTheReleaseOncePoolAndServe() throws Exception {
        assertThat(servers.byNamespace).containsOnlyKeys("", "management");
        for (Server server : servers.byNamespace.values()) {
            assertThat(server.getConnectors()).isNotEmpty();
            for (Connector connector : server.getConnectors()) {
                assertThat(((AbstractConnector) connector).getByteBufferPool()).isInstanceOf(ReleaseOnceBufferPool.class);
                assertThat(((ReleaseOnceBufferPool) ((AbstractConnector) connector).getByteBufferPool()).getWrapped())
                        .isInstanceOfSatisfying(ConnectionBufferPool.class,
                                p -> assertThat(p.getMaxCapacity()).isEqualTo(256 * 1024));
            }
        }
        String body = "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,16],\"data\":["
                + "0,".repeat(15) + "0]}]}";
        for (int i = 0; i < 3; i++) {
            try (RawConnection bad = RawConnection.open(port, 5_000)) {
                assertThat(bad.exchange("GET /v2 HTTP/1.1 extra\r\nHost: x\r\n\r\n").status()).isEqualTo(400);
            }
            assertThat(Http.local(port).post("/v2/models/demo-portable/infer", body).status()).isEqualTo(200);
        }
        // A body read into 256 KiB request buffers (spaces between JSON tokens make it ~200 KB)
        String large = body.replace(",", "," + " ".repeat(12_000));
        assertThat(large.length()).isGreaterThan(150_000);
        assertThat(Http.local(port).post("/v2/models/demo-portable/infer", large).status()).isEqualTo(200);
        assertThat(Http.local(managementPort).get("/actuator/health/readiness").status()).isEqualTo(200);
        // Every buffer the requests took went back: each pooled one idle again (a release the
        // lease dropped wrongly would leave one taken for good).
        ArrayByteBufferPool pool = (ArrayByteBufferPool) ((ReleaseOnceBufferPool) ((AbstractConnector)
                servers.byNamespace.get("").getConnectors()[0]).getByteBufferPool()).getWrapped();
        long deadline = System.nanoTime() + 5_000_000_000L;
        while (System.nanoTime() < deadline && (pool.getAvailableHeapByteBufferCount() != pool.getHeapByteBufferCount()
                || pool.getAvailableDirectByteBufferCount() != pool.getDirectByteBufferCount())) {
            Thread.sleep(20);
        }
        assertThat(pool.getHeapByteBufferCount() + pool.getDirectByteBufferCount()).isPositive();
        // The large body's request buffer was kept (Jetty's default pool drops any above 64 KiB)
        assertThat(pool.getDirectMemory()).isGreaterThanOrEqualTo(256 * 1024);
        assertThat(pool.getAvailableHeapByteBufferCount()).isEqualTo(pool.getHeapByteBufferCount());
        assertThat(pool.getAvailableDirectByteBufferCount()).isEqualTo(pool.getDirectByteBufferCount());
    }
}
