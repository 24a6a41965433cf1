package io.etserve.gpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.etserve.cuda.CudaException;
import io.etserve.cuda.CudaRuntime;
import io.etserve.cuda.CudaStreamFactory;
import io.etserve.cuda.StreamLease;
import io.etserve.cuda.StreamPool;
import io.etserve.cuda.StreamPools;
import io.etserve.cuda.TensorRtProbe;
import io.etserve.execution.ExecutionSlot;
import io.etserve.execution.GpuInstancePool;
import io.etserve.health.CallerStreamCheck;
import io.etserve.health.CudaFaultMonitor;
import io.etserve.health.CudaHealthIndicator;
import io.etserve.runtime.CompletionWaits;
import io.etserve.runtime.ExecuTorchException;
import io.etserve.runtime.Program;
import io.etserve.runtime.ProgramInstance;
import io.etserve.runtime.StreamSelection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.Status;

/**
 * The GPU suite (tag gpu; run by scripts/gpu-suite.sh on a host with an NVIDIA GPU): real
 * streams from the pool and the caller-stream handshake with real handles, through the real
 * ExecuTorch runtime and the GPU build of the probe delegate.
 */
@Tag("gpu")
class GpuStreamsTest {

    static CudaRuntime cuda;

    @BeforeAll
    static void setUp() {
        GpuFixtures.loadRuntime();
        cuda = CudaRuntime.probe();
        assertThat(cuda.available()).as(cuda.unavailableReason().orElse("")).isTrue();
    }

    @Test
    void cudaRuntimeReportsDevicesMemoryAndVersions() {
        assertThat(cuda.devices()).isNotEmpty();
        CudaRuntime.Memory m = cuda.memory(0);
        assertThat(m.total()).isGreaterThan(1L << 30);
        assertThat(m.free()).isBetween(1L, m.total());
        assertThat(cuda.driverVersion()).isGreaterThanOrEqualTo(13000);
        assertThat(cuda.runtimeVersion()).isGreaterThanOrEqualTo(13000);
        int[] range = cuda.priorityRange(0);
        assertThat(range[1]).isLessThanOrEqualTo(range[0]);
        System.out.printf("GPU: %s, %d MiB, driver %d, runtime %d, priorities %d..%d%n", cuda.devices().get(0).name(),
                m.total() >> 20, cuda.driverVersion(), cuda.runtimeVersion(), range[0], range[1]);
    }

    @Test
    void thePoolCreatesDistinctRealStreams() throws Exception {
        StreamPool pool = new StreamPool(0, 8, cuda.priorityRange(0)[1], new CudaStreamFactory(cuda, StreamSelection.CompletionWait.ADAPTIVE), n -> {});
        Set<Long> handles = new HashSet<>();
        List<StreamLease> leases = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            StreamLease l = pool.lease(Duration.ofSeconds(1));
            leases.add(l);
            handles.add(l.stream().handle());
            assertThat(l.selection().mode()).isEqualTo(StreamSelection.Mode.CUDA);
        }
        // Real handles: not the legacy (0x1) or per-thread (0x2) default streams, all different.
        assertThat(handles).hasSize(8).doesNotContain(0L, 1L, 2L);
        leases.forEach(StreamLease::close);
        pool.close(Duration.ofSeconds(5));
    }

    @Test
    void theDelegateSeesTheLeasedStreamAndQueuesItsWorkThere() throws Exception {
        StreamPool pool = new StreamPool(0, 2, 0, new CudaStreamFactory(cuda, StreamSelection.CompletionWait.ADAPTIVE), n -> {});
        try (Program program = Program.load(GpuFixtures.PROBE_MODEL, Program.Verification.INTERNAL_CONSISTENCY);
                ProgramInstance probe = program.newInstance("forward")) {
            for (int i = 0; i < 20; i++) {
                try (StreamLease lease = pool.lease(Duration.ofSeconds(1))) {
                    long[] seen = GpuFixtures.probe(probe, lease.selection(), i % 2 == 0 ? 0f : 200f);
                    assertThat(seen[0]).isEqualTo(1);
                    assertThat(seen[1]).isEqualTo(lease.stream().handle());
                    assertThat(seen[2]).isEqualTo(i % 2 == 0 ? 0 : 1);
                }
            }
            long[] unguarded = GpuFixtures.probe(probe, StreamSelection.none(), 200f);
            assertThat(unguarded[0]).as("no guard: no selection").isZero();
            assertThat(unguarded[2]).as("the delegate still ran its work on its own stream").isEqualTo(1);
        }
        pool.close(Duration.ofSeconds(5));
    }

    @Test
    void everyAdaptiveWaitIsCountedWithHowItEndedSlicedOrNot() throws Exception {
        try (Program program = Program.load(GpuFixtures.PROBE_MODEL, Program.Verification.INTERNAL_CONSISTENCY)) {
            for (Duration slice : List.of(Duration.ZERO, Duration.ofNanos(50_000))) {
                StreamPool pool = new StreamPool(0, 1, 0,
                        new CudaStreamFactory(cuda, StreamSelection.CompletionWait.ADAPTIVE, slice), n -> {});
                try (ProgramInstance probe = program.newInstance("forward")) {
                    Map<CompletionWaits.Ended, Integer> ended = new EnumMap<>(CompletionWaits.Ended.class);
                    for (int i = 0; i < 60; i++) {
                        try (StreamLease lease = pool.lease(Duration.ofSeconds(1))) {
                            assertThat(GpuFixtures.probe(probe, lease.selection(), 1000f)[2]).isEqualTo(1);
                        }
                        CompletionWaits.Ended how = probe.lastAdaptiveWait();
                        assertThat(how).as("call %d, slice %s", i, slice).isNotEqualTo(CompletionWaits.Ended.NONE);
                        ended.merge(how, 1, Integer::sum);
                    }
                    // Each call's own report and the instance's counters agree, kind by kind. How many
                    // end in the spin depends on the host's sleeps and the GPU's clocks: the C++ tests
                    // check the learning on a fake clock, the GPU benchmark reports the mix
                    // (its "ended" column), so no share is asserted here.
                    CompletionWaits counted = probe.stats();
                    assertThat(counted.total()).isEqualTo(60);
                    assertThat(new long[] {counted.atStart(), counted.overslept(), counted.inSpin(),
                            counted.inBackoff()})
                            .as("slice %s, per call %s", slice, ended)
                            .containsExactly(count(ended, CompletionWaits.Ended.AT_START),
                                    count(ended, CompletionWaits.Ended.OVERSLEPT),
                                    count(ended, CompletionWaits.Ended.IN_SPIN),
                                    count(ended, CompletionWaits.Ended.IN_BACKOFF));
                }
                pool.close(Duration.ofSeconds(5));
            }
            StreamPool spin = new StreamPool(0, 1, 0, new CudaStreamFactory(cuda, StreamSelection.CompletionWait.SPIN),
                    n -> {});
            try (ProgramInstance probe = program.newInstance("forward");
                    StreamLease lease = spin.lease(Duration.ofSeconds(1))) {
                GpuFixtures.probe(probe, lease.selection(), 200f);
                assertThat(probe.lastAdaptiveWait()).isEqualTo(CompletionWaits.Ended.NONE);
            }
            spin.close(Duration.ofSeconds(5));
        }
    }

    @Test
    void aCallWhoseGpuWorkOutlastsTheCompletionTimeoutTakesItsDeviceAsHung() throws Exception {
        StreamPool pool = new StreamPool(0, 1, 0, new CudaStreamFactory(cuda, StreamSelection.CompletionWait.ADAPTIVE,
                Duration.ZERO, Duration.ofMillis(200)), n -> {});
        try (Program program = Program.load(GpuFixtures.PROBE_MODEL, Program.Verification.INTERNAL_CONSISTENCY)) {
            ProgramInstance probe = program.newInstance("forward");
            GpuInstancePool instances = new GpuInstancePool(pool, List.of(probe));
            try (ExecutionSlot slot = instances.acquire(Duration.ofSeconds(1))) {
                assertThat(GpuFixtures.probe(probe, slot.selection(), 1000f)[2]).as("work within the limit").isEqualTo(1);
            }
            ExecutionSlot slot = instances.acquire(Duration.ofSeconds(1));
            long t0 = System.nanoTime();
            assertThatThrownBy(() -> GpuFixtures.probe(probe, slot.selection(), 2_000_000f))
                    .isInstanceOfSatisfying(ExecuTorchException.class, e -> {
                        assertThat(e.leftGpuWorkRunning()).isTrue();
                        assertThat(CudaException.isStickyCode(e.errorCode())).as(e.getMessage()).isTrue();
                        assertThat(e.getMessage()).contains("did not complete within 200 ms");
                    });
            slot.close();
            long millis = (System.nanoTime() - t0) / 1_000_000;
            assertThat(millis).as("gave up at the limit and gave the stream back without waiting for the 2 s of work")
                    .isBetween(150L, 1_000L);
            assertThat(probe.leftGpuWorkRunning()).isTrue();
            assertThat(pool.fault()).isPresent();
            assertThat(pool.hung()).as("taken as hung: nothing on it is waited for again").isTrue();
            assertThat(instances.unavailableReason()).isPresent();
            instances.close();  // leaves the instance to the process's exit: returns at once
            assertThat((System.nanoTime() - t0) / 1_000_000).isLessThan(1_500L);
            assertThat(org.bytedeco.cuda.global.cudart.cudaDeviceSynchronize()).as("the 2 s of work ended by itself").isZero();
        }
        pool.close(Duration.ofSeconds(5));
    }

    @Test
    void concurrentCallsEachRunOnTheirOwnRealStream() throws Exception {
        int threads = 4;
        StreamPool pool = new StreamPool(0, threads, 0, new CudaStreamFactory(cuda, StreamSelection.CompletionWait.ADAPTIVE), n -> {});
        try (Program program = Program.load(GpuFixtures.PROBE_MODEL, Program.Verification.INTERNAL_CONSISTENCY)) {
            List<ProgramInstance> bySlot = new ArrayList<>();
            for (int i = 0; i < threads; i++) {
                bySlot.add(program.newInstance("forward"));
            }
            CyclicBarrier barrier = new CyclicBarrier(threads);
            ExecutorService exec = Executors.newFixedThreadPool(threads);
            List<Future<Integer>> fs = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                fs.add(exec.submit(() -> {
                    int ok = 0;
                    for (int i = 0; i < 100; i++) {
                        try (StreamLease lease = pool.lease(Duration.ofSeconds(10))) {
                            if (i % 25 == 0) {
                                barrier.await(10, TimeUnit.SECONDS);
                            }
                            long[] seen = GpuFixtures.probe(bySlot.get(lease.slot()), lease.selection(), 100f);
                            if (seen[0] != 1 || seen[1] != lease.stream().handle() || seen[2] != 1) {
                                throw new AssertionError("observed " + Long.toHexString(seen[1]) + " under lease "
                                        + Long.toHexString(lease.stream().handle()));
                            }
                            ok++;
                        }
                    }
                    return ok;
                }));
            }
            for (Future<Integer> f : fs) {
                assertThat(f.get(120, TimeUnit.SECONDS)).isEqualTo(100);
            }
            exec.shutdown();
            bySlot.forEach(ProgramInstance::close);
        }
        pool.close(Duration.ofSeconds(5));
    }

    @Test
    void healthShowsDevicesAndOneCallerStreamLibrary() throws Exception {
        StreamPool pool = new StreamPool(0, 2, 0, new CudaStreamFactory(cuda, StreamSelection.CompletionWait.ADAPTIVE), n -> {});
        StreamPools pools = new StreamPools(Map.of(0, pool), null, Duration.ofSeconds(5));
        Health h = new CudaHealthIndicator(cuda, pools, TensorRtProbe.probe(), new CudaFaultMonitor(e -> {}, pools)).health();
        assertThat(h.getStatus()).isEqualTo(Status.UP);
        System.out.println("cuda health: " + h.getDetails());
        CallerStreamCheck.Result cs = new CallerStreamCheck().check();
        assertThat(cs.ok()).as(cs.summary()).isTrue();
        System.out.println(cs.summary());
        pools.close();
    }

    private static long count(Map<CompletionWaits.Ended, Integer> ended, CompletionWaits.Ended kind) {
        return ended.getOrDefault(kind, 0);
    }
}
