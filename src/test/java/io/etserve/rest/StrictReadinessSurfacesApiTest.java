package io.etserve.rest;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.support.Http;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.TestPaths;
import java.util.Collections;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * With strict readiness one failed model keeps the server out of rotation: both health surfaces
 * say not ready, both still say live, and the good model keeps serving.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class StrictReadinessSurfacesApiTest {

    static final ModelRepositoryFixture REPO = ModelRepositoryFixture.create("etserve-strict-")
            .copy(TestPaths.demoModels(), "demo-xnnpack")
            .withProgramBytes("broken", new byte[] {1, 2, 3});

    @DynamicPropertySource
    static void properties(DynamicPropertyRegistry r) {
        r.add("etserve.model-repository", () -> REPO.root().toString());
        r.add("etserve.inference.strict-readiness", () -> "true");
        r.add("management.server.port", () -> "0");
    }

    @Value("${local.server.port}")
    int port;

    @Value("${local.management.port}")
    int managementPort;

    @Test
    void aFailedModelMakesBothSurfacesNotReadyButLive() {
        Http http = Http.local(port);
        Http mgmt = Http.local(managementPort);
        assertThat(http.get("/v2/health/ready").status()).isEqualTo(503);
        assertThat(mgmt.get("/actuator/health/readiness").status()).isEqualTo(503);
        assertThat(http.get("/v2/health/live").status()).isEqualTo(200);
        assertThat(mgmt.get("/actuator/health/liveness").status()).isEqualTo(200);
        String zeros = "[" + String.join(",", Collections.nCopies(16, "0")) + "]";
        assertThat(http.post("/v2/models/demo-xnnpack/infer",
                "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,16],\"data\":" + zeros + "}]}")
                .status()).isEqualTo(200);
    }
}
