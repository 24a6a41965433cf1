package io.etserve.rest;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.inference.InflightBytes;
import io.etserve.metrics.ProtocolMetrics;
import io.etserve.runtime.DirectBufferPool;
import io.etserve.security.RestrictedApis;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.concurrent.RejectedExecutionException;
import java.util.function.Supplier;
import org.eclipse.jetty.http.HttpHeader;
import org.eclipse.jetty.http.HttpTester;
import org.eclipse.jetty.server.Handler;
import org.eclipse.jetty.server.LocalConnector;
import org.eclipse.jetty.server.Request;
import org.eclipse.jetty.server.Response;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.util.Callback;
import org.eclipse.jetty.util.thread.QueuedThreadPool;
import org.junit.jupiter.api.Test;

/** {@link InferHandler} on a real Jetty server (a local connector), in front of a stand-in context. */
class InferHandlerTest {

    /** A pool that refuses what InferHandler hands it (a full queue), and runs Jetty's own work. */
    static final class FullForHandOvers extends QueuedThreadPool {
        @Override
        public void execute(Runnable job) {
            if (job.getClass().getName().contains(InferHandler.class.getSimpleName())) {
                throw new RejectedExecutionException("full");
            }
            super.execute(job);
        }
    }

    /**
     * A started server with {@link InferHandler} on the selector's terms (inline-below set) in
     * front of a context never reached, and a request pool that refuses every hand-over.
     */
    private static LocalConnector startWithAFullPool(Supplier<CoreInference> core) throws Exception {
        Server server = new Server(new FullForHandOvers());
        server.setErrorHandler(new JsonErrorHandler());
        LocalConnector connector = new LocalConnector(server);
        server.addConnector(connector);
        server.setHandler(new Handler.Abstract() {
            @Override
            public boolean handle(Request request, Response response, Callback callback) {
                Response.writeError(request, response, callback, 200);  // never reached: refused first
                return true;
            }
        });
        InferHandler.install(server, core, true);
        server.start();
        return connector;
    }

    @Test
    void aRequestTheFullPoolRefusesGetsTheSameAnswerAsOneRefusedInsideTheCorePath() throws Exception {
        // On the selector's server (inline-below set), with no core path yet: every request is
        // handed to the pool, which is full.
        LocalConnector connector = startWithAFullPool(() -> null);
        Server server = connector.getServer();
        try {
            HttpTester.Response answer = HttpTester.parseResponse(connector.getResponse(
                    "GET /v2/models/m HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"));
            ApiExceptionHandler.Answer expected = CoreInference.overloaded();
            assertThat(answer.getStatus()).isEqualTo(503);
            assertThat(answer.get(HttpHeader.CONTENT_TYPE)).startsWith("application/json");
            assertThat(answer.get(HttpHeader.RETRY_AFTER)).isEqualTo("1");
            assertThat(answer.getContent()).isEqualTo("{\"error\":\"" + expected.text() + "\"}");
        } finally {
            server.stop();
        }
    }

    @Test
    void anInferenceTheFullPoolRefusesIsCountedAsOneRefusedInsideTheCorePath() throws Exception {
        SimpleMeterRegistry meters = new SimpleMeterRegistry();
        // The core path's refusal needs none of the exchange or the models: nothing runs.
        CoreInference core = new CoreInference(null, null, RestrictedApis.none(),
                new ProtocolMetrics(meters, "m"::equals), new InflightBytes(1 << 20), new DirectBufferPool(1 << 20),
                1 << 20, 1 << 16, Duration.ZERO, Duration.ZERO);
        LocalConnector connector = startWithAFullPool(() -> core);
        Server server = connector.getServer();
        try {
            // A body whole with its head goes to the core path; a chunked one to the servlet context.
            String whole = "POST /v2/models/m/infer HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                    + "Content-Length: 13\r\nConnection: close\r\n\r\n{\"inputs\":[]}";
            String chunked = "POST /v2/models/m/infer HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                    + "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\nd\r\n{\"inputs\":[]}\r\n0\r\n\r\n";
            // A name the core path does not take is counted as the servlet path counts it: unknown.
            String otherName = "POST /v2/models/a%20b/infer HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                    + "Content-Length: 13\r\nConnection: close\r\n\r\n{\"inputs\":[]}";
            for (String request : new String[] {whole, chunked, otherName}) {
                assertThat(HttpTester.parseResponse(connector.getResponse(request)).getStatus()).isEqualTo(503);
            }
            assertThat(HttpTester.parseResponse(connector.getResponse(
                    "GET /v2/models/m HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")).getStatus())
                    .isEqualTo(503);
            // Counted once the answer's write completes, which may come just after the client has it.
            refusals(meters, "m", 2);
            refusals(meters, "unknown", 1);
        } finally {
            server.stop();
        }
        assertThat(refusals(meters, "m", 2)).as("both inferences of m, not the metadata request").isEqualTo(2);
        assertThat(refusals(meters, "unknown", 1)).isEqualTo(1);
    }

    /** The REST series' 503 count for {@code model}, once it reaches {@code expected} (or after a 10 s guard). */
    private static long refusals(SimpleMeterRegistry meters, String model, long expected) throws InterruptedException {
        long until = System.nanoTime() + 10_000_000_000L;
        while (true) {
            Timer t = meters.find("etserve.inference.requests").tags("protocol", "rest", "model", model, "code", "503")
                    .timer();
            long count = t == null ? 0 : t.count();
            if (count >= expected || System.nanoTime() > until) {
                return count;
            }
            Thread.sleep(5);
        }
    }
}
