package io.etserve.gpu;

import io.etserve.cuda.CudaRuntime;
import io.etserve.cuda.CudaStreamFactory;
import io.etserve.cuda.StreamLease;
import io.etserve.cuda.StreamPool;
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
 * GPU-bound probe workload, and the per-call cost of lease + guard + completion wait.
 * Usage: GpuStreamBenchmark [spinMicros=2000] [secondsPerPoint=3] [costCalls=20000]
 */
public final class GpuStreamBenchmark {

    public static void main(String[] args) throws Exception {
        float spin = args.length > 0 ? Float.parseFloat(args[0]) : 2000f;
        double seconds = args.length > 1 ? Double.parseDouble(args[1]) : 3;
        int costCalls = args.length > 2 ? Integer.parseInt(args[2]) : 20000;
        GpuFixtures.loadRuntime();
        CudaRuntime cuda = CudaRuntime.probe();
        if (!cuda.available()) {
            throw new IllegalStateException(cuda.unavailableReason().orElse("no CUDA"));
        }
        System.out.printf("device: %s; probe work %.0f us per call (one-block spin kernel)%n",
                cuda.devices().get(0).name(), spin);
        try (Program program = Program.load(GpuFixtures.PROBE_MODEL, Program.Verification.INTERNAL_CONSISTENCY)) {
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
        }
    }

    /** Calls per second with {@code threads} callers sharing a pool of {@code streams} streams. */
    static double throughput(Program program, CudaRuntime cuda, int threads, int streams, float spin, double seconds)
            throws Exception {
        StreamPool pool = new StreamPool(0, streams, 0, new CudaStreamFactory(cuda), n -> {});
        List<ProgramInstance> bySlot = new ArrayList<>();
        for (int i = 0; i < streams; i++) {
            bySlot.add(program.newInstance("forward"));
        }
        AtomicLong calls = new AtomicLong();
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
        bySlot.forEach(ProgramInstance::close);
        pool.close(Duration.ofSeconds(10));
        return counted[0] / seconds;
    }

    static void perCallCost(Program program, CudaRuntime cuda, int n) throws Exception {
        StreamPool pool = new StreamPool(0, 1, 0, new CudaStreamFactory(cuda), x -> {});
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
            row("lease + cudaSetDevice + guard + cudaStreamSynchronize + pool sync", full);
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
