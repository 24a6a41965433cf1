package io.etserve.rest;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.support.Http;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.Reference;
import io.etserve.support.TestPaths;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * What an operator does to a served model's files (truncate or overwrite them in place, delete
 * them, replace them by a rename) never reaches the model: each version serves from the private
 * copy made when it loaded, so the process stays up and every answer stays the reference's,
 * under concurrent load, until a reload reads the repository again. Served from the repository
 * itself, the truncated weights would be pulled from under the portable kernels (SIGBUS: this
 * JVM would die).
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class RepositoryFileOperationsApiTest {

    static final ModelRepositoryFixture REPO = ModelRepositoryFixture.create("etserve-fileops-")
            .copy(TestPaths.testModels(), "external-weights-portable")
            .copy(TestPaths.demoModels(), "demo-xnnpack");
    static final Path WEIGHTS = REPO.root().resolve("external-weights-portable/1/_default_external_constant.ptd");
    static final Path WEIGHTS_PROGRAM = REPO.root().resolve("external-weights-portable/1/model.pte");
    static final Path DEMO_PROGRAM = REPO.root().resolve("demo-xnnpack/1/model.pte");

    @DynamicPropertySource
    static void properties(DynamicPropertyRegistry r) {
        r.add("etserve.model-repository", () -> REPO.root().toString());
        r.add("etserve.repository.mode", () -> "explicit");
        r.add("management.server.port", () -> "0");
    }

    @Value("${local.server.port}")
    int port;

    record Model(String name, Reference reference) {}

    final List<Model> models = List.of(
            new Model("external-weights-portable", Reference.load(
                    TestPaths.testModels().resolve("external-weights-portable/1/reference.json"))),
            new Model("demo-xnnpack", Reference.load(TestPaths.demoModels().resolve("demo-xnnpack/1/reference.json"))));

    @Test
    void nothingDoneToTheRepositoryReachesServedModelsUntilAReload() throws Exception {
        byte[] weights = Files.readAllBytes(WEIGHTS);
        byte[] weightsProgram = Files.readAllBytes(WEIGHTS_PROGRAM);
        byte[] demo = Files.readAllBytes(DEMO_PROGRAM);
        AtomicBoolean running = new AtomicBoolean(true);
        AtomicLong answered = new AtomicLong();
        ConcurrentLinkedQueue<String> wrong = new ConcurrentLinkedQueue<>();
        List<Thread> clients = new ArrayList<>();
        for (int c = 0; c < 4; c++) {
            Model model = models.get(c % models.size());
            Thread t = new Thread(() -> {
                Http http = Http.local(port);
                while (running.get()) {
                    String error = call(http, model);
                    if (error != null) {
                        wrong.add(error);
                    }
                    answered.incrementAndGet();
                }
            });
            t.start();
            clients.add(t);
        }
        try {
            // The weights cut short in place (an interrupted cp, rsync --inplace, a redirect), then empty.
            try (FileChannel ch = FileChannel.open(WEIGHTS, StandardOpenOption.WRITE)) {
                ch.truncate(weights.length / 2);
            }
            settle(answered);
            try (FileChannel ch = FileChannel.open(WEIGHTS, StandardOpenOption.WRITE)) {
                ch.truncate(0);
            }
            settle(answered);
            // A program overwritten in place with another program's bytes.
            Files.write(DEMO_PROGRAM, weightsProgram, StandardOpenOption.TRUNCATE_EXISTING);
            settle(answered);
            // Files deleted, then replaced by a rename.
            Files.delete(WEIGHTS);
            Files.delete(WEIGHTS_PROGRAM);
            settle(answered);
            Path staged = Files.createTempFile(REPO.root(), "staged", ".tmp");
            Files.write(staged, new byte[] {1, 2, 3});
            Files.move(staged, DEMO_PROGRAM, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
            settle(answered);
        } finally {
            running.set(false);
            for (Thread t : clients) {
                t.join(30_000);
            }
        }
        assertThat(wrong).as("answers that were not the reference's").isEmpty();
        assertThat(answered.get()).isGreaterThan(50);

        // A reload reads the repository again: the intact files back, then a reload of each.
        Files.write(WEIGHTS, weights);
        Files.write(WEIGHTS_PROGRAM, weightsProgram);
        Files.write(DEMO_PROGRAM, demo);
        Http http = Http.local(port);
        for (Model model : models) {
            Http.Response load = http.post("/v2/repository/models/" + model.name() + "/load", "");
            assertThat(load.status()).as(load.text()).isEqualTo(200);
            assertThat(call(http, model)).isNull();
        }
    }

    /** Waits until the clients have made a few more calls. */
    private static void settle(AtomicLong answered) throws InterruptedException {
        long target = answered.get() + 20;
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (answered.get() < target && System.nanoTime() < deadline) {
            Thread.sleep(5);
        }
    }

    /** Null when {@code model} answered every reference case right; otherwise what went wrong. */
    private static String call(Http http, Model model) {
        for (Reference.Case c : model.reference().cases()) {
            Http.Response r = http.postJson("/v2/models/" + model.name() + "/infer",
                    Map.of("inputs", c.inputs().stream().map(ProtocolApiTest::jsonInput).toList()));
            if (r.status() != 200) {
                return model.name() + ": HTTP " + r.status() + " " + r.text();
            }
            try {
                ProtocolApiTest.assertMatches(model.reference(), c.outputs().get(0), r.json().path("outputs").get(0));
            } catch (AssertionError e) {
                return model.name() + ": " + e.getMessage();
            }
        }
        return null;
    }
}
