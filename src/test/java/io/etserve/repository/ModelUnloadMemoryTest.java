package io.etserve.repository;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.bench.InstanceMemory;
import io.etserve.execution.FaultListener;
import io.etserve.execution.InferenceObserver;
import io.etserve.execution.InferenceService;
import io.etserve.execution.InferenceSpans;
import io.etserve.execution.ModelAdmission;
import io.etserve.inference.DataType;
import io.etserve.inference.InferenceRequest;
import io.etserve.inference.Tensor;
import io.etserve.runtime.DirectBufferPool;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.Reference;
import io.etserve.support.TestPaths;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Unloading gives the native memory back. The program is demo-portable with its second planned
 * buffer declared 64 MiB (the int64 at byte 264, 2240 in the file; the method only uses the
 * first 2240 bytes of it, see src/test/resources/corrupt/README.md): every instance allocates and
 * zeroes 64 MiB, so each load of two instances holds 128 MiB of resident memory. Loaded, called
 * and unloaded 20 times, the process's resident memory outside the Java heap stays where the
 * first cycles left it; one cycle not freed would add 128 MiB.
 */
class ModelUnloadMemoryTest {

    static final long PLANNED = 64L << 20;

    @Test
    void twentyLoadUnloadCyclesOf128MibLeaveNoNativeMemoryBehind() throws Exception {
        byte[] program = Files.readAllBytes(TestPaths.demoModels().resolve("demo-portable/1/model.pte"));
        ByteBuffer header = ByteBuffer.wrap(program).order(ByteOrder.LITTLE_ENDIAN);
        assertThat(header.getLong(264)).as("demo-portable's second planned buffer").isEqualTo(2240);
        header.putLong(264, PLANNED);
        ModelRepositoryFixture repo = ModelRepositoryFixture.create("etserve-cycles-")
                .withProgramBytes("big", program)
                .withFile("big/config.yml", "inputs: [ { name: x } ]\noutputs: [ { name: y } ]\ninstances: 2\n"
                        + "max-planned-memory: 128MB\n");
        Reference ref = Reference.load(TestPaths.demoModels().resolve("demo-portable/1/reference.json"));
        Reference.TensorValue x = ref.cases().get(0).inputs().get(0);
        InferenceRequest request = new InferenceRequest(null, null,
                List.of(new Tensor("x", DataType.FP32, x.shape(), x.bytes())), null, false);
        try (ModelRegistry registry = new ModelRegistry(repo.root(), CpuModelLoaders.create(), InferenceObserver.NONE)) {
            registry.loadAll();
            assertThat(registry.resolve("big", null).ready()).as(registry.resolve("big", null).toString()).isTrue();
            InferenceService service = new InferenceService(registry, Duration.ofSeconds(5), InferenceObserver.NONE,
                    ModelAdmission.UNLIMITED, FaultListener.NONE, new DirectBufferPool(1 << 20),
                    InferenceSpans.OFF);
            long settled = 0;
            for (int cycle = 1; cycle <= 20; cycle++) {
                registry.unload("big");
                registry.load("big");
                List<Tensor> out = service.infer("big", null, request).outputs();
                assertThat(ref.close(out.get(0).data().order(ByteOrder.LITTLE_ENDIAN).getFloat(0),
                        ref.cases().get(0).outputs().get(0).data().get(0))).isTrue();
                if (cycle == 5) {
                    settled = nativeResidentKiB();
                }
            }
            long grown = nativeResidentKiB() - settled;
            System.out.printf("resident outside the heap after cycle 5: %d KiB; grown by cycle 20: %d KiB%n",
                    settled, grown);
            assertThat(grown).as("KiB grown over cycles 6-20 (one unfreed cycle: 131072)").isLessThan(32 * 1024);
        }
    }

    /** VmRSS minus the Java heap's committed size: what ExecuTorch allocates, not what the GC does. */
    private static long nativeResidentKiB() throws IOException {
        System.gc();
        long heapKiB = ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getCommitted() / 1024;
        return InstanceMemory.rssKb() - heapKiB;
    }
}
