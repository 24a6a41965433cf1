package io.etserve.gpu;

import io.etserve.cuda.CudaRuntime;
import io.etserve.cuda.CudaStreamFactory;
import io.etserve.cuda.StreamLease;
import io.etserve.cuda.StreamPool;
import io.etserve.runtime.CompletionWaits;
import io.etserve.runtime.Program;
import io.etserve.runtime.ProgramInstance;
import io.etserve.runtime.StreamSelection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;

/**
 * GPU benchmark (scripts/gpu-suite.sh): K leased streams against one shared stream for a
 * GPU-bound probe workload, the per-call cost of lease + guard + completion wait, and the
 * completion waits compared (wait overhead over the kernel, host CPU per call, throughput with
 * as many and twice as many callers as streams).
 * Usage: GpuStreamBenchmark [spinMicros=2000] [secondsPerPoint=3] [costCalls=20000] [sections=all|waits]
 */
public final class GpuStreamBenchmark {

    /** A completion wait as configured: the kind and the adaptive wait's sleep slice. */
    record Wait(StreamSelection.CompletionWait kind, Duration slice) {
        static final List<Wait> ALL = List.of(new Wait(StreamSelection.CompletionWait.SPIN, Duration.ZERO),
                new Wait(StreamSelection.CompletionWait.ADAPTIVE, Duration.ZERO),
                new Wait(StreamSelection.CompletionWait.ADAPTIVE, Duration.ofNanos(50_000)),
                new Wait(StreamSelection.CompletionWait.ADAPTIVE, Duration.ofNanos(100_000)),
                new Wait(StreamSelection.CompletionWait.BLOCKING, Duration.ZERO));

        CudaStreamFactory factory(CudaRuntime cuda) {
            return new CudaStreamFactory(cuda, kind, slice);
        }

        @Override
        public String toString() {
            return slice.isZero() ? kind.toString() : kind + ", slice " + slice.toNanos() / 1000 + " us";
        }
    }

    public static void main(String[] args) throws Exception {
        float spin = args.length > 0 ? Float.parseFloat(args[0]) : 2000f;
        double seconds = args.length > 1 ? Double.parseDouble(args[1]) : 3;
        int costCalls = args.length > 2 ? Integer.parseInt(args[2]) : 20000;
        boolean all = args.length <= 3 || args[3].equals("all");
        GpuFixtures.loadRuntime();
        CudaRuntime cuda = CudaRuntime.probe();
        if (!cuda.available()) {
            throw new IllegalStateException(cuda.unavailableReason().orElse("no CUDA"));
        }
        System.out.printf("device: %s; probe work %.0f us per call (one-block spin kernel)%n",
                cuda.devices().get(0).name(), spin);
        try (Program program = Program.load(GpuFixtures.PROBE_MODEL, Program.Verification.INTERNAL_CONSISTENCY)) {
            if (!all) {
                completionWaits(program, cuda, seconds);
                return;
            }
            System.out.println();
            System.out.println("| K | K leased streams (calls/s) | 1 shared stream (calls/s) | ratio |");
            System.out.println("|---|---|---|---|");
            for (int k : new int[] {1, 2, 4, 8}) {
                double many = throughput(program, cuda, k, k, spin, seconds);
                double one = throughput(program, cuda, k, 1, spin, seconds);
                System.out.printf("| %d | %.0f | %.0f | %.2f |%n", k, many, one, many / one);
            }
            System.out.println();
            perCallCost(program, cuda, costCalls);
            System.out.println();
            completionWaits(program, cuda, seconds);
        }
    }

    /**
     * Each completion wait, for 2 ms and 10 ms kernels: one caller on one stream (wall time per
     * call over the kernel's nominal time, p50/p99; process CPU per call), then 4 streams with 4
     * and 8 callers (calls/s). Process CPU comes from the JVM's own counter: the whole service
     * cost of a call, the bridge's wait included.
     */
    static void completionWaits(Program program, CudaRuntime cuda, double seconds) throws Exception {
        var os = (com.sun.management.OperatingSystemMXBean) java.lang.management.ManagementFactory
                .getOperatingSystemMXBean();
        System.out.println("Completion wait, one caller on one stream (overhead = wall time per call - kernel time;");
        System.out.println("over spin = the same percentile minus spin's: what the wait adds to the fastest possible one):");
        System.out.println("after wait = from the moment the native wait returned to the call's end in Java (outputs,");
        System.out.println("JNI return, lease release); ended = how adaptive waits ended: at start / overslept / in spin / back-off, %):");
        System.out.println("| wait | kernel us | calls | overhead p50 us | overhead p99 us | over spin p50 us | over spin p99 us "
                + "| CPU per call us | CPU % of kernel | after wait p50 us | after wait p99 us | ended |");
        System.out.println("|---|---|---|---|---|---|---|---|---|---|---|---|");
        for (float kernel : new float[] {2000f, 10000f}) {
            // Spin first: it is the baseline the others are compared with.
            double[] spinOverhead = null;
            for (Wait wait : Wait.ALL) {
                StreamPool pool = new StreamPool(0, 1, 0, wait.factory(cuda), x -> {});
                try (ProgramInstance probe = program.newInstance("forward")) {
                    int calls = (int) Math.max(300, 3e6 / kernel);
                    long[] wall = new long[calls];
                    long[] afterWait = new long[calls];
                    for (int warm = 0; warm < 50; warm++) {
                        try (StreamLease lease = pool.lease(Duration.ofSeconds(5))) {
                            GpuFixtures.probe(probe, lease.selection(), kernel);
                        }
                    }
                    CompletionWaits before = probe.stats();
                    long cpu0 = os.getProcessCpuTime();
                    long statsCpu = 0;
                    for (int i = 0; i < calls; i++) {
                        long t0 = System.nanoTime();
                        try (StreamLease lease = pool.lease(Duration.ofSeconds(5))) {
                            GpuFixtures.probe(probe, lease.selection(), kernel);
                        }
                        long t1 = System.nanoTime();
                        wall[i] = t1 - t0 - (long) (kernel * 1000);
                        long last = probe.stats().lastWaitEndNanos();
                        afterWait[i] = last == 0 ? 0 : t1 - last;
                        statsCpu += System.nanoTime() - t1;
                    }
                    // The stats read is not part of a call: its (busy, one-thread) time comes off.
                    double cpuPerCall = (os.getProcessCpuTime() - cpu0 - statsCpu) / 1000.0 / calls;
                    CompletionWaits ended = probe.stats().since(before);
                    double p50 = percentile(wall, 50) / 1000.0;
                    double p99 = percentile(wall, 99) / 1000.0;
                    if (spinOverhead == null) {
                        spinOverhead = new double[] {p50, p99};
                    }
                    String how = wait.kind() == StreamSelection.CompletionWait.ADAPTIVE
                            ? String.format("%d / %d / %d / %d", 100 * ended.atStart() / calls,
                                    100 * ended.overslept() / calls, 100 * ended.inSpin() / calls,
                                    100 * ended.inBackoff() / calls)
                            : "-";
                    System.out.printf("| %s | %.0f | %d | %.1f | %.1f | %+.1f | %+.1f | %.0f | %.1f | %s | %s | %s |%n", wait,
                            kernel, calls, p50, p99, p50 - spinOverhead[0], p99 - spinOverhead[1], cpuPerCall,
                            100 * cpuPerCall / kernel,
                            String.format("%.1f", percentile(afterWait, 50) / 1000.0),
                            String.format("%.1f", percentile(afterWait, 99) / 1000.0),
                            how);
                }
                pool.close(Duration.ofSeconds(10));
            }
        }
        System.out.println();
        System.out.println("Completion wait, 4 streams, 2 ms kernel (calls/s):");
        System.out.println("| wait | 4 callers | 8 callers | ratio | CPU per call us (8 callers) |");
        System.out.println("|---|---|---|---|---|");
        for (Wait wait : Wait.ALL) {
            double four = throughput(program, cuda, 4, 4, 2000f, seconds, wait, null);
            double[] cpu = new double[1];
            double eight = throughput(program, cuda, 8, 4, 2000f, seconds, wait, cpu);
            System.out.printf("| %s | %.0f | %.0f | %.2f | %.0f |%n", wait, four, eight, eight / four, cpu[0]);
        }
    }

    /** Calls per second with {@code threads} callers sharing a pool of {@code streams} streams. */
    static double throughput(Program program, CudaRuntime cuda, int threads, int streams, float spin, double seconds)
            throws Exception {
        return throughput(program, cuda, threads, streams, spin, seconds,
                new Wait(StreamSelection.CompletionWait.ADAPTIVE, Duration.ZERO), null);
    }

    /** As above with a given completion wait; {@code cpuPerCall[0]} gets process CPU us per call if given. */
    static double throughput(Program program, CudaRuntime cuda, int threads, int streams, float spin, double seconds,
            Wait wait, double[] cpuPerCall) throws Exception {
        var os = (com.sun.management.OperatingSystemMXBean) java.lang.management.ManagementFactory
                .getOperatingSystemMXBean();
        StreamPool pool = new StreamPool(0, streams, 0, wait.factory(cuda), n -> {});
        List<ProgramInstance> bySlot = new ArrayList<>();
        for (int i = 0; i < streams; i++) {
            bySlot.add(program.newInstance("forward"));
        }
        AtomicLong calls = new AtomicLong();
        AtomicLong cpuAtWarmupEnd = new AtomicLong(-1);
        long warmupEnd = System.nanoTime() + 500_000_000L;
        long end = warmupEnd + (long) (seconds * 1e9);
        CountDownLatch done = new CountDownLatch(threads);
        long[] counted = new long[1];
        for (int t = 0; t < threads; t++) {
            Thread th = new Thread(() -> {
                try {
                    while (System.nanoTime() < end) {
                        try (StreamLease lease = pool.lease(Duration.ofSeconds(30))) {
                            GpuFixtures.probe(bySlot.get(lease.slot()), lease.selection(), spin);
                        }
                        if (System.nanoTime() > warmupEnd) {
                            cpuAtWarmupEnd.compareAndSet(-1, os.getProcessCpuTime());
                            calls.incrementAndGet();
                        }
                    }
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                } finally {
                    done.countDown();
                }
            });
            th.start();
        }
        done.await();
        counted[0] = calls.get();
        if (cpuPerCall != null) {
            cpuPerCall[0] = (os.getProcessCpuTime() - cpuAtWarmupEnd.get()) / 1000.0 / Math.max(1, counted[0]);
        }
        bySlot.forEach(ProgramInstance::close);
        pool.close(Duration.ofSeconds(10));
        return counted[0] / seconds;
    }

    static void perCallCost(Program program, CudaRuntime cuda, int n) throws Exception {
        StreamPool pool = new StreamPool(0, 1, 0, new CudaStreamFactory(cuda, StreamSelection.CompletionWait.ADAPTIVE), x -> {});
        try (ProgramInstance probe = program.newInstance("forward")) {
            long[] plain = new long[n];
            long[] selectOnly = new long[n];
            long[] full = new long[n];
            for (int warm = 0; warm < 2; warm++) {
                for (int i = 0; i < n; i++) {
                    long t0 = System.nanoTime();
                    GpuFixtures.probe(probe, StreamSelection.none(), 0f);
                    long t1 = System.nanoTime();
                    try (StreamLease lease = pool.lease(Duration.ofSeconds(1))) {
                        GpuFixtures.probe(probe, StreamSelection.selectOnly(lease.stream().handle()), 0f);
                    }
                    long t2 = System.nanoTime();
                    try (StreamLease lease = pool.lease(Duration.ofSeconds(1))) {
                        GpuFixtures.probe(probe, lease.selection(), 0f);
                    }
                    long t3 = System.nanoTime();
                    plain[i] = t1 - t0;
                    selectOnly[i] = t2 - t1;
                    full[i] = t3 - t2;
                }
            }
            System.out.println("Per-call cost, probe with no GPU work, " + n + " calls (ns):");
            System.out.println("| path | p50 | p99 |");
            System.out.println("|---|---|---|");
            row("execute, no lease, no guard", plain);
            row("lease + guard + pool sync (no CUDA calls in the bridge)", selectOnly);
            row("lease + cudaSetDevice + guard + completion wait (adaptive) + pool sync", full);
            System.out.printf("overhead of lease + guard + completion wait: p50 %+d ns%n",
                    percentile(full, 50) - percentile(plain, 50));
        }
        pool.close(Duration.ofSeconds(5));
    }

    private static void row(String name, long[] v) {
        System.out.printf("| %s | %d | %d |%n", name, percentile(v, 50), percentile(v, 99));
    }

    private static long percentile(long[] v, int p) {
        long[] s = v.clone();
        Arrays.sort(s);
        return s[Math.min(s.length - 1, (int) Math.ceil(p / 100.0 * s.length) - 1)];
    }
}
