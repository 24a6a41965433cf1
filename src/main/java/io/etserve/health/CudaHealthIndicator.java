package io.etserve.health;

import io.etserve.cuda.CudaRuntime;
import io.etserve.cuda.StreamPool;
import io.etserve.cuda.StreamPools;
import io.etserve.cuda.TensorRtProbe;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.HealthIndicator;

/**
 * {@code cuda}: devices, memory, driver and runtime versions, stream pools, TensorRT. A node
 * without CUDA is UP (it serves CPU models) with the reason in the details; a faulted stream
 * pool is DOWN.
 */
public final class CudaHealthIndicator implements HealthIndicator {

    private final CudaRuntime cuda;
    private final StreamPools pools;
    private final TensorRtProbe tensorRt;
    private final CudaFaultMonitor faults;

    public CudaHealthIndicator(CudaRuntime cuda, StreamPools pools, TensorRtProbe tensorRt, CudaFaultMonitor faults) {
        this.cuda = cuda;
        this.pools = pools;
        this.tensorRt = tensorRt;
        this.faults = faults;
    }

    @Override
    public Health health() {
        Health.Builder b = Health.up();
        faults.fault().ifPresent(f -> b.down().withDetail("stickyFault", f));
        b.withDetail("available", cuda.available());
        cuda.unavailableReason().ifPresent(r -> b.withDetail("reason", r));
        b.withDetail("driverVersion", CudaRuntime.versionString(cuda.driverVersion()));
        b.withDetail("runtimeVersion", CudaRuntime.versionString(cuda.runtimeVersion()));
        List<Map<String, Object>> devices = new ArrayList<>();
        for (CudaRuntime.Device d : cuda.devices()) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("ordinal", d.ordinal());
            m.put("name", d.name());
            m.put("computeCapability", d.computeMajor() + "." + d.computeMinor());
            try {
                CudaRuntime.Memory mem = cuda.memory(d.ordinal());
                m.put("memoryFreeBytes", mem.free());
                m.put("memoryTotalBytes", mem.total());
            } catch (RuntimeException e) {
                m.put("error", e.getMessage());
            }
            devices.add(m);
        }
        b.withDetail("devices", devices);
        List<Map<String, Object>> streamPools = new ArrayList<>();
        for (StreamPool p : pools.all()) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("device", p.device());
            m.put("streams", p.size());
            m.put("leased", p.leasedCount());
            m.put("waiting", p.waitingCount());
            p.fault().ifPresent(f -> m.put("fault", f));
            streamPools.add(m);
        }
        b.withDetail("streamPools", streamPools);
        // A faulted device takes out only its own instances; readiness drops only when none is
        // left (and then liveness is BROKEN too, see CudaFaultMonitor).
        if (!pools.isEmpty() && pools.all().stream().allMatch(p -> p.fault().isPresent())) {
            b.down();
        }
        pools.whyNone().ifPresent(w -> b.withDetail("streamPoolsAbsent", w));
        b.withDetail("tensorRt", tensorRt.available() ? Map.of("available", true, "version", tensorRt.version())
                : Map.of("available", false, "reason", tensorRt.reason()));
        return b.build();
    }
}
