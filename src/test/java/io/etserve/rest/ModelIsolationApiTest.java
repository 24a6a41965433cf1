package io.etserve.rest;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.support.Http;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.Reference;
import io.etserve.support.TestPaths;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * One model cannot change another's answers. XNNPACK shares packed weights across the process
 * by the key each file declares for a weight; a file whose weight bytes do not hash to their key
 * (a flipped byte, or weights forged under another model's keys) is refused at load, so the
 * model with the real weights keeps answering its reference whatever loads beside it.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class ModelIsolationApiTest {

    static final ModelRepositoryFixture REPO = ModelRepositoryFixture.create("etserve-isolation-");

    static {
        try {
            // "aa" sorts first, so it loads (and would fill the shared cache) before the real one.
            byte[] flipped = Files.readAllBytes(TestPaths.demoModels().resolve("demo-xnnpack/1/model.pte"));
            flipped[5446] ^= (byte) 0xad;  // inside the first layer's weights
            REPO.withProgramBytes("aa", flipped).copy(TestPaths.demoModels(), "demo-xnnpack");
            // The same keys as external-weights-xnnpack's, with other bytes under them.
            REPO.copy(TestPaths.testModels(), "external-weights-xnnpack", "a-forged")
                    .copy(TestPaths.testModels(), "external-weights-xnnpack");
            Path forged = REPO.root().resolve("a-forged/1/model.ptd");
            byte[] weights = Files.readAllBytes(forged);
            for (int i = 0; i < 64; i++) {
                weights[weights.length / 2 + i] ^= 0x5a;
            }
            Files.write(forged, weights);
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    @DynamicPropertySource
    static void properties(DynamicPropertyRegistry r) {
        r.add("etserve.model-repository", () -> REPO.root().toString());
        r.add("management.server.port", () -> "0");
    }

    @Value("${local.server.port}")
    int port;

    @Test
    void weightsThatDoNotHashToTheirKeysAreRefusedWithTheReason() {
        Http http = Http.local(port);
        for (String model : new String[] {"aa", "a-forged"}) {
            Http.Response ready = http.get("/v2/models/" + model + "/ready");
            assertThat(ready.status()).as(model).isEqualTo(503);
            assertThat(ready.json().path("reason").asString()).as(model).contains("does not hash to its key");
        }
    }

    @Test
    void theRealModelsAnswerTheirReferencesBesideThem() {
        Http http = Http.local(port);
        assertAnswersReference(http, "demo-xnnpack", TestPaths.demoModels().resolve("demo-xnnpack/1/reference.json"));
        assertAnswersReference(http, "external-weights-xnnpack",
                TestPaths.testModels().resolve("external-weights-xnnpack/1/reference.json"));
    }

    private static void assertAnswersReference(Http http, String model, Path referenceFile) {
        Reference ref = Reference.load(referenceFile);
        for (Reference.Case c : ref.cases()) {
            Http.Response r = http.postJson("/v2/models/" + model + "/infer",
                    Map.of("inputs", c.inputs().stream().map(ProtocolApiTest::jsonInput).toList()));
            assertThat(r.status()).as(r.text()).isEqualTo(200);
            ProtocolApiTest.assertMatches(ref, c.outputs().get(0), r.json().path("outputs").get(0));
        }
    }
}
