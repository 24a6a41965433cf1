package io.etserve.rest;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.support.Http;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.Reference;
import io.etserve.support.TestPaths;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Program files the service must not trust: crafted files that crash ExecuTorch's minimal
 * verification (this JVM would die if one reached it), a flipped weight that would silently
 * serve other numbers, a tiny file that plans gigabytes, and files that verify but fault once
 * run (the first-call trial refuses them). The service runs with
 * {@code verification=minimal}, the documented fast setting.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class UntrustedProgramsApiTest {

    static final Path CRAFTED = TestPaths.repoRoot().resolve("src/test/resources/corrupt");
    static final Path DEMO = TestPaths.demoModels().resolve("demo-portable/1/model.pte");
    static final Path DEMO_XNNPACK = TestPaths.demoModels().resolve("demo-xnnpack/1/model.pte");
    static final ModelRepositoryFixture REPO = ModelRepositoryFixture.create("etserve-untrusted-");

    static {
        try {
            REPO.copy(TestPaths.demoModels(), "demo-portable")
                    .withProgramBytes("root-offset", Files.readAllBytes(CRAFTED.resolve("root-offset-into-header.pte")))
                    .withProgramBytes("delegate-entry", Files.readAllBytes(CRAFTED.resolve("delegate-entry-flipped.pte")))
                    .withProgramBytes("plans-3gib", Files.readAllBytes(CRAFTED.resolve("plans-3gib-per-instance.pte")))
                    // Both pass ExecuTorch's verification and fault in a process that runs them.
                    .withProgramBytes("op-index", Files.readAllBytes(CRAFTED.resolve("op-index-out-of-range.pte")))
                    .withProgramBytes("xnnpack-payload", Files.readAllBytes(CRAFTED.resolve("xnnpack-payload-byte.pte")));
            // A vouched-for file: minimal verification applies, and it must serve the reference.
            REPO.copy(TestPaths.demoModels(), "demo-xnnpack", "trusted")
                    .withFile("trusted/1/model.pte.sha256", sha256(DEMO_XNNPACK) + "  model.pte\n");
            // One flipped byte in the last constant of the program: still a valid program.
            byte[] tampered = Files.readAllBytes(DEMO);
            tampered[tampered.length - 5] ^= 0x40;
            REPO.withProgramBytes("tampered", tampered)
                    .withFile("tampered/config.yml", "sha256: " + sha256(DEMO).toUpperCase() + "\n");
            REPO.withProgramBytes("unvouched-tampered", tampered);
            // External weights with a digest beside the .ptd: intact, and with one weight flipped.
            Path ptd = TestPaths.testModels().resolve("external-weights-portable/1/_default_external_constant.ptd");
            String ptdDigest = sha256(ptd) + "  _default_external_constant.ptd\n";
            REPO.copy(TestPaths.testModels(), "external-weights-portable", "weights-vouched")
                    .withFile("weights-vouched/1/_default_external_constant.ptd.sha256", ptdDigest);
            REPO.copy(TestPaths.testModels(), "external-weights-portable", "weights-tampered")
                    .withFile("weights-tampered/1/_default_external_constant.ptd.sha256", ptdDigest);
            Path tamperedPtd = REPO.root().resolve("weights-tampered/1/_default_external_constant.ptd");
            byte[] weights = Files.readAllBytes(tamperedPtd);
            weights[weights.length - 3] ^= 0x10;
            Files.write(tamperedPtd, weights);
            REPO.copy(TestPaths.demoModels(), "demo-portable", "wrong-sidecar")
                    .withFile("wrong-sidecar/1/model.pte.sha256", "not-a-digest\n");
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    static String sha256(Path file) throws Exception {
        return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(Files.readAllBytes(file)));
    }

    @DynamicPropertySource
    static void properties(DynamicPropertyRegistry r) {
        r.add("etserve.model-repository", () -> REPO.root().toString());
        r.add("etserve.native.verification", () -> "minimal");
        r.add("etserve.inference.max-planned-memory", () -> "256MB");
        r.add("management.server.port", () -> "0");
    }

    @Value("${local.server.port}")
    int port;

    String reason(Http http, String model) {
        Http.Response ready = http.get("/v2/models/" + model + "/ready");
        assertThat(ready.status()).as(model).isEqualTo(503);
        return ready.json().path("reason").asString();
    }

    @Test
    void craftedFilesFailToLoadInsteadOfCrashingTheProcess() {
        Http http = Http.local(port);
        assertThat(reason(http, "root-offset")).contains("Verification failed");
        assertThat(reason(http, "delegate-entry")).contains("Verification failed");
        // Still here, still serving.
        assertThat(http.post("/v2/models/demo-portable/infer", SlowClientsApiTest.demoRequest()).status()).isEqualTo(200);
    }

    @Test
    void programsThatFaultOnceRunAreRefusedByTheirFirstCallTrial() {
        Http http = Http.local(port);
        assertThat(reason(http, "op-index")).contains("first call").contains("SIGSEGV")
                .contains("Op index 10354689 out of range");
        assertThat(reason(http, "xnnpack-payload")).contains("first call").containsAnyOf("SIGSEGV", "SIGBUS");
        assertThat(http.post("/v2/models/demo-portable/infer", SlowClientsApiTest.demoRequest()).status()).isEqualTo(200);
    }

    @Test
    void aDeclaredDigestCatchesSilentCorruption() {
        Http http = Http.local(port);
        assertThat(reason(http, "tampered")).contains("does not match its declared sha256");
        // The same bytes without a digest load and serve other numbers: what the digest is for.
        assertThat(http.get("/v2/models/unvouched-tampered/ready").status()).isEqualTo(200);
        assertThat(reason(http, "wrong-sidecar")).contains("64 hex digits");
        // Weights in a .ptd are data ExecuTorch never verifies: a digest beside the file covers them.
        assertThat(reason(http, "weights-tampered")).contains("_default_external_constant.ptd")
                .contains("does not match its declared sha256");
        assertThat(http.get("/v2/models/weights-vouched/ready").status()).isEqualTo(200);
    }

    @Test
    void aVouchedForFileRunsUnderMinimalVerificationAndMatchesItsReference() {
        Http http = Http.local(port);
        Reference ref = Reference.load(TestPaths.demoModels().resolve("demo-xnnpack/1/reference.json"));
        for (Reference.Case c : ref.cases()) {
            Http.Response r = http.postJson("/v2/models/trusted/infer",
                    Map.of("inputs", c.inputs().stream().map(ProtocolApiTest::jsonInput).toList()));
            assertThat(r.status()).as(r.text()).isEqualTo(200);
            ProtocolApiTest.assertMatches(ref, c.outputs().get(0), r.json().path("outputs").get(0));
        }
    }

    @Test
    void aProgramThatPlansTooMuchMemoryIsRefusedWithTheNumbers() {
        String why = reason(Http.local(port), "plans-3gib");
        assertThat(why).contains("3221225472").contains("268435456").contains("max-planned-memory");
    }

    @Test
    void publicReasonsDoNotRevealServerPaths() {
        Http http = Http.local(port);
        String root = REPO.root().toAbsolutePath().toString();
        for (String model : new String[] {"root-offset", "delegate-entry", "tampered", "plans-3gib", "op-index"}) {
            Http.Response ready = http.get("/v2/models/" + model + "/ready");
            assertThat(ready.text()).as(model).doesNotContain(root).doesNotContain("/tmp/");
            Http.Response infer = http.post("/v2/models/" + model + "/infer", SlowClientsApiTest.demoRequest());
            assertThat(infer.text()).as(model).doesNotContain(root);
        }
    }
}
