package io.etserve.rest;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.cuda.StreamPools;
import io.etserve.health.CudaFaultMonitor;
import io.etserve.health.ProbeHealth;
import io.etserve.health.ProbeWarmup;
import io.etserve.runtime.ExecuTorchException;
import io.etserve.support.Http;
import io.etserve.support.ModelActivity;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.OpaqueStreamFactory;
import io.etserve.support.TestPaths;
import java.lang.reflect.Field;
import java.util.Collections;
import java.util.List;
import java.util.OptionalInt;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.actuate.endpoint.jackson.EndpointJsonMapper;
import org.springframework.boot.availability.AvailabilityChangeEvent;
import org.springframework.boot.availability.ReadinessState;
import org.springframework.boot.health.actuate.endpoint.HealthDescriptor;
import org.springframework.boot.health.actuate.endpoint.HealthEndpoint;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.TestConfiguration;
import org.springframework.context.ApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import tools.jackson.databind.SerializationContext;
import tools.jackson.databind.json.JsonMapper;
import tools.jackson.databind.ser.SerializerCache;

/**
 * One health truth: the protocol's {@code /v2/health/live|ready} (public port) answer exactly as
 * actuator's liveness and readiness groups (management port) in every state the service goes
 * through: ready with a failed model beside good ones, overloaded, not accepting traffic
 * (starting or shutting down), and after a sticky CUDA fault.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
@DirtiesContext
class HealthSurfacesApiTest {

    static final ModelRepositoryFixture REPO = ModelRepositoryFixture.create("etserve-health-")
            .copy(TestPaths.testModels(), "caller-stream-probe")
            .withFile("caller-stream-probe/config.yml",
                    "inputs: [ { name: x } ]\noutputs: [ { name: observed } ]\ninstances: 1\nplacement: gpu\n")
            .copy(TestPaths.demoModels(), "demo-xnnpack")
            .withProgramBytes("broken", new byte[] {1, 2, 3});

    @TestConfiguration
    static class OneOpaqueDevice {
        @Bean
        OpaqueStreamFactory opaqueStreamFactory() {
            return new OpaqueStreamFactory(List.of(0));
        }
    }

    @DynamicPropertySource
    static void properties(DynamicPropertyRegistry r) {
        r.add("etserve.model-repository", () -> REPO.root().toString());
        r.add("etserve.native.extra-libraries", () -> TestPaths.probeDelegate().toString());
        r.add("etserve.inference.queue-timeout", () -> "100ms");
        r.add("management.server.port", () -> "0");
    }

    @Value("${local.server.port}")
    int port;

    @Value("${local.management.port}")
    int managementPort;

    @Autowired
    ApplicationContext context;

    @Autowired
    CudaFaultMonitor faults;

    @Autowired
    StreamPools streams;

    record Surfaces(int protocolLive, int actuatorLive, int protocolReady, int actuatorReady) {}

    /** Reads all four answers and asserts the two surfaces agree; returns them for the state's own checks. */
    Surfaces agree() {
        Http http = Http.local(port);
        Http mgmt = Http.local(managementPort);
        Surfaces s = new Surfaces(http.get("/v2/health/live").status(), mgmt.get("/actuator/health/liveness").status(),
                http.get("/v2/health/ready").status(), mgmt.get("/actuator/health/readiness").status());
        assertThat(s.protocolLive()).as("live: %s", s).isEqualTo(s.actuatorLive());
        assertThat(s.protocolReady()).as("ready: %s", s).isEqualTo(s.actuatorReady());
        return s;
    }

    static String probe(float hostMillis) {
        return "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[2],\"data\":[0," + hostMillis + "]}]}";
    }

    @Autowired
    ProbeWarmup warmup;

    @Autowired
    EndpointJsonMapper endpointJson;

    @Test
    @Order(0)
    void theProbesAnswersWerePreparedBeforeAnyProbe() throws Exception {
        assertThat(warmup.done().get(30, TimeUnit.SECONDS)).as("bytes the warm-up serialized").isPositive();
        // No probe has been sent yet in this context: Jackson's serializer for the readiness
        // answer exists because the warm-up built it with the mapper Actuator answers with.
        HealthEndpoint endpoint = context.getBean(HealthEndpoint.class);
        HealthDescriptor readiness = endpoint.healthForPath(ProbeHealth.READINESS);
        assertThat(cachedSerializer(endpointJson.get(), readiness.getClass())).isNotNull();
        // And /actuator/health's, a type of its own (the groups' answers are composites alike).
        assertThat(cachedSerializer(endpointJson.get(), endpoint.health().getClass())).isNotNull();
        assertThat(agree().actuatorReady()).isEqualTo(200);
    }

    /** Jackson's cached serializer for a class, null when none was built yet (no public accessor). */
    static Object cachedSerializer(JsonMapper mapper, Class<?> type) throws ReflectiveOperationException {
        Field field = SerializationContext.class.getDeclaredField("_serializerCache");
        field.setAccessible(true);
        return ((SerializerCache) field.get(mapper._serializationContext())).untypedValueSerializer(type);
    }

    @Test
    @Order(1)
    void readyWithAFailedModelBesideGoodOnes() {
        assertThat(Http.local(port).get("/v2/models/broken/ready").status()).isEqualTo(503);
        Surfaces s = agree();
        assertThat(s.protocolLive()).isEqualTo(200);
        assertThat(s.protocolReady()).isEqualTo(200);
    }

    @Test
    @Order(2)
    void overloadedIsStillLiveAndReady() throws Exception {
        Http http = Http.local(port);
        CompletableFuture<Integer> slow = CompletableFuture.supplyAsync(
                () -> http.post("/v2/models/caller-stream-probe/infer", probe(1500)).status());
        ModelActivity.awaitLeasedStreams(streams.defaultPool().orElseThrow(), 1);  // it runs
        Http.Response refused = http.post("/v2/models/caller-stream-probe/infer", probe(0));
        assertThat(refused.status()).isEqualTo(503);
        Surfaces s = agree();
        assertThat(s.protocolLive()).isEqualTo(200);
        assertThat(s.protocolReady()).isEqualTo(200);
        assertThat(slow.get(30, TimeUnit.SECONDS)).isEqualTo(200);
    }

    @Test
    @Order(3)
    void notAcceptingTrafficIsNotReadyOnBothSurfaces() {
        // What startup (before ready) and graceful shutdown (first step) publish.
        AvailabilityChangeEvent.publish(context, ReadinessState.REFUSING_TRAFFIC);
        try {
            Surfaces s = agree();
            assertThat(s.protocolReady()).isEqualTo(503);
            assertThat(s.protocolLive()).isEqualTo(200);
        } finally {
            AvailabilityChangeEvent.publish(context, ReadinessState.ACCEPTING_TRAFFIC);
        }
        assertThat(agree().protocolReady()).isEqualTo(200);
    }

    @Test
    @Order(4)
    void aStickyFaultTakesBothSurfacesDown() {
        faults.onRuntimeFailure(OptionalInt.of(0),
                new ExecuTorchException("CudaError", 700, "cudaStreamSynchronize failed: cudaErrorIllegalAddress", ""));
        Surfaces s = agree();
        assertThat(s.protocolLive()).isEqualTo(503);
        assertThat(s.protocolReady()).isEqualTo(503);
        Http http = Http.local(port);
        assertThat(http.post("/v2/models/caller-stream-probe/infer", probe(0)).status()).isEqualTo(503);
        // The CPU model never touches the faulted device.
        String zeros = "[" + String.join(",", Collections.nCopies(16, "0")) + "]";
        assertThat(http.post("/v2/models/demo-xnnpack/infer",
                "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,16],\"data\":" + zeros + "}]}")
                .status()).isEqualTo(200);
    }
}
