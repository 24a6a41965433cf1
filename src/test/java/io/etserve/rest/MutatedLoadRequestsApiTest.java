package io.etserve.rest;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.support.Http;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.RawConnection;
import io.etserve.support.RequestMutator;
import io.etserve.support.TestPaths;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.node.ObjectNode;

/**
 * Seeded, random variants of a repository load request carrying a Triton model configuration
 * (what {@code tritonclient}'s {@code load_model(..., config=...)} sends): the configuration with
 * values replaced, removed, added or repeated, cut short, or the request's own body changed. Each
 * is loaded or refused with a 4xx whose message says more than the status, never a 5xx, never an
 * ERROR in the log; the model serves the reference answer after all of them. Replay one seed with
 * {@code -Detserve.test.mutation-seed=N}.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
@ExtendWith(OutputCaptureExtension.class)
class MutatedLoadRequestsApiTest {

    static final ModelRepositoryFixture REPO = ModelRepositoryFixture.create("etserve-mutated-load-")
            .copy(TestPaths.demoModels(), "demo-portable");
    static final long SEED = Long.getLong("etserve.test.mutation-seed", 20261207L);
    static final String LOAD = "/v2/repository/models/demo-portable/load";

    @DynamicPropertySource
    static void properties(DynamicPropertyRegistry r) {
        r.add("etserve.model-repository", () -> REPO.root().toString());
        r.add("etserve.repository.mode", () -> "explicit");
        r.add("management.server.port", () -> "0");
    }

    @Value("${local.server.port}")
    int port;

    /** demo-portable's configuration as Triton writes it. */
    static JsonNode validConfig() {
        return Http.JSON.readTree("""
                {"name": "demo-portable", "platform": "executorch", "max_batch_size": 0,
                 "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [1, 16]}],
                 "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [1, 4]}],
                 "instance_group": [{"count": 1, "kind": "KIND_CPU"}],
                 "version_policy": {"latest": {"num_versions": 1}}}
                """);
    }

    @Test
    void everyVariantLoadsOrIsRefusedClearlyAndTheModelStillAnswersRight(CapturedOutput output) throws IOException {
        assertThat(Http.local(port).post(LOAD, "{}").status()).isEqualTo(200);
        RequestMutator mutator = new RequestMutator(SEED);
        List<String> problems = new ArrayList<>();
        int loaded = 0;
        for (int i = 0; i < 300; i++) {
            String config = mutator.mutate(validConfig()).toString();
            int kind = mutator.random().nextInt(10);
            if (kind == 0) {
                config = config.substring(0, mutator.random().nextInt(config.length()));
            }
            ObjectNode request = Http.JSON.createObjectNode();
            request.putObject("parameters").put("config", config);
            byte[] body = (kind == 1 ? mutator.mutate(request) : request).toString().getBytes(StandardCharsets.UTF_8);
            if (kind == 2) {
                body = mutator.mutate(body);
            }
            RawConnection.Response r = MutatedRequestsApiTest.post(port, LOAD, "application/json", Map.of(), body);
            String problem = MutatedRequestsApiTest.problem(r);
            if (problem != null) {
                String sent = new String(body, StandardCharsets.UTF_8);
                problems.add("#" + i + " " + problem + "; sent " + sent.substring(0, Math.min(sent.length(), 400)));
            } else if (r.status() == 200) {
                loaded++;
            }
        }
        assertThat(problems).as("seed %d", SEED).isEmpty();
        assertThat(loaded).as("variants that still load").isPositive();
        assertThat(output.getAll()).doesNotContain(" ERROR ");
        assertThat(Http.local(port).post(LOAD, "{}").status()).isEqualTo(200);
        MutatedRequestsApiTest.assertReferenceAnswer(port);
    }
}
