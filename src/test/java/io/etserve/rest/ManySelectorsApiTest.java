package io.etserve.rest;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.support.Http;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.RawConnection;
import io.etserve.support.Reference;
import io.etserve.support.TestPaths;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.jetty.JettyWebServer;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.web.server.context.WebServerApplicationContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * More selectors than request threads, as a selector per core gives a host with more cores than
 * {@code server.jetty.threads.max}: Jetty takes a pool thread for each selector and acceptor for
 * good, so the pool holds them on top of the request threads (with only the request threads'
 * count, Jetty refuses to start: "Insufficient configured threads").
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class ManySelectorsApiTest {

    static final int SELECTORS = 24;
    static final int REQUEST_THREADS = 8;

    static final ModelRepositoryFixture REPO = ModelRepositoryFixture.create("etserve-selectors-")
            .copy(TestPaths.demoModels(), "demo-xnnpack");
    static final Reference REF = Reference.load(TestPaths.demoModels().resolve("demo-xnnpack/1/reference.json"));

    @DynamicPropertySource
    static void properties(DynamicPropertyRegistry r) {
        r.add("etserve.model-repository", () -> REPO.root().toString());
        // No management server: it would take the same server.jetty.threads.* (Jetty's own pool).
        r.add("management.server.port", () -> "-1");
        r.add("server.jetty.threads.selectors", () -> String.valueOf(SELECTORS));
        r.add("server.jetty.threads.max", () -> String.valueOf(REQUEST_THREADS));
        r.add("server.jetty.threads.min", () -> "2");
    }

    @Value("${local.server.port}")
    int port;

    @Autowired
    WebServerApplicationContext context;

    @Test
    void thePoolHoldsTheSelectorsAndTheAcceptorOnTopOfTheRequestThreads() {
        Server server = ((JettyWebServer) context.getWebServer()).getServer();
        ServerConnector connector = (ServerConnector) server.getConnectors()[0];
        assertThat(connector.getSelectorManager().getSelectorCount()).isEqualTo(SELECTORS);
        assertThat(connector.getAcceptors()).isEqualTo(1);
        ResumingThreadPool pool = (ResumingThreadPool) server.getThreadPool();
        assertThat(pool.getMaxThreads()).isEqualTo(REQUEST_THREADS + SELECTORS + 1);
        assertThat(pool.getMinThreads()).isEqualTo(2 + SELECTORS + 1);
    }

    @Test
    void moreConnectionsThanRequestThreadsAreAllAnsweredAsTheReferenceSays() throws Exception {
        List<RawConnection> clients = new ArrayList<>();
        try {
            for (int i = 0; i < 2 * REQUEST_THREADS; i++) {
                clients.add(RawConnection.open(port, 10_000));
            }
            for (Reference.Case c : REF.cases()) {
                String json = Http.JSON.writeValueAsString(
                        Map.of("inputs", c.inputs().stream().map(ProtocolApiTest::jsonInput).toList()));
                for (RawConnection client : clients) {  // all sent before any is read
                    client.send(RawConnection.post("/v2/models/demo-xnnpack/infer", json));
                }
                for (RawConnection client : clients) {
                    RawConnection.Response r = client.read();
                    assertThat(r.status()).as(r.text()).isEqualTo(200);
                    ProtocolApiTest.assertMatches(REF, c.outputs().get(0),
                            Http.JSON.readTree(r.text()).path("outputs").get(0));
                }
            }
        } finally {
            for (RawConnection client : clients) {
                client.close();
            }
        }
    }
}
