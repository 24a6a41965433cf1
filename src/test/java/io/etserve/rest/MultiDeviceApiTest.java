package io.etserve.rest;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.health.CudaFaultMonitor;
import io.etserve.runtime.ExecuTorchException;
import io.etserve.support.Http;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.OpaqueStreamFactory;
import io.etserve.support.Reference;
import io.etserve.support.TestPaths;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.OptionalInt;
import java.util.Set;
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
import org.springframework.boot.test.context.TestConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import tools.jackson.databind.JsonNode;

/**
 * Two devices, with opaque handles (no GPU here; the two-GPU run is the multi-GPU issue's):
 * placement by list and by spread, each call on a stream of its instance's device, per-device
 * health, and a device-scoped fault that takes out only that device's instances.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
@DirtiesContext
class MultiDeviceApiTest {

    static final ModelRepositoryFixture REPO = ModelRepositoryFixture.create("etserve-devices-")
            .copy(TestPaths.testModels(), "caller-stream-probe")
            .copy(TestPaths.demoModels(), "demo-portable")
            .copy(TestPaths.demoModels(), "demo-xnnpack")
            .withFile("caller-stream-probe/config.yml",
                    "inputs: [ { name: x } ]\noutputs: [ { name: observed } ]\ndevices: all\ninstances: 2\n"
                            + "placement: gpu\n")
            // A CPU program forced onto the stream path; demo-xnnpack stays a CPU model.
            .withFile("demo-portable/config.yml",
                    "inputs: [ { name: x } ]\noutputs: [ { name: y } ]\nplacement: gpu\n");

    @TestConfiguration
    static class TwoOpaqueDevices {
        @Bean
        OpaqueStreamFactory opaqueStreamFactory() {
            return new OpaqueStreamFactory(List.of(0, 1));
        }
    }

    @DynamicPropertySource
    static void properties(DynamicPropertyRegistry r) {
        r.add("etserve.model-repository", () -> REPO.root().toString());
        r.add("etserve.native.extra-libraries", () -> TestPaths.probeDelegate().toString());
        r.add("etserve.cuda.streams-per-device", () -> "2");
        r.add("management.server.port", () -> "0");
    }

    @Value("${local.server.port}")
    int port;

    @Value("${local.management.port}")
    int managementPort;

    @Autowired
    OpaqueStreamFactory streams;

    @Autowired
    CudaFaultMonitor faults;

    static final String PROBE = "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[2],\"data\":[0,2]}]}";

    Set<Integer> devicesSeen(Http http, int threads, int calls) throws Exception {
        ExecutorService exec = Executors.newFixedThreadPool(threads);
        List<Future<Set<Integer>>> fs = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            fs.add(exec.submit(() -> {
                Set<Integer> seen = new HashSet<>();
                for (int i = 0; i < calls; i++) {
                    Http.Response r = http.post("/v2/models/caller-stream-probe/infer", PROBE);
                    if (r.status() == 503) {
                        continue;
                    }
                    assertThat(r.status()).as(r.text()).isEqualTo(200);
                    JsonNode d = r.json().path("outputs").get(0).path("data");
                    assertThat(d.get(0).asLong()).isEqualTo(1);
                    Integer device = streams.deviceOf(d.get(1).asLong());
                    assertThat(device).as("a handle of the pools").isNotNull();
                    seen.add(device);
                }
                return seen;
            }));
        }
        Set<Integer> all = new HashSet<>();
        for (Future<Set<Integer>> f : fs) {
            all.addAll(f.get(120, TimeUnit.SECONDS));
        }
        exec.shutdown();
        return all;
    }

    @Test
    @Order(1)
    void modelsArePlacedAndServeCorrectlyOnBothDevices() throws Exception {
        JsonNode models = Http.local(managementPort).get("/actuator/health/readiness").json()
                .path("components").path("models").path("details").path("models");
        assertThat(models.path("caller-stream-probe:1").path("placement").asString()).isEqualTo("cuda:0,cuda:1");
        // instances are per device: 2 on each of the two devices
        assertThat(models.path("caller-stream-probe:1").path("instances").asInt()).isEqualTo(4);
        // spread: whole GPU models on devices in turn, in repository order (the probe counted as 0)
        assertThat(models.path("demo-portable:1").path("placement").asString()).isEqualTo("cuda:1");
        assertThat(models.path("demo-portable:1").path("instances").asInt()).isEqualTo(1);
        // no GPU delegate: a CPU model on a GPU node
        assertThat(models.path("demo-xnnpack:1").path("placement").asString()).isEqualTo("cpu");
        JsonNode pools = Http.local(managementPort).get("/actuator/health/readiness").json()
                .path("components").path("cuda").path("details").path("streamPools");
        assertThat(pools.size()).isEqualTo(2);

        Http http = Http.local(port);
        for (String model : List.of("demo-portable", "demo-xnnpack")) {
            Reference ref = Reference.load(TestPaths.demoModels().resolve(model + "/1/reference.json"));
            Reference.Case c = ref.cases().get(0);
            Http.Response r = http.postJson("/v2/models/" + model + "/infer",
                    Map.of("inputs", c.inputs().stream().map(ProtocolApiTest::jsonInput).toList()));
            assertThat(r.status()).isEqualTo(200);
            ProtocolApiTest.assertMatches(ref, c.outputs().get(0), r.json().path("outputs").get(0));
        }
        assertThat(devicesSeen(http, 4, 25)).containsExactlyInAnyOrder(0, 1);
    }

    @Test
    @Order(2)
    void aFaultOnOneDeviceTakesOutOnlyItsInstances() throws Exception {
        ExecuTorchException illegalAddress = new ExecuTorchException("CudaError", 700,
                "cudaStreamSynchronize failed: cudaErrorIllegalAddress", "");
        faults.onRuntimeFailure(OptionalInt.of(1), illegalAddress);

        Http http = Http.local(port);
        assertThat(devicesSeen(http, 4, 15)).containsExactly(0);
        Http.Response pinned = http.get("/v2/models/demo-portable/ready");
        assertThat(pinned.status()).isEqualTo(503);
        assertThat(pinned.json().path("reason").asString()).contains("device 1 is faulted");
        assertThat(http.get("/v2/models/demo-xnnpack/ready").status()).isEqualTo(200);
        Http mgmt = Http.local(managementPort);
        assertThat(mgmt.get("/actuator/health/liveness").status()).isEqualTo(200);
        assertThat(http.get("/v2/health/live").status()).isEqualTo(200);

        // The last served device goes too: now the process needs a restart, and both health
        // surfaces say so.
        faults.onRuntimeFailure(OptionalInt.of(0), illegalAddress);
        assertThat(mgmt.get("/actuator/health/liveness").status()).isEqualTo(503);
        assertThat(http.get("/v2/health/live").status()).isEqualTo(503);
        assertThat(http.get("/v2/health/ready").status()).isEqualTo(mgmt.get("/actuator/health/readiness").status());
        assertThat(http.post("/v2/models/caller-stream-probe/infer", PROBE).status()).isEqualTo(503);
        // The CPU model never touched a device: it still serves correct answers.
        Reference ref = Reference.load(TestPaths.demoModels().resolve("demo-xnnpack/1/reference.json"));
        Reference.Case c = ref.cases().get(0);
        Http.Response r = http.postJson("/v2/models/demo-xnnpack/infer",
                Map.of("inputs", c.inputs().stream().map(ProtocolApiTest::jsonInput).toList()));
        assertThat(r.status()).isEqualTo(200);
        ProtocolApiTest.assertMatches(ref, c.outputs().get(0), r.json().path("outputs").get(0));
    }
}
