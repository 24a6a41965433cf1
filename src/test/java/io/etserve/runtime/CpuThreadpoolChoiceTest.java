package io.etserve.runtime;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * An instance loaded without ExecuTorch's CPU threadpool (a model's {@code cpu-threadpool:
 * false}) runs its operators on the calling thread: the pool's threads are never woken for its
 * calls, which the same program's pooled instance does wake. Counted by the kernel, per thread
 * (context switches in /proc). One pool per process, sized here before the first program, so
 * this runs in a JVM of its own (tag isolated-jvm).
 */
@Tag("isolated-jvm")
class CpuThreadpoolChoiceTest {

    private static final int POOL = 3;
    private static final int CALLS = 5;

    @Test
    void anInstanceWithoutThePoolWakesNoneOfItsThreadsAndAnswersAsThePooledOne() throws IOException {
        NativeRuntime.ensureLoaded();
        assertThat(NativeRuntime.sizeCpuThreads(POOL)).isEqualTo(POOL);
        List<Path> workers = poolWorkers();
        assertThat(workers).as("pthreadpool's workers: the pool less the calling thread").hasSize(POOL - 1);

        ByteBuffer x = CpuThreadpoolSizeTest.affineInput();
        try (Program p = Program.load(CpuThreadpoolSizeTest.AFFINE_4MIB, Program.Verification.INTERNAL_CONSISTENCY);
                ProgramInstance pooled = p.newInstance("forward", -1, true);
                ProgramInstance alone = p.newInstance("forward", -1, false)) {
            long before = switches(workers);
            callAndCheck(pooled, x);
            long pooledWakes = switches(workers) - before;

            before = switches(workers);
            callAndCheck(alone, x);
            long aloneWakes = switches(workers) - before;

            // Checking a call's million outputs takes long enough for the workers to sleep
            // between calls: each pooled call wakes each of them at least once.
            assertThat(pooledWakes).as("the pooled instance's calls woke the pool's threads")
                    .isGreaterThanOrEqualTo((long) CALLS * (POOL - 1));
            assertThat(aloneWakes).as("the pool's threads during the other instance's calls").isZero();
        }
    }

    private static void callAndCheck(ProgramInstance instance, ByteBuffer x) {
        for (int call = 0; call < CALLS; call++) {
            CpuThreadpoolSizeTest.assertAffine(instance, x, call);
        }
    }

    /**
     * The threads pthreadpool started: the native threads that keep the process's name. The JVM
     * names the threads it starts; the launcher's first thread and the one running this test keep
     * the name too, and are left out.
     */
    private static List<Path> poolWorkers() throws IOException {
        Path self = Path.of("/proc/thread-self").toRealPath();
        String pid = Long.toString(ProcessHandle.current().pid());
        String comm = Files.readString(Path.of("/proc/self/comm")).strip();
        List<Path> workers = new ArrayList<>();
        try (Stream<Path> tasks = Files.list(Path.of("/proc/self/task"))) {
            for (Path task : tasks.toList()) {
                Path real = task.toRealPath();
                if (real.equals(self) || real.getFileName().toString().equals(pid)) {
                    continue;
                }
                if (Files.readString(task.resolve("comm")).strip().equals(comm)) {
                    workers.add(real);
                }
            }
        }
        return workers;
    }

    /** The threads' context switches so far, voluntary (a sleep) and not. */
    private static long switches(List<Path> threads) throws IOException {
        long sum = 0;
        for (Path t : threads) {
            for (String line : Files.readAllLines(t.resolve("status"))) {
                if (line.startsWith("voluntary_ctxt_switches:") || line.startsWith("nonvoluntary_ctxt_switches:")) {
                    sum += Long.parseLong(line.substring(line.indexOf(':') + 1).strip());
                }
            }
        }
        return sum;
    }
}
