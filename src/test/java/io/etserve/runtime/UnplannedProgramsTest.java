package io.etserve.runtime;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.support.Reference;
import io.etserve.support.TestPaths;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.Test;

/**
 * Programs exported with their inputs and outputs left unplanned: the bridge hands ExecuTorch the
 * caller's input buffer and the buffer each output is served from. References are eager PyTorch's
 * (scripts/export), never this runtime's.
 */
class UnplannedProgramsTest {

    private static final int FLOAT = 6;

    private static Path dir(String name) {
        return TestPaths.testModels().resolve(name).resolve("1");
    }

    /** The case's inputs in buffers from {@code pool}, each also added to {@code taken}. */
    private static List<ExecutionInput> inputs(Reference.Case c, DirectBufferPool pool, List<ByteBuffer> taken) {
        List<ExecutionInput> in = new ArrayList<>();
        for (Reference.TensorValue t : c.inputs()) {
            ByteBuffer b = pool.acquire(t.data().size() * 4L);
            taken.add(b);
            t.data().forEach(v -> b.putFloat(v.floatValue()));
            in.add(new ExecutionInput(b.flip(), FLOAT, t.shape()));
        }
        return in;
    }

    /** Every output of {@code outs} against the case's eager outputs, within the written tolerance. */
    private static void assertMatches(Reference ref, Reference.Case c, List<ExecutionOutput> outs) {
        assertThat(outs).hasSameSizeAs(c.outputs());
        for (int o = 0; o < outs.size(); o++) {
            Reference.TensorValue expected = c.outputs().get(o);
            ExecutionOutput out = outs.get(o);
            assertThat(out.shape()).containsExactly(expected.shape());
            assertThat(out.data().remaining()).isEqualTo(expected.data().size() * 4);
            ByteBuffer data = out.data().duplicate().order(java.nio.ByteOrder.LITTLE_ENDIAN);
            for (int i = 0; i < expected.data().size(); i++) {
                double got = data.getFloat(i * 4);
                assertThat(ref.close(got, expected.data().get(i)))
                        .as("output %d element %d: %s against %s", o, i, got, expected.data().get(i)).isTrue();
            }
        }
    }

    @Test
    void staticDynamicAndPassThroughProgramsMatchPyTorchWithTheCallersBuffers() {
        DirectBufferPool pool = new DirectBufferPool(64 << 20);
        for (String name : List.of("unplanned-affine", "unplanned-dynamic-batch", "unplanned-passthrough")) {
            Reference ref = Reference.load(dir(name).resolve("reference.json"));
            assertThat(ref.cases()).hasSizeGreaterThan(1);
            try (Program p = Program.load(dir(name).resolve("model.pte"), Program.Verification.INTERNAL_CONSISTENCY);
                    ProgramInstance instance = p.newInstance("forward")) {
                assertThat(instance.signature().inputs()).allSatisfy(s -> assertThat(s.planned()).isFalse());
                assertThat(instance.signature().outputs()).allSatisfy(s -> assertThat(s.planned()).isFalse());
                // Twice round: the second pass reuses the pool's buffers of the first.
                for (int round = 0; round < 2; round++) {
                    for (Reference.Case c : ref.cases()) {
                        List<ByteBuffer> taken = new ArrayList<>();
                        List<ExecutionOutput> outs = instance.execute(inputs(c, pool, taken), StreamSelection.none(), pool);
                        assertMatches(ref, c, outs);
                        taken.forEach(pool::release);
                        outs.forEach(o -> pool.release(o.data()));
                    }
                }
            }
        }
    }

    @Test
    void aPlannedProgramStillCopiesAndSaysSo() {
        try (Program p = Program.load(dir("dynamic-batch").resolve("model.pte"), Program.Verification.MINIMAL)) {
            assertThat(p.signature("forward").inputs().get(0).planned()).isTrue();
            assertThat(p.signature("forward").outputs().get(0).planned()).isTrue();
        }
    }

    /**
     * Output buffers go back to one pool as soon as each call's answer is checked, and are handed
     * to the next call, on this instance or the other: a call that wrote into memory of an earlier
     * one (a stale output pointer) would change an answer another thread is checking.
     */
    @Test
    void buffersRecycledAcrossInstancesAndThreadsNeverCarryAnotherCallsAnswer() throws Exception {
        Reference ref = Reference.load(dir("unplanned-affine").resolve("reference.json"));
        DirectBufferPool pool = new DirectBufferPool(64 << 20);
        try (Program p = Program.load(dir("unplanned-affine").resolve("model.pte"), Program.Verification.MINIMAL);
                ProgramInstance a = p.newInstance("forward");
                ProgramInstance b = p.newInstance("forward")) {
            ExecutorService threads = Executors.newFixedThreadPool(2);
            try {
                List<Future<Integer>> done = new ArrayList<>();
                for (ProgramInstance instance : List.of(a, b)) {
                    done.add(threads.submit(() -> {
                        int calls = 0;
                        for (int i = 0; i < 300; i++) {
                            Reference.Case c = ref.cases().get((i + (instance == a ? 0 : 1)) % ref.cases().size());
                            List<ByteBuffer> taken = new ArrayList<>();
                            List<ExecutionOutput> outs = instance.execute(inputs(c, pool, taken), StreamSelection.none(),
                                    pool);
                            taken.forEach(pool::release);
                            Thread.yield();
                            assertMatches(ref, c, outs);
                            outs.forEach(o -> pool.release(o.data()));
                            calls++;
                        }
                        return calls;
                    }));
                }
                for (Future<Integer> f : done) {
                    assertThat(f.get()).isEqualTo(300);
                }
            } finally {
                threads.shutdownNow();
            }
        }
    }
}
