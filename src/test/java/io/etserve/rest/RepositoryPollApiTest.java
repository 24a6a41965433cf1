package io.etserve.rest;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.support.Http;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.Reference;
import io.etserve.support.TestPaths;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.function.IntPredicate;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/** etserve.repository.mode=poll: a model copied into the repository serves; one removed goes. */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class RepositoryPollApiTest {

    static final ModelRepositoryFixture REPO = ModelRepositoryFixture.create("etserve-poll-")
            .copy(TestPaths.demoModels(), "demo-portable");

    @DynamicPropertySource
    static void properties(DynamicPropertyRegistry r) {
        r.add("etserve.model-repository", () -> REPO.root().toString());
        r.add("etserve.repository.mode", () -> "poll");
        r.add("etserve.repository.poll-interval", () -> "200ms");
        r.add("management.server.port", () -> "0");
    }

    @Value("${local.server.port}")
    int port;

    @Test
    void whatChangesOnDiskLoadsAndUnloads() throws Exception {
        Http http = Http.local(port);
        Reference ref = Reference.load(TestPaths.demoModels().resolve("demo-xnnpack/1/reference.json"));
        String request = "{\"inputs\":[" + ref.cases().get(0).inputs().get(0).json() + "]}";
        assertThat(http.post("/v2/models/added/infer", request).status()).isEqualTo(404);

        REPO.copy(TestPaths.demoModels(), "demo-xnnpack", "added");
        assertThat(awaitStatus(http, "/v2/models/added/infer", request, s -> s == 200)).isEqualTo(200);

        try (Stream<Path> files = Files.walk(REPO.root().resolve("added"))) {
            files.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        }
        assertThat(awaitStatus(http, "/v2/models/added/infer", request, s -> s == 404)).isEqualTo(404);
        // the model that stayed was never touched
        assertThat(http.post("/v2/models/demo-portable/infer", request).status()).isEqualTo(200);
    }

    private static int awaitStatus(Http http, String path, String body, IntPredicate done) throws InterruptedException {
        int status = -1;
        for (long end = System.nanoTime() + 20_000_000_000L; System.nanoTime() < end; Thread.sleep(100)) {
            status = http.post(path, body).status();
            if (done.test(status)) {
                return status;
            }
        }
        return status;
    }
}
