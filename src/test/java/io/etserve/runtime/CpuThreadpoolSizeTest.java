package io.etserve.runtime;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.support.TestPaths;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * ExecuTorch's CPU threadpool sized before the first program, as the service sizes it at start
 * ({@code etserve.native.cpu-threads}). The pool is one per process and XNNPACK keeps it in each
 * runtime it builds, so this runs in a JVM of its own (tag isolated-jvm).
 */
@Tag("isolated-jvm")
class CpuThreadpoolSizeTest {

    /** y = 2x + 1 on 1x1048576 FP32 (XNNPACK): an operator large enough to be split over the pool. */
    static final Path AFFINE_4MIB = TestPaths.repoRoot().resolve("src/test/resources/models/affine-4mib/1/model.pte");
    static final int AFFINE_ELEMENTS = 1 << 20;

    @Test
    void thePoolTakesTheSizeAskedBeforeTheFirstProgramKeepsItAndXnnpackAnswersOverIt() {
        NativeRuntime.ensureLoaded();
        // The size comes back from pthreadpool itself, not from what was asked.
        assertThat(NativeRuntime.sizeCpuThreads(3)).isEqualTo(3);
        assertThat(NativeRuntime.sizeCpuThreads(5)).as("sized once per process").isEqualTo(3);

        ByteBuffer x = affineInput();
        try (Program p = Program.load(AFFINE_4MIB, Program.Verification.INTERNAL_CONSISTENCY);
                ProgramInstance instance = p.newInstance("forward")) {
            for (int call = 0; call < 3; call++) {
                assertAffine(instance, x, call);
            }
        }
        assertThat(NativeRuntime.sizeCpuThreads(7)).as("still the size XNNPACK was built with").isEqualTo(3);
    }

    /** AFFINE_4MIB's input: 1x1048576 FP32 values in [-1, 1]. */
    static ByteBuffer affineInput() {
        ByteBuffer x = ByteBuffer.allocateDirect(AFFINE_ELEMENTS * 4).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < AFFINE_ELEMENTS; i++) {
            x.putFloat((i % 2001 - 1000) / 997f);
        }
        return x.flip();
    }

    /** One call of {@code instance} on {@code x}, every output element checked against 2x + 1. */
    static void assertAffine(ProgramInstance instance, ByteBuffer x, int call) {
        List<ExecutionOutput> out = instance.execute(
                List.of(new ExecutionInput(x.duplicate(), 6, new long[] {1, AFFINE_ELEMENTS})), StreamSelection.none());
        ByteBuffer y = ByteBuffer.wrap(out.get(0).toArray()).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < AFFINE_ELEMENTS; i++) {
            float in = x.getFloat(i * 4);
            // The model's definition (scripts/export: x * 2.0 + 1.0), computed here.
            assertThat(y.getFloat(i * 4)).as("element %d of call %d", i, call).isEqualTo(2f * in + 1f);
        }
    }
}
