package io.etserve.rest;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.support.Http;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.Reference;
import io.etserve.support.TestPaths;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * {@code etserve.repository.require-digest}: only files that declare their sha256 load. A file
 * changed where no verification reads (a delegate's payload) can crash the process at its first
 * call, so such a deployment never runs bytes nobody vouched for.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class RequiredDigestApiTest {

    static final ModelRepositoryFixture REPO = ModelRepositoryFixture.create("etserve-digests-");

    static {
        try {
            REPO.copy(TestPaths.demoModels(), "demo-xnnpack", "vouched")
                    .withFile("vouched/1/model.pte.sha256", UntrustedProgramsApiTest.sha256(
                            UntrustedProgramsApiTest.DEMO_XNNPACK) + "  model.pte\n")
                    .copy(TestPaths.demoModels(), "demo-portable", "unvouched");
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    @DynamicPropertySource
    static void properties(DynamicPropertyRegistry r) {
        r.add("etserve.model-repository", () -> REPO.root().toString());
        r.add("etserve.repository.require-digest", () -> "true");
        r.add("management.server.port", () -> "0");
    }

    @Value("${local.server.port}")
    int port;

    @Test
    void aFileWithoutADigestIsRefusedAndAVouchedOneServesItsReference() {
        Http http = Http.local(port);
        Http.Response unvouched = http.get("/v2/models/unvouched/ready");
        assertThat(unvouched.status()).isEqualTo(503);
        assertThat(unvouched.json().path("reason").asString()).contains("model.pte declares no sha256")
                .contains("etserve.repository.require-digest");
        Reference ref = Reference.load(TestPaths.demoModels().resolve("demo-xnnpack/1/reference.json"));
        for (Reference.Case c : ref.cases()) {
            Http.Response r = http.postJson("/v2/models/vouched/infer",
                    Map.of("inputs", c.inputs().stream().map(ProtocolApiTest::jsonInput).toList()));
            assertThat(r.status()).as(r.text()).isEqualTo(200);
            ProtocolApiTest.assertMatches(ref, c.outputs().get(0), r.json().path("outputs").get(0));
        }
    }
}
