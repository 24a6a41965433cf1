package io.etserve.cuda;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.runtime.CallerStreamInspector;
import io.etserve.runtime.ExecutionInput;
import io.etserve.runtime.NativeRuntime;
import io.etserve.runtime.Program;
import io.etserve.runtime.ProgramInstance;
import io.etserve.runtime.StreamSelection;
import io.etserve.support.OpaqueStreamFactory;
import io.etserve.support.TestPaths;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The handshake through the real ExecuTorch runtime: a test-only delegate (CallerStreamProbe)
 * reads ExecuTorch's getCallerStream() inside execute() and reports what it saw.
 */
class CallerStreamHandshakeTest {

    static final Path PROBE = TestPaths.testModels().resolve("caller-stream-probe/1/model.pte");

    @BeforeAll
    static void loadProbeDelegate() {
        NativeRuntime.load(new NativeRuntime.Options(Optional.empty(),
                Path.of(System.getProperty("java.io.tmpdir"), "etserve-native"), List.of(TestPaths.probeDelegate())));
        assertThat(NativeRuntime.info().registeredBackends()).contains("CallerStreamProbe");
    }

    /** [has selection, handle, gpu work queued] as the delegate saw them. */
    static long[] observe(ProgramInstance probe, StreamSelection selection) {
        ByteBuffer x = ByteBuffer.allocateDirect(8).order(ByteOrder.LITTLE_ENDIAN).putFloat(0).putFloat(0).flip();
        byte[] out = probe.execute(List.of(new ExecutionInput(x, 6, new long[] {2})), selection).get(0).toArray();
        ByteBuffer b = ByteBuffer.wrap(out).order(ByteOrder.LITTLE_ENDIAN);
        return new long[] {b.getLong(), b.getLong(), b.getLong()};
    }

    @Test
    void theDelegateSeesTheLeasedStream() throws Exception {
        OpaqueStreamFactory factory = new OpaqueStreamFactory(List.of(0));
        StreamPool pool = new StreamPool(0, 2, 0, factory, n -> {});
        try (Program program = Program.load(PROBE, Program.Verification.INTERNAL_CONSISTENCY);
                ProgramInstance probe = program.newInstance("forward")) {
            assertThat(program.signature("forward").backends()).containsExactly("CallerStreamProbe");
            for (int i = 0; i < 5; i++) {
                try (StreamLease lease = pool.lease(Duration.ofSeconds(1))) {
                    long[] seen = observe(probe, lease.selection());
                    assertThat(seen[0]).isEqualTo(1);
                    assertThat(seen[1]).isEqualTo(lease.stream().handle());
                }
            }
        }
    }

    @Test
    void withoutAGuardTheDelegateSeesNoSelection() {
        try (Program program = Program.load(PROBE, Program.Verification.INTERNAL_CONSISTENCY);
                ProgramInstance probe = program.newInstance("forward")) {
            long[] seen = observe(probe, StreamSelection.none());
            assertThat(seen[0]).isZero();
            assertThat(seen[1]).isZero();
        }
    }

    @Test
    void anExplicitNullStreamIsStillASelection() {
        try (Program program = Program.load(PROBE, Program.Verification.INTERNAL_CONSISTENCY);
                ProgramInstance probe = program.newInstance("forward")) {
            long[] seen = observe(probe, StreamSelection.selectOnly(0));
            assertThat(seen[0]).isEqualTo(1);
            assertThat(seen[1]).isZero();
        }
    }

    @Test
    void theSelectionEndsWithTheNativeCall() {
        try (Program program = Program.load(PROBE, Program.Verification.INTERNAL_CONSISTENCY);
                ProgramInstance probe = program.newInstance("forward")) {
            observe(probe, StreamSelection.selectOnly(0xABC000));
            CallerStreamInspector.Selection after = CallerStreamInspector.observe();
            assertThat(after.hasValue()).isFalse();
        }
    }

    @Test
    void concurrentCallsEachSeeTheirOwnStream() throws Exception {
        int threads = 4;
        StreamPool pool = new StreamPool(0, threads, 0, new OpaqueStreamFactory(List.of(0)), n -> {});
        try (Program program = Program.load(PROBE, Program.Verification.INTERNAL_CONSISTENCY)) {
            List<ProgramInstance> bySlot = new ArrayList<>();
            for (int i = 0; i < threads; i++) {
                bySlot.add(program.newInstance("forward"));
            }
            CyclicBarrier barrier = new CyclicBarrier(threads);
            ExecutorService exec = Executors.newFixedThreadPool(threads);
            List<Future<Integer>> fs = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                fs.add(exec.submit(() -> {
                    int checked = 0;
                    for (int i = 0; i < 300; i++) {
                        try (StreamLease lease = pool.lease(Duration.ofSeconds(10))) {
                            if (i % 50 == 0) {
                                barrier.await(10, TimeUnit.SECONDS); // all threads inside a lease at once
                            }
                            long[] seen = observe(bySlot.get(lease.slot()), lease.selection());
                            if (seen[0] != 1 || seen[1] != lease.stream().handle()) {
                                throw new AssertionError("saw " + Long.toHexString(seen[1]) + " under lease of "
                                        + Long.toHexString(lease.stream().handle()));
                            }
                            checked++;
                        }
                    }
                    return checked;
                }));
            }
            for (Future<Integer> f : fs) {
                assertThat(f.get(60, TimeUnit.SECONDS)).isEqualTo(300);
            }
            exec.shutdown();
            bySlot.forEach(ProgramInstance::close);
        }
    }
}
