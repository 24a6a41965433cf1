package io.etserve.repository;

import io.etserve.modelconfig.ModelConfig;
import io.etserve.modelconfig.ModelConfigFile;
import io.etserve.runtime.Program;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.Optional;

/**
 * What a program file is trusted to be. A model may declare the SHA-256 of its {@code model.pte}
 * ({@code sha256:} in config.yml, or a {@code model.pte.sha256} file beside it in
 * {@code sha256sum} format); it is checked at load, so a flipped byte is refused instead of
 * serving different numbers.
 *
 * <p>ExecuTorch's {@code minimal} verification skips the structural check of the file, and a
 * malformed file then crashes the process (seen: a root table offset into the header, a flipped
 * byte of a delegate entry). So {@code etserve.native.verification=minimal} applies only to
 * files whose declared digest matched: the operator vouched for those exact bytes. Every other
 * file is verified fully. A {@code .ptd} data file may carry a {@code <file>.sha256} sidecar too.
 *
 * <p>Full verification does not read everything either: a delegate's payload is parsed by the
 * delegate, and a file changed there can load and crash the process at its first call. With
 * {@link Policy#digestRequired} (etserve.repository.require-digest) a file without a declared
 * digest is refused, so only vouched bytes are ever loaded.
 */
public final class ProgramIntegrity {

    public static final String SIDECAR_SUFFIX = ".sha256";
    private static final int MAX_SIDECAR_BYTES = 4096;

    private ProgramIntegrity() {}

    /** The verification a file gets, and whether its digest was checked. */
    public record Verdict(Program.Verification verification, Optional<String> sha256) {}

    /**
     * What the deployment asks of every file.
     *
     * @param verification the configured check ({@code MINIMAL} only for vouched files)
     * @param digestRequired refuse a program or data file that declares no sha256
     */
    public record Policy(Program.Verification verification, boolean digestRequired) {
        public static Policy of(Program.Verification verification) {
            return new Policy(verification, false);
        }
    }

    /**
     * Checks the declared digest, if any, and picks the verification.
     *
     * @throws InvalidModelException when a digest is declared and does not match, or is malformed
     */
    public static Verdict check(Path program, ModelConfig config, Program.Verification configured) throws IOException {
        return check(program, program, config, Policy.of(configured));
    }

    /**
     * As {@link #check(Path, ModelConfig, Program.Verification)}, for a program served from a
     * copy: the digest is declared beside (or for) {@code program} in the repository, and checked
     * against the bytes of {@code served}.
     */
    public static Verdict check(Path program, Path served, ModelConfig config, Policy policy) throws IOException {
        Optional<String> declared = declared(program, config);
        if (declared.isEmpty()) {
            if (policy.digestRequired()) {
                throw undeclared(program.getFileName().toString(), "add 'sha256: <64 hex digits>' to config.yml or ");
            }
            return new Verdict(Program.Verification.INTERNAL_CONSISTENCY, Optional.empty());
        }
        String actual = sha256(served);
        if (!actual.equals(declared.get())) {
            throw new ModelLoader.InvalidModelException(program.getFileName() + " does not match its declared sha256: expected "
                    + declared.get() + ", the file has " + actual);
        }
        return new Verdict(policy.verification(), Optional.of(actual));
    }

    private static ModelLoader.InvalidModelException undeclared(String file, String otherWay) {
        return new ModelLoader.InvalidModelException(file + " declares no sha256 and etserve.repository.require-digest"
                + " is on: " + otherWay + "write " + file + SIDECAR_SUFFIX + " beside it (sha256sum " + file + " > "
                + file + SIDECAR_SUFFIX + ")");
    }

    /**
     * Checks a named-data file ({@code .ptd}) against its {@code <file>.sha256} sidecar when it
     * has one: weights are data, and ExecuTorch's verification never looks at them. The sidecar
     * is the one beside {@code data}, the bytes those of {@code served} (its private copy, or
     * {@code data} itself); with {@code digestRequired}, a file without a sidecar is refused.
     *
     * @throws InvalidModelException on a malformed sidecar, a mismatch or a missing required one
     */
    public static void checkDataFile(Path data, Path served, boolean digestRequired) throws IOException {
        Path sidecar = data.resolveSibling(data.getFileName() + SIDECAR_SUFFIX);
        if (!Files.isRegularFile(sidecar)) {
            if (digestRequired) {
                throw undeclared(data.getFileName().toString(), "");
            }
            return;
        }
        String declared = readSidecar(sidecar);
        String actual = sha256(served);
        if (!actual.equals(declared)) {
            throw new ModelLoader.InvalidModelException(data.getFileName() + " does not match its declared sha256: expected "
                    + declared + ", the file has " + actual);
        }
    }

    private static String readSidecar(Path sidecar) throws IOException {
        byte[] bytes;
        try (InputStream in = Files.newInputStream(sidecar)) {
            bytes = in.readNBytes(MAX_SIDECAR_BYTES);
        }
        String first = new String(bytes, StandardCharsets.US_ASCII).strip().split("\\s+", 2)[0];
        return ModelConfigFile.sha256Digest(first).orElseThrow(() -> new ModelLoader.InvalidModelException(
                sidecar.getFileName() + " must start with 64 hex digits (the output of sha256sum)"));
    }

    /** The digest config.yml or the sidecar file declares (lower-case hex); both must agree. */
    static Optional<String> declared(Path program, ModelConfig config) throws IOException {
        Optional<String> fromConfig = config.sha256();
        Path sidecar = program.resolveSibling(program.getFileName() + SIDECAR_SUFFIX);
        Optional<String> fromFile = Optional.empty();
        if (Files.isRegularFile(sidecar)) {
            fromFile = Optional.of(readSidecar(sidecar));
        }
        if (fromConfig.isPresent() && fromFile.isPresent() && !fromConfig.equals(fromFile)) {
            throw new ModelLoader.InvalidModelException("config.yml and " + sidecar.getFileName() + " declare different sha256 digests");
        }
        return fromConfig.isPresent() ? fromConfig : fromFile;
    }

    static String sha256(Path file) throws IOException {
        MessageDigest digest;
        try {
            digest = MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is part of every Java runtime", e);
        }
        byte[] buffer = new byte[1 << 20];
        try (InputStream in = Files.newInputStream(file)) {
            for (int n; (n = in.read(buffer)) > 0; ) {
                digest.update(buffer, 0, n);
            }
        }
        return HexFormat.of().formatHex(digest.digest());
    }
}
