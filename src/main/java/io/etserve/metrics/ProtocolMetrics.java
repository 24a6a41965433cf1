package io.etserve.metrics;

import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;

/**
 * Inference calls by protocol: {@code etserve.inference.requests} (Prometheus
 * {@code etserve_inference_requests_seconds_*}) tagged {@code protocol} (rest, grpc), {@code model}
 * and {@code code} (the HTTP status, or the gRPC status name). Triton's per-model series count
 * both protocols together, as Triton's do; this one tells them apart. A model name the server does
 * not know is counted as {@code unknown}, so clients cannot mint series.
 */
public final class ProtocolMetrics {

    public static final String NAME = "etserve.inference.requests";

    private final MeterRegistry registry;
    private final Predicate<String> knownModel;
    private final ConcurrentMap<String, Timer> timers = new ConcurrentHashMap<>();

    public ProtocolMetrics(MeterRegistry registry, Predicate<String> knownModel) {
        this.registry = registry;
        this.knownModel = knownModel;
    }

    public void record(String protocol, String model, String code, long nanos) {
        String m = model != null && knownModel.test(model) ? model : "unknown";
        timers.computeIfAbsent(protocol + '\u0000' + m + '\u0000' + code, k -> Timer.builder(NAME)
                .description("Inference calls by protocol, model and answer")
                .tag("protocol", protocol).tag("model", m).tag("code", code).register(registry))
                .record(nanos, TimeUnit.NANOSECONDS);
    }
}
