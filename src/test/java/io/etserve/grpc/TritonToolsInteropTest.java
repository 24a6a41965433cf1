package io.etserve.grpc;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.TestPaths;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Triton's Python clients (tritonclient[grpc,http], pinned in src/test/python/requirements.txt)
 * against the real server: get_model_config read through Triton's own model_config.proto,
 * get_inference_statistics counting the requests sent, infer with request_compression_algorithm
 * gzip and deflate, load_model(config=...) as Model Analyzer sends it, and refusals
 * (src/test/python/triton_tools_check.py).
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class TritonToolsInteropTest {

    static final String DIMS = "inputs: [ { name: x, dims: [-1, 16] } ]\noutputs: [ { name: y } ]\n";
    static final ModelRepositoryFixture REPO = ModelRepositoryFixture.create("etserve-triton-tools-")
            .copy(TestPaths.demoModels(), "demo-portable")
            .copy(TestPaths.testModels(), "dynamic-batch", "batched")
            .withFile("batched/config.yml", DIMS + "instances: 2\ndynamic-batching:\n  max-batch-size: 8\n"
                    + "  max-queue-delay: 500us\n")
            .copy(TestPaths.testModels(), "dynamic-batch", "plain")
            .withFile("plain/config.yml", DIMS + "instances: 1\n");

    @DynamicPropertySource
    static void properties(DynamicPropertyRegistry r) {
        r.add("etserve.model-repository", () -> REPO.root().toString());
        r.add("etserve.repository.mode", () -> "explicit");
        r.add("management.server.port", () -> "0");
    }

    @Value("${local.server.port}")
    int port;

    @Autowired
    GrpcServer server;

    @Test
    void tritonsClientsReadTheConfigurationAndStatisticsAndLoadWithAConfiguration() throws Exception {
        Path root = TestPaths.repoRoot();
        String[] python = TritonClientInteropTest.run(root, 900, "bash", "scripts/client-venv.sh").strip().split("\n");
        String out = TritonClientInteropTest.run(root, 300, python[python.length - 1],
                "src/test/python/triton_tools_check.py", "127.0.0.1:" + port, "127.0.0.1:" + server.port(),
                references().toString());
        System.out.println(out);
        assertThat(out).contains("ok    the reloaded model answers its PyTorch reference")
                .contains("ok    http: request_compression_algorithm='deflate', JSON inputs, answers the PyTorch reference")
                .contains("all checks passed");
    }

    /** One folder with both models' references, as the script reads them (demo-portable, dynamic-batch). */
    static Path references() throws IOException {
        Path dir = Files.createTempDirectory("etserve-triton-refs-");
        for (var m : Map.of("demo-portable", TestPaths.demoModels(), "dynamic-batch", TestPaths.testModels())
                .entrySet()) {
            Path to = dir.resolve(m.getKey()).resolve("1");
            Files.createDirectories(to);
            Files.copy(m.getValue().resolve(m.getKey()).resolve("1/reference.json"), to.resolve("reference.json"));
        }
        return dir;
    }
}
