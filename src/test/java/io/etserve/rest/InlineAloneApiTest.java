package io.etserve.rest;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.execution.ExecutionSlot;
import io.etserve.execution.InstancePool;
import io.etserve.repository.ModelRegistry;
import io.etserve.support.Http;
import io.etserve.support.ModelActivity;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.RawConnection;
import io.etserve.support.Reference;
import io.etserve.support.TestPaths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.eclipse.jetty.io.ManagedSelector;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.util.thread.Invocable;
import org.eclipse.jetty.util.thread.QueuedThreadPool;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.jetty.JettyWebServer;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.web.server.context.WebServerApplicationContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * {@code etserve.http.inline-alone-below}: a connection alone on its selector has its calls run
 * there, one that shares the selector with another connection has them handed to a request
 * thread, and so has a call that finds no instance free (the selector may not wait). One
 * selector for the whole port, and only raw connections this class opens, so it knows which
 * connections the selector holds.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class InlineAloneApiTest {

    static final ModelRepositoryFixture REPO = ModelRepositoryFixture.create("etserve-alone-")
            .copy(TestPaths.demoModels(), "demo-xnnpack");
    static final Reference REF = Reference.load(TestPaths.demoModels().resolve("demo-xnnpack/1/reference.json"));

    @DynamicPropertySource
    static void properties(DynamicPropertyRegistry r) {
        r.add("etserve.model-repository", () -> REPO.root().toString());
        r.add("management.server.port", () -> "0");
        r.add("etserve.http.inline-alone-below", () -> "1s");
        r.add("server.jetty.threads.selectors", () -> "1");
    }

    @Value("${local.server.port}")
    int port;

    @Autowired
    CoreInference core;

    @Autowired
    ModelRegistry registry;

    @Autowired
    WebServerApplicationContext context;

    @Test
    void callsOfAConnectionAloneOnItsSelectorRunThereAndMatchTheReference() throws Exception {
        try (RawConnection raw = openAloneOnTheSelector()) {
            long before = core.servedOnSelector();
            for (Reference.Case c : REF.cases()) {
                assertAnswered(raw, c);
            }
            assertThat(core.servedOnSelector() - before).isEqualTo(REF.cases().size());
            // Refusals are answered there too, and the connection goes on.
            RawConnection.Response bad = raw.exchange(RawConnection.post("/v2/models/demo-xnnpack/infer", "{\"inputs\": ["));
            assertThat(bad.status()).isEqualTo(400);
            RawConnection.Response unknown = raw.exchange(RawConnection.post("/v2/models/nope/infer", "{\"inputs\": []}"));
            assertThat(unknown.status()).isEqualTo(404);
            assertAnswered(raw, REF.cases().get(0));
        }
        assertThat(((JettyWebServer) context.getWebServer()).getServer().getInvocationType())
                .isEqualTo(Invocable.InvocationType.NON_BLOCKING);
    }

    @Test
    void callsOfAConnectionThatSharesItsSelectorGoToARequestThread() throws Exception {
        try (RawConnection other = RawConnection.open(port, 10_000); RawConnection raw = RawConnection.open(port, 10_000)) {
            // Both registered with the only selector before the calls counted: each answered once.
            assertAnswered(other, REF.cases().get(0));
            assertAnswered(raw, REF.cases().get(0));
            long before = core.servedOnSelector();
            for (Reference.Case c : REF.cases()) {
                assertAnswered(raw, c);
            }
            assertThat(core.servedOnSelector()).isEqualTo(before);
        }
    }

    @Test
    void aCallThatFindsNoFreeInstanceWaitsOnARequestThread() throws Exception {
        try (RawConnection raw = openAloneOnTheSelector()) {
            InstancePool pool = registry.serving("demo-xnnpack", null).instances();
            List<ExecutionSlot> held = new ArrayList<>();
            for (int i = 0; i < pool.capacity(); i++) {
                held.add(pool.acquire(Duration.ofSeconds(5)));
            }
            long before = core.servedOnSelector();
            Reference.Case c = REF.cases().get(1);
            raw.send(RawConnection.post("/v2/models/demo-xnnpack/infer", Http.JSON.writeValueAsString(
                    Map.of("inputs", c.inputs().stream().map(ProtocolApiTest::jsonInput).toList()))));
            // The selector may not wait: it hands the call to a request thread, which waits in
            // the instance line until the instances come free.
            ModelActivity.awaitWaiterInInstanceLine(requestThreads());
            held.forEach(ExecutionSlot::close);
            RawConnection.Response r = raw.read();
            assertThat(r.status()).as(r.text()).isEqualTo(200);
            ProtocolApiTest.assertMatches(REF, c.outputs().get(0), Http.JSON.readTree(r.text()).path("outputs").get(0));
            assertThat(core.servedOnSelector()).isEqualTo(before);
            // Instances free again: the selector serves the connection's calls again.
            awaitACallOnTheSelector(raw);
        }
    }

    /**
     * A connection the only selector holds alone, whose calls now run there. Its first call
     * registers it and teaches the model's time (a model without one is never run on the
     * selector); a closed connection of another test may still be registered until the selector
     * sees it closed.
     */
    private RawConnection openAloneOnTheSelector() throws Exception {
        RawConnection raw = RawConnection.open(port, 10_000);
        assertAnswered(raw, REF.cases().get(0));
        awaitConnectionsOnSelector(1);
        awaitACallOnTheSelector(raw);
        return raw;
    }

    /**
     * Waits until a call of {@code raw} ran on the selector: a call handed to a request thread
     * has that thread read the connection's next request itself if it comes at once, and the
     * selector then reads the next ones.
     */
    private void awaitACallOnTheSelector(RawConnection raw) throws Exception {
        long start = core.servedOnSelector();
        for (int i = 0; i < 100 && core.servedOnSelector() == start; i++) {
            Thread.sleep(5);
            assertAnswered(raw, REF.cases().get(0));
        }
        assertThat(core.servedOnSelector()).isGreaterThan(start);
    }

    /** Sends {@code c} as JSON on {@code raw}: answered 200, its output the reference's. */
    private static void assertAnswered(RawConnection raw, Reference.Case c) throws Exception {
        String json = Http.JSON.writeValueAsString(
                Map.of("inputs", c.inputs().stream().map(ProtocolApiTest::jsonInput).toList()));
        RawConnection.Response r = raw.exchange(RawConnection.post("/v2/models/demo-xnnpack/infer", json));
        assertThat(r.status()).as(r.text()).isEqualTo(200);
        ProtocolApiTest.assertMatches(REF, c.outputs().get(0), Http.JSON.readTree(r.text()).path("outputs").get(0));
    }

    /** The prefix of this server's request threads' names (Jetty's pool: its name, a dash, a number). */
    private String requestThreads() {
        return ((QueuedThreadPool) ((JettyWebServer) context.getWebServer()).getServer().getThreadPool()).getName() + "-";
    }

    /** Waits (up to 10 s) until the port's only selector holds {@code count} connections. */
    private void awaitConnectionsOnSelector(int count) throws InterruptedException {
        ServerConnector connector = (ServerConnector) ((JettyWebServer) context.getWebServer()).getServer().getConnectors()[0];
        ManagedSelector selector = connector.getSelectorManager().getBeans(ManagedSelector.class).iterator().next();
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (selector.size() != count && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        assertThat(selector.size()).isEqualTo(count);
    }
}
