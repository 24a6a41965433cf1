package io.etserve.grpc;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.TestPaths;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * An independent client: Triton's Python gRPC client (tritonclient[grpc], pinned in
 * src/test/python/requirements.txt) against the real server: metadata, raw inference on both
 * demo models against their PyTorch references, every error code
 * (src/test/python/triton_grpc_check.py); and its HTTP and gRPC clients with its shared-memory
 * utilities against the system shared-memory extension (src/test/python/triton_shm_check.py).
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class TritonClientInteropTest {

    static final ModelRepositoryFixture REPO = ModelRepositoryFixture.create("etserve-triton-client-")
            .copy(TestPaths.demoModels(), "demo-portable")
            .copy(TestPaths.demoModels(), "demo-xnnpack")
            .withProgramBytes("broken", new byte[] {1, 2, 3, 4, 5, 6, 7, 8});

    @DynamicPropertySource
    static void properties(DynamicPropertyRegistry r) {
        r.add("etserve.model-repository", () -> REPO.root().toString());
        r.add("management.server.port", () -> "0");
        r.add("etserve.shared-memory.enabled", () -> "true");
    }

    @Autowired
    GrpcServer server;

    @Value("${local.server.port}")
    int port;

    @Test
    void tritonsGrpcClientPassesEveryCheck() throws Exception {
        Path root = TestPaths.repoRoot();
        String out = run(root, 180, clientPython(root), "src/test/python/triton_grpc_check.py",
                "127.0.0.1:" + server.port(), TestPaths.demoModels().toString());
        System.out.println(out);
        assertThat(out).contains("ok    demo-xnnpack case 0 output").contains("all checks passed");
    }

    @Test
    void tritonsSharedMemoryUtilitiesPassEveryCheckOverHttpAndGrpc() throws Exception {
        Path root = TestPaths.repoRoot();
        String out = run(root, 180, clientPython(root), "src/test/python/triton_shm_check.py",
                "127.0.0.1:" + port, "127.0.0.1:" + server.port(), TestPaths.demoModels().toString());
        System.out.println(out);
        assertThat(out).contains("ok    grpc: output written to shared memory matches").contains("all checks passed");
    }

    /** The Python of the clients' venv (scripts/client-venv.sh makes it once, then prints its path last). */
    static String clientPython(Path root) throws IOException, InterruptedException {
        String[] lines = run(root, 900, "bash", "scripts/client-venv.sh").strip().split("\n");
        return lines[lines.length - 1];
    }

    /** Runs a command in {@code dir}; its output, or a failure that shows it. */
    static String run(Path dir, int seconds, String... command) throws IOException, InterruptedException {
        Path log = Files.createTempFile("etserve-client-", ".log");
        Process p = new ProcessBuilder(List.of(command)).directory(dir.toFile()).redirectErrorStream(true)
                .redirectOutput(log.toFile()).start();
        boolean done = p.waitFor(seconds, TimeUnit.SECONDS);
        if (!done) {
            p.destroyForcibly();
        }
        String out = Files.readString(log, StandardCharsets.UTF_8);
        Files.deleteIfExists(log);
        assertThat(done && p.exitValue() == 0).as("%s exited %s:%n%s", String.join(" ", command),
                done ? p.exitValue() : "(timed out)", out).isTrue();
        return out;
    }
}
