package io.etserve.metrics;

import io.etserve.cuda.CudaRuntime;
import io.etserve.cuda.StreamPool;
import io.etserve.cuda.StreamPools;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.binder.MeterBinder;

/** Stream-pool utilisation per device, and Triton's GPU memory gauges. */
public final class StreamPoolMetrics implements MeterBinder {

    private final StreamPools pools;
    private final CudaRuntime cuda;

    public StreamPoolMetrics(StreamPools pools, CudaRuntime cuda) {
        this.pools = pools;
        this.cuda = cuda;
    }

    @Override
    public void bindTo(MeterRegistry registry) {
        for (StreamPool p : pools.all()) {
            String device = Integer.toString(p.device());
            Gauge.builder("etserve_stream_pool_streams", p, StreamPool::size).tag("device", device)
                    .description("Streams in the pool").register(registry);
            Gauge.builder("etserve_stream_pool_leased", p, StreamPool::leasedCount).tag("device", device)
                    .description("Streams leased to running calls").register(registry);
            Gauge.builder("etserve_stream_pool_idle", p, StreamPool::idleCount).tag("device", device)
                    .description("Streams free to lease").register(registry);
            Gauge.builder("etserve_stream_pool_waiting", p, StreamPool::waitingCount).tag("device", device)
                    .description("Callers waiting for a stream").register(registry);
        }
        for (CudaRuntime.Device d : cuda.devices()) {
            // gpu_uuid is Triton's label for these series: Model Analyzer's remote monitor keys every
            // GPU sample by it (a series without it fails the run); gpu (the ordinal) stays for dashboards.
            Tags tags = Tags.of("gpu", Integer.toString(d.ordinal()), "gpu_uuid", d.uuid());
            Gauge.builder("nv_gpu_memory_total_bytes", cuda, c -> memory(c, d.ordinal(), true)).tags(tags)
                    .description("GPU total memory").register(registry);
            Gauge.builder("nv_gpu_memory_used_bytes", cuda, c -> memory(c, d.ordinal(), false)).tags(tags)
                    .description("GPU used memory").register(registry);
        }
    }

    private static double memory(CudaRuntime cuda, int device, boolean total) {
        try {
            CudaRuntime.Memory m = cuda.memory(device);
            return total ? m.total() : m.total() - m.free();
        } catch (RuntimeException e) {
            return Double.NaN;
        }
    }
}
