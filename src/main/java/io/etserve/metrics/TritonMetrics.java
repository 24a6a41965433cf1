package io.etserve.metrics;

import io.etserve.inference.InferenceObserver;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

/**
 * Triton's inference metrics under Triton's names and labels ({@code model}, {@code version},
 * {@code reason}), so existing dashboards work. They are registered as gauges over monotonic
 * totals: a Micrometer counter would be exported with a {@code _total} suffix and no longer
 * match the names dashboards query.
 */
public final class TritonMetrics implements InferenceObserver {

    private final MeterRegistry registry;
    private final Map<String, LongAdder> totals = new ConcurrentHashMap<>();
    private final Map<String, AtomicLong> pending = new ConcurrentHashMap<>();

    public TritonMetrics(MeterRegistry registry) {
        this.registry = registry;
    }

    @Override
    public void pending(String model, int delta) {
        pending.computeIfAbsent(model, m -> {
            AtomicLong v = new AtomicLong();
            Gauge.builder("nv_inference_pending_request_count", v, AtomicLong::get)
                    .description("Requests waiting for or in execution").tag("model", m).register(registry);
            return v;
        }).addAndGet(delta);
    }

    @Override
    public void success(String model, String version, long queueNanos, long inputNanos, long inferNanos,
            long outputNanos) {
        total("nv_inference_request_success", "Successful inference requests", model, version, null).increment();
        total("nv_inference_count", "Inferences performed (batch 1 per request)", model, version, null).increment();
        total("nv_inference_exec_count", "Model executions", model, version, null).increment();
        long total = queueNanos + inputNanos + inferNanos + outputNanos;
        micros("nv_inference_request_duration_us", "Cumulative request duration", model, version, total);
        micros("nv_inference_queue_duration_us", "Cumulative time waiting for an instance", model, version, queueNanos);
        micros("nv_inference_compute_input_duration_us", "Cumulative input preparation time", model, version, inputNanos);
        micros("nv_inference_compute_infer_duration_us", "Cumulative execution time", model, version, inferNanos);
        micros("nv_inference_compute_output_duration_us", "Cumulative output preparation time", model, version,
                outputNanos);
    }

    @Override
    public void failure(String model, String version, FailureReason reason, long requestNanos) {
        total("nv_inference_request_failure", "Failed inference requests", model, version, reason.name()).increment();
    }

    private void micros(String name, String description, String model, String version, long nanos) {
        total(name, description, model, version, null).add(nanos / 1000);
    }

    private LongAdder total(String name, String description, String model, String version, String reason) {
        String key = name + '\0' + model + '\0' + version + '\0' + reason;
        return totals.computeIfAbsent(key, k -> {
            LongAdder adder = new LongAdder();
            Gauge.Builder<LongAdder> b = Gauge.builder(name, adder, LongAdder::doubleValue).description(description)
                    .tag("model", model).tag("version", version);
            if (reason != null) {
                b.tag("reason", reason);
            }
            b.register(registry);
            return adder;
        });
    }
}
