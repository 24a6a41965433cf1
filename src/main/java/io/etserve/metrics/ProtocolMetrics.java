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

    private static final String[] STATUS_NAMES = new String[600];

    static {
        for (int i = 0; i < STATUS_NAMES.length; i++) {
            STATUS_NAMES[i] = Integer.toString(i);
        }
    }

    private final MeterRegistry registry;
    private final Predicate<String> knownModel;
    /** Timers by protocol, model and code: found on every call without building a key. */
    private final ConcurrentMap<String, ConcurrentMap<String, ConcurrentMap<String, Timer>>> timers =
            new ConcurrentHashMap<>();

    public ProtocolMetrics(MeterRegistry registry, Predicate<String> knownModel) {
        this.registry = registry;
        this.knownModel = knownModel;
    }

    /** An HTTP call by its status, named without a new string for the usual ones. */
    public void record(String protocol, String model, int httpStatus, long nanos) {
        record(protocol, model, httpStatus >= 0 && httpStatus < STATUS_NAMES.length ? STATUS_NAMES[httpStatus]
                : Integer.toString(httpStatus), nanos);
    }

    public void record(String protocol, String model, String code, long nanos) {
        String m = model != null && knownModel.test(model) ? model : "unknown";
        ConcurrentMap<String, Timer> byCode = timers.computeIfAbsent(protocol, p -> new ConcurrentHashMap<>())
                .computeIfAbsent(m, x -> new ConcurrentHashMap<>());
        Timer timer = byCode.get(code);
        if (timer == null) {
            timer = byCode.computeIfAbsent(code, c -> Timer.builder(NAME)
                    .description("Inference calls by protocol, model and answer")
                    .tag("protocol", protocol).tag("model", m).tag("code", code).register(registry));
        }
        timer.record(nanos, TimeUnit.NANOSECONDS);
    }
}
