package io.etserve.metrics;

import io.etserve.inference.InferenceObserver;
import io.etserve.inference.RequestCancelledException;
import io.etserve.runtime.CompletionWaits;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.DistributionSummary;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;

/**
 * Triton's inference metrics under Triton's names and labels ({@code model}, {@code version},
 * {@code reason}), so existing dashboards work. They are registered as gauges over monotonic
 * totals: a Micrometer counter would be exported with a {@code _total} suffix and no longer
 * match the names dashboards query. Like Triton, every series of a model version exists (at 0)
 * from the moment it loads and is removed when it unloads.
 */
public final class TritonMetrics implements InferenceObserver {

    private static final String PENDING = "nv_inference_pending_request_count";
    private static final String SUCCESS = "nv_inference_request_success";
    private static final String FAILURE = "nv_inference_request_failure";
    private static final String COUNT = "nv_inference_count";
    private static final String EXEC_COUNT = "nv_inference_exec_count";
    private static final String REQUEST_US = "nv_inference_request_duration_us";
    private static final String QUEUE_US = "nv_inference_queue_duration_us";
    private static final String INPUT_US = "nv_inference_compute_input_duration_us";
    private static final String INFER_US = "nv_inference_compute_infer_duration_us";
    private static final String OUTPUT_US = "nv_inference_compute_output_duration_us";
    /** Not Triton's (it has none): rows per forward call, a histogram with the batch sizes as buckets. */
    private static final String BATCH_SIZE = "etserve.inference.batch.size";
    /** Not Triton's: how GPU calls' adaptive completion waits ended, by {@code ended}. */
    private static final String COMPLETION_WAITS = "etserve.gpu.completion.waits";
    /** Not Triton's: 1 while a version's last load failed, 0 once it loads; one series per index row. */
    private static final String LOAD_FAILED = "etserve.model.load.failed";
    /**
     * Not Triton's: requests dropped because nobody waited for them, by {@code stage} (queue,
     * batch: never ran; execution: ran, outputs discarded) and {@code reason} (client, deadline,
     * timeout). Exported as {@code etserve_inference_cancelled_total}.
     */
    private static final String CANCELLED = "etserve.inference.cancelled";

    private static final Map<String, String> DESCRIPTIONS = Map.of(
            PENDING, "Requests waiting for or in execution",
            SUCCESS, "Successful inference requests",
            FAILURE, "Failed inference requests",
            COUNT, "Inferences performed (a batched model's requests count by rows, others as 1)",
            EXEC_COUNT, "Model executions (one per forward call, however many requests it served)",
            REQUEST_US, "Cumulative request duration",
            QUEUE_US, "Cumulative time waiting for an instance (and, when batching, for company)",
            INPUT_US, "Cumulative input preparation time",
            INFER_US, "Cumulative execution time",
            OUTPUT_US, "Cumulative output preparation time");

    private final MeterRegistry registry;
    private final Map<Key, Series> series = new ConcurrentHashMap<>();
    private final Map<Key, DistributionSummary> batchSizes = new ConcurrentHashMap<>();
    private final Map<Key, Counter> completionWaits = new ConcurrentHashMap<>();
    private final Map<Key, LoadState> loadStates = new ConcurrentHashMap<>();
    private final Map<Key, Counter> cancelled = new ConcurrentHashMap<>();

    public TritonMetrics(MeterRegistry registry) {
        this.registry = registry;
    }

    private record Key(String name, String model, String version, String reason) {}

    /** One exported value: a total (or, for pending, a level) and the gauge that reads it. */
    private record Series(LongAdder value, Gauge gauge) {}

    /** A version's load outcome (1 failed, 0 loaded) and the gauge that reads it. */
    private record LoadState(java.util.concurrent.atomic.AtomicInteger failed, Gauge gauge) {}

    @Override
    public void indexed(String model, String version, boolean loadFailed) {
        loadStates.computeIfAbsent(new Key(LOAD_FAILED, model, version, null), k -> {
            var failed = new java.util.concurrent.atomic.AtomicInteger();
            return new LoadState(failed, Gauge.builder(LOAD_FAILED, failed, java.util.concurrent.atomic.AtomicInteger::get)
                    .description("1 while the last load of a model version failed (the repository index says why;"
                            + " a version that serves keeps serving what it loaded before), 0 once it loads")
                    .tag("model", model).tag("version", version).register(registry));
        }).failed().set(loadFailed ? 1 : 0);
    }

    @Override
    public void unindexed(String model, String version) {
        LoadState s = loadStates.remove(new Key(LOAD_FAILED, model, version, null));
        if (s != null) {
            registry.remove(s.gauge());
        }
    }

    @Override
    public void loaded(String model, String version) {
        for (String name : List.of(PENDING, SUCCESS, COUNT, EXEC_COUNT, REQUEST_US, QUEUE_US, INPUT_US, INFER_US,
                OUTPUT_US)) {
            series(name, model, version, null);
        }
        for (FailureReason reason : FailureReason.values()) {
            series(FAILURE, model, version, reason.name());
        }
    }

    @Override
    public void unloaded(String model, String version) {
        List<Key> gone = new ArrayList<>();
        series.forEach((key, s) -> {
            if (key.model().equals(model) && key.version().equals(version)) {
                gone.add(key);
            }
        });
        for (Key key : gone) {
            Series s = series.remove(key);
            if (s != null) {
                registry.remove(s.gauge());
            }
        }
        DistributionSummary sizes = batchSizes.remove(new Key(BATCH_SIZE, model, version, null));
        if (sizes != null) {
            registry.remove(sizes);
        }
        for (CompletionWaits.Ended ended : CompletionWaits.Ended.values()) {
            Counter c = completionWaits.remove(new Key(COMPLETION_WAITS, model, version, ended.name()));
            if (c != null) {
                registry.remove(c);
            }
        }
        cancelled.keySet().removeIf(key -> {
            if (key.model().equals(model) && key.version().equals(version)) {
                registry.remove(cancelled.get(key));
                return true;
            }
            return false;
        });
    }

    /** Counted from a model's first dropped request on, like the completion waits. */
    @Override
    public void cancelled(String model, String version, RequestCancelledException.Stage stage,
            RequestCancelledException.Reason reason) {
        cancelled.computeIfAbsent(new Key(CANCELLED, model, version, stage.label() + "/" + reason.label()), k -> Counter
                .builder(CANCELLED).description("Requests dropped because nobody waited for them any more")
                .tag("model", model).tag("version", version).tag("stage", stage.label()).tag("reason", reason.label())
                .register(registry)).increment();
    }

    /**
     * Counted from a model's first GPU wait on (a CPU model has none): how often the adaptive wait
     * slept past the completion or had to back off tells whether it fits the model's GPU time.
     */
    @Override
    public void completionWait(String model, String version, CompletionWaits.Ended ended) {
        completionWaits.computeIfAbsent(new Key(COMPLETION_WAITS, model, version, ended.name()), k -> Counter
                .builder(COMPLETION_WAITS).description("GPU forward calls by how their adaptive completion wait ended")
                .tag("model", model).tag("version", version).tag("ended", ended.name().toLowerCase(java.util.Locale.ROOT))
                .register(registry)).increment();
    }

    @Override
    public void pending(String model, String version, int delta) {
        series(PENDING, model, version, null).add(delta);
    }

    @Override
    public void success(String model, String version, long inferences, long queueNanos, long inputNanos,
            long inferNanos, long outputNanos) {
        series(SUCCESS, model, version, null).increment();
        series(COUNT, model, version, null).add(inferences);
        micros(REQUEST_US, model, version, queueNanos + inputNanos + inferNanos + outputNanos);
        micros(QUEUE_US, model, version, queueNanos);
        micros(INPUT_US, model, version, inputNanos);
        micros(INFER_US, model, version, inferNanos);
        micros(OUTPUT_US, model, version, outputNanos);
    }

    @Override
    public void executed(String model, String version, int batchRows) {
        series(EXEC_COUNT, model, version, null).increment();
        if (batchRows > 0) {
            batchSizes.computeIfAbsent(new Key(BATCH_SIZE, model, version, null), k -> DistributionSummary
                    .builder(BATCH_SIZE).description("Rows per forward call of a model with dynamic batching")
                    .baseUnit("rows").tag("model", model).tag("version", version)
                    .serviceLevelObjectives(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096)
                    .register(registry)).record(batchRows);
        }
    }

    @Override
    public void failure(String model, String version, FailureReason reason, long requestNanos) {
        series(FAILURE, model, version, reason.name()).increment();
    }

    private void micros(String name, String model, String version, long nanos) {
        series(name, model, version, null).add(nanos / 1000);
    }

    private LongAdder series(String name, String model, String version, String reason) {
        return series.computeIfAbsent(new Key(name, model, version, reason), k -> {
            LongAdder value = new LongAdder();
            Gauge.Builder<LongAdder> b = Gauge.builder(name, value, LongAdder::doubleValue)
                    .description(DESCRIPTIONS.get(name)).tag("model", model).tag("version", version);
            if (reason != null) {
                b.tag("reason", reason);
            }
            return new Series(value, b.register(registry));
        }).value();
    }
}
