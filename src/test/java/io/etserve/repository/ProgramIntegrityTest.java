package io.etserve.repository;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.etserve.modelconfig.ModelConfig;
import io.etserve.modelconfig.VersionPolicy;
import io.etserve.runtime.Program;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ProgramIntegrityTest {

    @TempDir
    Path dir;

    static final byte[] BYTES = "program bytes".getBytes(StandardCharsets.UTF_8);

    /** Independent of the code under test: the JDK's digest of the same bytes. */
    static String digest() throws Exception {
        return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(BYTES));
    }

    static ModelConfig withSha(String sha) {
        ModelConfig d = ModelConfig.defaults();
        return new ModelConfig(d.method(), List.of(), List.of(), Optional.empty(), Optional.empty(), Optional.empty(),
                Optional.empty(), d.warmup(), Optional.empty(), Optional.ofNullable(sha), Optional.empty(), Map.of(), Optional.empty(),
                VersionPolicy.ALL, true);
    }

    Path program() throws Exception {
        return Files.write(dir.resolve("model.pte"), BYTES);
    }

    @Test
    void withoutADigestEveryFileIsVerifiedFullyWhateverIsConfigured() throws Exception {
        var verdict = ProgramIntegrity.check(program(), ModelConfig.defaults(), Program.Verification.MINIMAL);
        assertThat(verdict.verification()).isEqualTo(Program.Verification.INTERNAL_CONSISTENCY);
        assertThat(verdict.sha256()).isEmpty();
    }

    @Test
    void aMatchingDigestKeepsTheConfiguredVerification() throws Exception {
        var verdict = ProgramIntegrity.check(program(), withSha(digest()), Program.Verification.MINIMAL);
        assertThat(verdict.verification()).isEqualTo(Program.Verification.MINIMAL);
        assertThat(verdict.sha256()).contains(digest());
    }

    @Test
    void theSidecarInSha256sumFormatIsRead() throws Exception {
        Path p = program();
        Files.writeString(dir.resolve("model.pte.sha256"), digest().toUpperCase() + "  model.pte\n");
        assertThat(ProgramIntegrity.check(p, ModelConfig.defaults(), Program.Verification.MINIMAL).verification())
                .isEqualTo(Program.Verification.MINIMAL);
    }

    @Test
    void aMismatchOrAConflictIsRefused() throws Exception {
        Path p = program();
        String other = "0".repeat(64);
        assertThatThrownBy(() -> ProgramIntegrity.check(p, withSha(other), Program.Verification.INTERNAL_CONSISTENCY))
                .hasMessageContaining("does not match").hasMessageContaining(digest());
        Files.writeString(dir.resolve("model.pte.sha256"), digest() + "\n");
        assertThatThrownBy(() -> ProgramIntegrity.check(p, withSha(other), Program.Verification.MINIMAL))
                .hasMessageContaining("different sha256");
    }

    @Test
    void whenDigestsAreRequiredAFileWithoutOneIsRefused() throws Exception {
        Path p = program();
        var required = new ProgramIntegrity.Policy(Program.Verification.INTERNAL_CONSISTENCY, true);
        assertThatThrownBy(() -> ProgramIntegrity.check(p, p, ModelConfig.defaults(), required))
                .hasMessageContaining("model.pte declares no sha256")
                .hasMessageContaining("etserve.repository.require-digest").hasMessageContaining("sha256sum model.pte");
        // Declared in config.yml or beside the file, and matching: loaded as any vouched file.
        assertThat(ProgramIntegrity.check(p, p, withSha(digest()), required).sha256()).contains(digest());
        Files.writeString(dir.resolve("model.pte.sha256"), digest() + "  model.pte\n");
        assertThat(ProgramIntegrity.check(p, p, ModelConfig.defaults(), required).sha256()).contains(digest());
        // A data file too.
        Path data = Files.write(dir.resolve("weights.ptd"), BYTES);
        assertThatThrownBy(() -> ProgramIntegrity.checkDataFile(data, data, true))
                .hasMessageContaining("weights.ptd declares no sha256");
        ProgramIntegrity.checkDataFile(data, data, false);
        Files.writeString(dir.resolve("weights.ptd.sha256"), digest() + "  weights.ptd\n");
        ProgramIntegrity.checkDataFile(data, data, true);
    }

    @Test
    void configRejectsAMalformedDigest() throws Exception {
        Files.writeString(dir.resolve("config.yml"), "sha256: abc\n");
        assertThatThrownBy(() -> ModelConfig.read(dir)).hasMessageContaining("64 hex digits");
        Files.writeString(dir.resolve("config.yml"), "max-planned-memory: lots\n");
        assertThatThrownBy(() -> ModelConfig.read(dir)).hasMessageContaining("positive size");
        Files.writeString(dir.resolve("config.yml"), "max-planned-memory: 512MB\n");
        assertThat(ModelConfig.read(dir).maxPlannedMemory()).contains(512L * 1024 * 1024);
    }
}
