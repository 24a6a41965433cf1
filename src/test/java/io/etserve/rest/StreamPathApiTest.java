package io.etserve.rest;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.cuda.StreamFactory;
import io.etserve.support.Http;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.OpaqueStreamFactory;
import io.etserve.support.TestPaths;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.TestConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import tools.jackson.databind.JsonNode;

/**
 * The stream path end to end over REST: every forward call runs on a leased stream inside
 * ExecuTorch's guard, and the probe delegate reports the handle it saw. Opaque handles stand in
 * for CUDA streams on hosts without a GPU (the GPU suite repeats this with real streams).
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class StreamPathApiTest {

    static final int STREAMS = 3;
    static final ModelRepositoryFixture REPO = ModelRepositoryFixture.create("etserve-streams-")
            .copy(TestPaths.testModels(), "caller-stream-probe")
            .copy(TestPaths.demoModels(), "demo-portable")
            // The probe with a dynamic batch: six one-row requests make one forward call.
            .copy(TestPaths.testModels(), "batched-probe")
            .withFile("batched-probe/config.yml", "inputs: [ { name: x, dims: [-1, 2] } ]\noutputs: [ { name: observed } ]\n"
                    + "placement: gpu\ninstances: 1\n"
                    + "dynamic-batching: { max-batch-size: 32, max-queue-delay: 10s, preferred-batch-sizes: [6] }\n");

    @TestConfiguration
    static class OpaqueStreams {
        @Bean
        OpaqueStreamFactory opaqueStreamFactory() {
            return new OpaqueStreamFactory(List.of(0));
        }
    }

    @DynamicPropertySource
    static void properties(DynamicPropertyRegistry r) {
        r.add("etserve.model-repository", () -> REPO.root().toString());
        r.add("etserve.native.extra-libraries", () -> TestPaths.probeDelegate().toString());
        r.add("etserve.cuda.streams-per-device", () -> Integer.toString(STREAMS));
        r.add("management.server.port", () -> "0");
    }

    @Value("${local.server.port}")
    int port;

    @Value("${local.management.port}")
    int managementPort;

    @Autowired
    StreamFactory streams;

    static final String PROBE_REQUEST =
            "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[2],\"data\":[0,0]}]}";

    long[] observed(Http.Response r) {
        assertThat(r.status()).as(r.text()).isEqualTo(200);
        JsonNode o = r.json().path("outputs").get(0);
        assertThat(o.path("name").asString()).isEqualTo("observed");
        assertThat(o.path("datatype").asString()).isEqualTo("INT64");
        JsonNode d = o.path("data");
        return new long[] {d.get(0).asLong(), d.get(1).asLong(), d.get(2).asLong()};
    }

    @Test
    void eachRequestRunsOnTheStreamItLeased() {
        OpaqueStreamFactory factory = (OpaqueStreamFactory) streams;
        Http http = Http.local(port);
        for (int i = 0; i < 10; i++) {
            factory.synchronizedHandles.clear();
            long[] seen = observed(http.post("/v2/models/caller-stream-probe/infer", PROBE_REQUEST));
            assertThat(seen[0]).as("a selection was made").isEqualTo(1);
            // The lease handed back after this request (and synchronized on return) is the stream
            // the delegate saw.
            assertThat(factory.synchronizedHandles).containsExactly(seen[1]);
        }
    }

    @Test
    void concurrentRequestsSeeOnlyPoolStreams() throws Exception {
        Http http = Http.local(port);
        ExecutorService exec = Executors.newFixedThreadPool(6);
        List<Future<Set<Long>>> fs = new ArrayList<>();
        for (int t = 0; t < 6; t++) {
            fs.add(exec.submit(() -> {
                Set<Long> seen = new HashSet<>();
                for (int i = 0; i < 30; i++) {
                    Http.Response r = http.post("/v2/models/caller-stream-probe/infer", PROBE_REQUEST);
                    if (r.status() == 503) {
                        continue;
                    }
                    long[] o = observed(r);
                    assertThat(o[0]).isEqualTo(1);
                    seen.add(o[1]);
                }
                return seen;
            }));
        }
        Set<Long> all = new HashSet<>();
        for (Future<Set<Long>> f : fs) {
            all.addAll(f.get(120, TimeUnit.SECONDS));
        }
        exec.shutdown();
        Set<Long> pool = new HashSet<>();
        for (int i = 0; i < STREAMS; i++) {
            pool.add(OpaqueStreamFactory.BASE + 0x100L * i);
        }
        assertThat(all).isNotEmpty().isSubsetOf(pool);
    }

    @Test
    void aBatchRunsAsOneForwardCallOnOneLeasedStreamUnderTheGuard() throws Exception {
        OpaqueStreamFactory factory = (OpaqueStreamFactory) streams;
        factory.synchronizedHandles.clear();
        Http http = Http.local(port);
        ExecutorService exec = Executors.newFixedThreadPool(6);
        List<Future<Http.Response>> fs = new ArrayList<>();
        for (int t = 0; t < 6; t++) {
            fs.add(exec.submit(() -> http.post("/v2/models/batched-probe/infer",
                    "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,2],\"data\":[0,0]}]}")));
        }
        Set<Long> handles = new HashSet<>();
        for (Future<Http.Response> f : fs) {
            Http.Response r = f.get(30, TimeUnit.SECONDS);
            assertThat(r.json().path("outputs").get(0).path("shape").toString()).isEqualTo("[1,3]");
            long[] o = observed(r);
            assertThat(o[0]).as("the batch ran under the guard").isEqualTo(1);
            handles.add(o[1]);
        }
        exec.shutdown();
        // One stream for all six requests, leased once and synchronized once on return.
        assertThat(handles).hasSize(1);
        assertThat(factory.synchronizedHandles).containsExactlyElementsOf(handles);
        String prom = Http.local(managementPort).get("/actuator/prometheus").text();
        assertThat(prom).contains("nv_inference_exec_count{model=\"batched-probe\",version=\"1\"} 1.0")
                .contains("nv_inference_count{model=\"batched-probe\",version=\"1\"} 6.0");
    }

    @Test
    void cpuProgramsStayOffTheStreamPath() {
        OpaqueStreamFactory factory = (OpaqueStreamFactory) streams;
        Http http = Http.local(port);
        String prom = Http.local(managementPort).get("/actuator/prometheus").text();
        String leases = leaseCount(prom);
        factory.synchronizedHandles.clear();
        String zeros = "[" + String.join(",", Collections.nCopies(16, "0")) + "]";
        for (int i = 0; i < 5; i++) {
            Http.Response r = http.post("/v2/models/demo-portable/infer",
                    "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,16],\"data\":" + zeros + "}]}");
            assertThat(r.status()).isEqualTo(200);
        }
        // No stream was leased, so none was synchronized on return.
        assertThat(factory.synchronizedHandles).isEmpty();
        assertThat(leaseCount(Http.local(managementPort).get("/actuator/prometheus").text())).isEqualTo(leases);

        JsonNode health = Http.local(managementPort).get("/actuator/health/readiness").json();
        JsonNode pools = health.path("components").path("cuda").path("details").path("streamPools");
        assertThat(pools.size()).isEqualTo(1);
        assertThat(pools.get(0).path("streams").asInt()).isEqualTo(STREAMS);
        JsonNode models = health.path("components").path("models").path("details").path("models");
        assertThat(models.path("demo-portable:1").path("placement").asString()).isEqualTo("cpu");
        assertThat(models.path("caller-stream-probe:1").path("placement").asString()).isEqualTo("cuda:0");
        // GPU models get etserve.cuda.default-instances unless config.yml sets instances (the probe: 1)
        assertThat(models.path("caller-stream-probe:1").path("instances").asInt()).isEqualTo(1);
        assertThat(prom).contains("etserve_stream_pool_streams{device=\"0\"} 3.0");
    }

    private static String leaseCount(String prometheus) {
        return prometheus.lines().filter(l -> l.startsWith("etserve_stream_lease_wait_seconds_count{device=\"0\"}"))
                .findFirst().orElseThrow();
    }
}
