package io.etserve.inference;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.etserve.runtime.Program;
import io.etserve.runtime.ProgramInstance;
import io.etserve.support.TestPaths;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class WarmupTest {

    private static final Path DYNAMIC = TestPaths.testModels().resolve("dynamic-batch/1/model.pte");
    private static final List<TensorMetadata> INPUTS = List.of(new TensorMetadata("x", DataType.FP32, new long[] {-1, -1}));
    private static final long[][] BOUNDS = {{32, 16}};

    @Test
    void runsEveryInstanceAtTheUpperBoundAndReleasesTheSlots() throws InterruptedException {
        try (Program p = Program.load(DYNAMIC, Program.Verification.MINIMAL)) {
            ProgramInstance a = p.newInstance("forward");
            ProgramInstance b = p.newInstance("forward");
            try (CpuInstancePool pool = new CpuInstancePool(List.of(a, b))) {
                new Warmup(3, Warmup.Data.RANDOM).run(pool, INPUTS, BOUNDS);
                new Warmup(1, Warmup.Data.ZEROS).run(pool, INPUTS, BOUNDS);
                // Every slot went back: both can be held again.
                try (ExecutionSlot one = pool.acquire(java.time.Duration.ofSeconds(1));
                        ExecutionSlot two = pool.acquire(java.time.Duration.ofSeconds(1))) {
                    assertThat(one.instance()).isNotSameAs(two.instance());
                }
            }
        }
    }

    @Test
    void aFailingCallFailsWithItsReason() {
        try (Program p = Program.load(DYNAMIC, Program.Verification.MINIMAL)) {
            ProgramInstance a = p.newInstance("forward");
            // A shape the method cannot take (rank 3) makes ExecuTorch refuse the call.
            List<TensorMetadata> wrong = List.of(new TensorMetadata("x", DataType.FP32, new long[] {1, 16, 1}));
            try (CpuInstancePool pool = new CpuInstancePool(List.of(a))) {
                assertThatThrownBy(() -> new Warmup(2, Warmup.Data.ZEROS).run(pool, wrong, new long[][] {{1, 16, 1}}))
                        .hasMessageContaining("warm-up call 1 of 2 failed").hasMessageContaining("rank");
            }
        }
    }

    @Test
    void configAcceptsACountOrSamplesAndData(@TempDir Path dir) throws Exception {
        Files.writeString(dir.resolve("config.yml"), "warmup: 4\n");
        assertThat(ModelConfig.read(dir).warmup()).isEqualTo(new Warmup(4, Warmup.Data.ZEROS));
        Files.writeString(dir.resolve("config.yml"), "warmup: { samples: 2, data: random }\n");
        assertThat(ModelConfig.read(dir).warmup()).isEqualTo(new Warmup(2, Warmup.Data.RANDOM));
        assertThat(ModelConfig.defaults().warmup().samples()).isZero();
        Files.writeString(dir.resolve("config.yml"), "warmup: { samples: 2, data: noise }\n");
        assertThatThrownBy(() -> ModelConfig.read(dir)).hasMessageContaining("'warmup'");
    }
}
