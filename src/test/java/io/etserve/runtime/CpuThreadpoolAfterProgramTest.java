package io.etserve.runtime;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * A program loaded before the pool is sized fixes it as ExecuTorch made it: resizing then would
 * leave XNNPACK's runtimes on a pool that no longer exists. A JVM of its own (tag isolated-jvm).
 */
@Tag("isolated-jvm")
class CpuThreadpoolAfterProgramTest {

    @Test
    void aProgramLoadedFirstFixesThePoolAtExecuTorchsOwnSize() {
        try (Program p = Program.load(CpuThreadpoolSizeTest.AFFINE_4MIB, Program.Verification.INTERNAL_CONSISTENCY)) {
            // ExecuTorch's own size is every logical CPU of the host, at most 63: never 97.
            int fixed = NativeRuntime.sizeCpuThreads(97);
            assertThat(fixed).isBetween(1, 63);
            assertThat(NativeRuntime.sizeCpuThreads(1)).isEqualTo(fixed);
            assertThat(p.methodNames()).containsExactly("forward");
        }
    }
}
