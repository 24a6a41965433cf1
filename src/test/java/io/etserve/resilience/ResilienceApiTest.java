package io.etserve.resilience;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.health.CudaFaultMonitor;
import io.etserve.inference.InflightBytes;
import io.etserve.runtime.ExecuTorchException;
import io.etserve.support.Http;
import io.etserve.support.InlineCalls;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.RawConnection;
import io.etserve.support.TestPaths;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Overload, circuit breaking and the sticky-fault liveness switch, over real HTTP. The slow and
 * failing models are the test-only probe delegate told to sleep or to fail (its input x[1]).
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
@DirtiesContext
class ResilienceApiTest {

    static final ModelRepositoryFixture REPO = ModelRepositoryFixture.create("etserve-resilience-")
            .copy(TestPaths.testModels(), "caller-stream-probe")
            .copy(TestPaths.demoModels(), "demo-portable");

    static {
        // Two more names for the same probe program: one slow (capacity 1), one failing.
        REPO.withSlowProbe("slow").withSlowProbe("failing");
    }

    @DynamicPropertySource
    static void properties(DynamicPropertyRegistry r) {
        r.add("etserve.model-repository", () -> REPO.root().toString());
        r.add("etserve.native.extra-libraries", () -> TestPaths.probeDelegate().toString());
        InlineCalls.offForRest(r);
        r.add("etserve.inference.queue-timeout", () -> "200ms");
        r.add("etserve.inference.max-inflight-request-bytes", () -> "1MB");
        r.add("management.server.port", () -> "0");
        r.add("resilience4j.circuitbreaker.configs.default.sliding-window-size", () -> "4");
        r.add("resilience4j.circuitbreaker.configs.default.minimum-number-of-calls", () -> "4");
        r.add("resilience4j.circuitbreaker.configs.default.wait-duration-in-open-state", () -> "1s");
        r.add("resilience4j.circuitbreaker.configs.default.permitted-number-of-calls-in-half-open-state", () -> "1");
    }

    @Value("${local.server.port}")
    int port;

    @Value("${local.management.port}")
    int managementPort;

    @Autowired
    CudaFaultMonitor faults;

    @Autowired
    InflightBytes inflight;

    static String probe(float hostMillis) {
        return "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[2],\"data\":[0," + hostMillis + "]}]}";
    }

    record Outcome(int status, long millis, String retryAfter, long endNanos) {}

    @Test
    @Order(1)
    void overloadIsAnsweredQuicklyWith503WhileAdmittedCallsSucceed() throws Exception {
        Http http = Http.local(port);
        // One call first, so the burst measures the bounded wait and not the first request's
        // class loading (hundreds of ms on a cold JVM on 2 cores, which the rejected calls
        // would otherwise queue behind).
        assertThat(http.post("/v2/models/slow/infer", probe(0)).status()).isEqualTo(200);
        int callers = 6;
        ExecutorService exec = Executors.newFixedThreadPool(callers);
        CountDownLatch go = new CountDownLatch(1);
        List<Future<Outcome>> fs = new ArrayList<>();
        for (int i = 0; i < callers; i++) {
            fs.add(exec.submit(() -> {
                go.await();
                long t0 = System.nanoTime();
                Http.Response r = http.post("/v2/models/slow/infer", probe(2000));
                long end = System.nanoTime();
                return new Outcome(r.status(), (end - t0) / 1_000_000, r.header("Retry-After"), end);
            }));
        }
        go.countDown();
        List<Outcome> outcomes = new ArrayList<>();
        for (Future<Outcome> f : fs) {
            outcomes.add(f.get(30, TimeUnit.SECONDS));
        }
        exec.shutdown();
        List<Outcome> ok = outcomes.stream().filter(o -> o.status() == 200).toList();
        List<Outcome> rejected = outcomes.stream().filter(o -> o.status() == 503).toList();
        assertThat(ok.size() + rejected.size()).as(outcomes.toString()).isEqualTo(callers);
        assertThat(ok).as("capacity 1: one call runs at a time").hasSizeBetween(1, 2);
        assertThat(ok).allSatisfy(o -> assertThat(o.millis()).isGreaterThanOrEqualTo(1990));
        // Rejected before the admitted call ends (the queue's 200 ms against its 2 s): the bounded
        // wait, not a request hung until the instance came free.
        long firstAnswered = ok.stream().mapToLong(Outcome::endNanos).min().orElseThrow();
        assertThat(rejected).isNotEmpty().allSatisfy(o -> {
            assertThat(o.endNanos()).isLessThan(firstAnswered);
            assertThat(o.retryAfter()).isNotNull();
        });
        // Capacity comes back.
        assertThat(http.post("/v2/models/slow/infer", probe(0)).status()).isEqualTo(200);
    }

    @Test
    @Order(5)
    void requestBytesInFlightAreBoundedAcrossModels() throws Exception {
        // 700 KB bodies (valid JSON padded with spaces) against a 1 MB budget: while one slow call
        // holds its body, a second one is refused quickly instead of piling up memory.
        String padded = probe(2000) + " ".repeat(700 * 1024);
        Http http = Http.local(port);
        ExecutorService exec = Executors.newFixedThreadPool(2);
        Future<Integer> first = exec.submit(() -> http.post("/v2/models/caller-stream-probe/infer", padded).status());
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (inflight.held() < 700 * 1024) {  // the first body has arrived and is held
            assertThat(System.nanoTime()).as("the first body never arrived").isLessThan(until);
            Thread.sleep(2);
        }
        try (RawConnection c = RawConnection.open(port, 10_000)) {
            RawConnection.Response second = c.exchange(RawConnection.post("/v2/models/slow/infer", padded));
            assertThat(second.status()).isEqualTo(503);
            assertThat(second.text()).contains("bytes in flight");
            assertThat(second.header("retry-after")).isNotNull();
            assertThat(first.isDone()).as("refused while the first call still runs, not after waiting for it").isFalse();
            // The refused body was read to its end and thrown away, so the connection carries on
            // (closing it with unread bytes would reset it, and the client might never see the 503).
            assertThat(second.header("connection")).isNull();
            assertThat(c.exchange(RawConnection.post("/v2/models/slow/infer", probe(0))).status())
                    .isEqualTo(200);
        }
        assertThat(first.get(30, TimeUnit.SECONDS)).isEqualTo(200);
        exec.shutdown();
        // Budget released afterwards.
        assertThat(http.post("/v2/models/slow/infer", padded).status()).isEqualTo(200);
    }

    @Test
    @Order(2)
    void aFailingModelOpensItsBreakerLeavesReadinessAndComesBackHalfOpen() throws Exception {
        Http http = Http.local(port);
        for (int i = 0; i < 4; i++) {
            Http.Response r = http.post("/v2/models/failing/infer", probe(-1));
            assertThat(r.status()).as(r.text()).isEqualTo(500);
            assertThat(r.json().path("error").asString()).contains("Internal");
        }
        Http.Response open = http.post("/v2/models/failing/infer", probe(0));
        assertThat(open.status()).isEqualTo(503);
        assertThat(open.json().path("error").asString()).contains("circuit breaker");
        // The breaker's open interval (1 s here) tells clients when to come back.
        assertThat(open.header("Retry-After")).isEqualTo("1");
        Http.Response ready = http.get("/v2/models/failing/ready");
        assertThat(ready.status()).isEqualTo(503);
        assertThat(ready.json().path("reason").asString()).contains("circuit breaker");
        String models = Http.local(managementPort).get("/actuator/health/readiness").text();
        assertThat(models).contains("NOT_ADMITTING");
        // Other models keep serving, and the server stays ready.
        assertThat(http.post("/v2/models/caller-stream-probe/infer", probe(0)).status()).isEqualTo(200);
        assertThat(http.get("/v2/health/ready").status()).isEqualTo(200);

        // After the open interval a half-open probe goes through; success closes the breaker.
        Thread.sleep(1300);
        assertThat(http.post("/v2/models/failing/infer", probe(0)).status()).isEqualTo(200);
        assertThat(http.get("/v2/models/failing/ready").json().path("ready").asBoolean()).isTrue();
    }

    @Test
    @Order(3)
    void badInputNeverOpensTheBreaker() {
        Http http = Http.local(port);
        for (int i = 0; i < 8; i++) {
            assertThat(http.post("/v2/models/caller-stream-probe/infer",
                    "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP64\",\"shape\":[2],\"data\":[0,0]}]}").status())
                    .isEqualTo(400);
        }
        assertThat(http.get("/v2/models/caller-stream-probe/ready").json().path("ready").asBoolean()).isTrue();

        // A client's shape mistake ([1, 8] for a [1, 16] input) is refused before execution and
        // never reaches the breaker: the burst is 400s, the next good calls are 200s.
        String eight = "[" + String.join(",", Collections.nCopies(8, "0")) + "]";
        String sixteen = "[" + String.join(",", Collections.nCopies(16, "0")) + "]";
        for (int i = 0; i < 8; i++) {
            Http.Response r = http.post("/v2/models/demo-portable/infer",
                    "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,8],\"data\":" + eight + "}]}");
            assertThat(r.status()).as(r.text()).isEqualTo(400);
            assertThat(r.json().path("error").asString()).contains("16");
        }
        for (int i = 0; i < 4; i++) {
            assertThat(http.post("/v2/models/demo-portable/infer",
                    "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,16],\"data\":" + sixteen + "}]}")
                    .status()).isEqualTo(200);
        }
        assertThat(http.get("/v2/models/demo-portable/ready").json().path("ready").asBoolean()).isTrue();
    }

    @Test
    @Order(4)
    void aStickyCudaFaultBreaksLivenessSoThePodIsRestarted() {
        Http mgmt = Http.local(managementPort);
        assertThat(mgmt.get("/actuator/health/liveness").status()).isEqualTo(200);
        // A non-sticky CUDA error (out of memory) leaves liveness alone.
        faults.accept(new ExecuTorchException("CudaError", 2, "cudaMalloc failed: cudaErrorMemoryAllocation", ""));
        assertThat(mgmt.get("/actuator/health/liveness").status()).isEqualTo(200);
        // What the bridge reports when cudaStreamSynchronize hits an illegal address.
        faults.accept(new ExecuTorchException("CudaError", 700,
                "cudaStreamSynchronize failed: cudaErrorIllegalAddress: an illegal memory access was encountered", ""));
        Http.Response live = mgmt.get("/actuator/health/liveness");
        assertThat(live.status()).isEqualTo(503);
        assertThat(live.json().path("status").asString()).isEqualTo("DOWN");
        assertThat(mgmt.get("/actuator/health/readiness").text()).contains("stickyFault");
    }
}
