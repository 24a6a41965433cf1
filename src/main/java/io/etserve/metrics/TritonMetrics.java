package io.etserve.metrics;

import io.etserve.execution.InferenceObserver;
import io.etserve.inference.RequestCancelledException;
import io.etserve.runtime.CompletionWaits;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.DistributionSummary;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
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
    /**
     * Each version's Triton series by model, then version: looked up on every call without a key
     * object; the statistics extension reads the same adders.
     */
    private final Map<String, Map<String, VersionSeries>> versions = new ConcurrentHashMap<>();
    private final Map<Key, Counter> completionWaits = new ConcurrentHashMap<>();
    private final Map<Key, LoadState> loadStates = new ConcurrentHashMap<>();
    private final Map<Key, Counter> cancelled = new ConcurrentHashMap<>();

    public TritonMetrics(MeterRegistry registry) {
        this.registry = registry;
    }

    private record Key(String name, String model, String version, String reason) {}


    /** A version's load outcome (1 failed, 0 loaded) and the gauge that reads it. */
    private record LoadState(AtomicInteger failed, Gauge gauge) {}

    /** The per-version series, by index into {@link VersionSeries}; durations are kept in nanoseconds. */
    private static final String[] NAMES = {PENDING, SUCCESS, COUNT, EXEC_COUNT, REQUEST_US, QUEUE_US, INPUT_US,
            INFER_US, OUTPUT_US};
    private static final int S_PENDING = 0;
    private static final int S_SUCCESS = 1;
    private static final int S_COUNT = 2;
    private static final int S_EXEC = 3;
    private static final int S_REQUEST = 4;
    private static final int S_QUEUE = 5;
    private static final int S_INPUT = 6;
    private static final int S_INFER = 7;
    private static final int S_OUTPUT = 8;
    private static final FailureReason[] REASONS = FailureReason.values();

    /**
     * One version's totals. Each exported gauge is registered the first time its value is
     * touched (all of them when the version loads), so a failure for an unknown model exports
     * its failure series only, as before. Durations are summed in nanoseconds; the {@code _us}
     * gauges read them divided by 1,000, so Prometheus and the statistics extension read one
     * number and cannot disagree.
     */
    private final class VersionSeries {
        final String model;
        final String version;
        final LongAdder[] values = new LongAdder[NAMES.length];
        final LongAdder[] failures = new LongAdder[REASONS.length];
        final Gauge[] gauges = new Gauge[NAMES.length];
        final Gauge[] failureGauges = new Gauge[REASONS.length];
        final LongAdder failNanos = new LongAdder();
        /** Milliseconds since the epoch of the last request that finished (Triton's last_inference); 0 for none. */
        volatile long lastInference;
        /** Per batch size: executions, input, infer and output nanoseconds (Triton's batch_stats). */
        final Map<Integer, LongAdder[]> batches = new ConcurrentHashMap<>();
        /** Rows per forward call, registered at a batched model's first call. */
        private volatile DistributionSummary batchSizes;

        VersionSeries(String model, String version) {
            this.model = model;
            this.version = version;
            for (int i = 0; i < values.length; i++) {
                values[i] = new LongAdder();
            }
            for (int i = 0; i < failures.length; i++) {
                failures[i] = new LongAdder();
            }
        }

        LongAdder value(int series) {
            if (gauges[series] == null) {
                register(series);
            }
            return values[series];
        }

        LongAdder failure(FailureReason reason) {
            int i = reason.ordinal();
            if (failureGauges[i] == null) {
                registerFailure(i);
            }
            return failures[i];
        }

        synchronized void register(int series) {
            if (gauges[series] == null) {
                String name = NAMES[series];
                boolean nanos = name.endsWith("_us");
                gauges[series] = Gauge.builder(name, values[series], v -> nanos ? v.sum() / 1000 : v.sum())
                        .description(DESCRIPTIONS.get(name)).tag("model", model).tag("version", version)
                        .register(registry);
            }
        }

        synchronized void registerFailure(int i) {
            if (failureGauges[i] == null) {
                failureGauges[i] = Gauge.builder(FAILURE, failures[i], LongAdder::doubleValue)
                        .description(DESCRIPTIONS.get(FAILURE)).tag("model", model).tag("version", version)
                        .tag("reason", REASONS[i].name()).register(registry);
            }
        }

        DistributionSummary batchSizes() {
            DistributionSummary sizes = batchSizes;
            return sizes != null ? sizes : registerBatchSizes();
        }

        private synchronized DistributionSummary registerBatchSizes() {
            if (batchSizes == null) {
                batchSizes = DistributionSummary.builder(BATCH_SIZE)
                        .description("Rows per forward call of a model with dynamic batching").baseUnit("rows")
                        .tag("model", model).tag("version", version)
                        .serviceLevelObjectives(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
                        .register(registry);
            }
            return batchSizes;
        }

        synchronized void removeGauges() {
            if (batchSizes != null) {
                registry.remove(batchSizes);
            }
            for (Gauge g : gauges) {
                if (g != null) {
                    registry.remove(g);
                }
            }
            for (Gauge g : failureGauges) {
                if (g != null) {
                    registry.remove(g);
                }
            }
        }

        void executed(int batchSize, long inputNanos, long inferNanos, long outputNanos) {
            LongAdder[] b = batches.get(batchSize);
            if (b == null) {
                b = batches.computeIfAbsent(batchSize,
                        k -> new LongAdder[] {new LongAdder(), new LongAdder(), new LongAdder(), new LongAdder()});
            }
            b[0].increment();
            b[1].add(inputNanos);
            b[2].add(inferNanos);
            b[3].add(outputNanos);
        }

        VersionStatistics snapshot() {
            long success = values[S_SUCCESS].sum();
            long failed = 0;
            for (LongAdder f : failures) {
                failed += f.sum();
            }
            List<VersionStatistics.Batch> batchStats = new ArrayList<>();
            new TreeMap<>(batches).forEach((size, b) -> {
                long n = b[0].sum();
                batchStats.add(new VersionStatistics.Batch(size, new VersionStatistics.Duration(n, b[1].sum()),
                        new VersionStatistics.Duration(n, b[2].sum()), new VersionStatistics.Duration(n, b[3].sum())));
            });
            return new VersionStatistics(model, version, lastInference, values[S_COUNT].sum(), values[S_EXEC].sum(),
                    new VersionStatistics.Duration(success, values[S_REQUEST].sum()),
                    new VersionStatistics.Duration(failed, failNanos.sum()),
                    new VersionStatistics.Duration(success, values[S_QUEUE].sum()),
                    new VersionStatistics.Duration(success, values[S_INPUT].sum()),
                    new VersionStatistics.Duration(success, values[S_INFER].sum()),
                    new VersionStatistics.Duration(success, values[S_OUTPUT].sum()), batchStats);
        }
    }

    private VersionSeries version(String model, String version) {
        Map<String, VersionSeries> ofModel = versions.get(model);
        if (ofModel == null) {
            ofModel = versions.computeIfAbsent(model, m -> new ConcurrentHashMap<>());
        }
        VersionSeries v = ofModel.get(version);
        return v != null ? v : ofModel.computeIfAbsent(version, k -> new VersionSeries(model, version));
    }

    /**
     * What the statistics extension answers for one version: read from the same totals the
     * Prometheus series export (zeros for a version that has seen no request).
     */
    public VersionStatistics statistics(String model, String version) {
        VersionSeries v = versions.getOrDefault(model, Map.of()).get(version);
        return v != null ? v.snapshot() : new VersionSeries(model, version).snapshot();
    }

    @Override
    public void indexed(String model, String version, boolean loadFailed) {
        loadStates.computeIfAbsent(new Key(LOAD_FAILED, model, version, null), k -> {
            var failed = new AtomicInteger();
            return new LoadState(failed, Gauge.builder(LOAD_FAILED, failed, AtomicInteger::get)
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
        VersionSeries v = version(model, version);
        for (int i = 0; i < NAMES.length; i++) {
            v.value(i);
        }
        for (FailureReason reason : REASONS) {
            v.failure(reason);
        }
    }

    @Override
    public void unloaded(String model, String version) {
        VersionSeries v = versions.getOrDefault(model, Map.of()).remove(version);
        if (v != null) {
            v.removeGauges();
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
                .tag("model", model).tag("version", version).tag("ended", ended.name().toLowerCase(Locale.ROOT))
                .register(registry)).increment();
    }

    @Override
    public void pending(String model, String version, int delta) {
        version(model, version).value(S_PENDING).add(delta);
    }

    @Override
    public void success(String model, String version, long inferences, long queueNanos, long inputNanos,
            long inferNanos, long outputNanos) {
        VersionSeries v = version(model, version);
        v.value(S_SUCCESS).increment();
        v.value(S_COUNT).add(inferences);
        v.value(S_REQUEST).add(queueNanos + inputNanos + inferNanos + outputNanos);
        v.value(S_QUEUE).add(queueNanos);
        v.value(S_INPUT).add(inputNanos);
        v.value(S_INFER).add(inferNanos);
        v.value(S_OUTPUT).add(outputNanos);
        v.lastInference = System.currentTimeMillis();
    }

    /** One lookup of the version's series per forward call. */
    @Override
    public void executed(String model, String version, int batchRows, long inputNanos, long inferNanos,
            long outputNanos) {
        VersionSeries v = version(model, version);
        v.value(S_EXEC).increment();
        v.executed(Math.max(1, batchRows), inputNanos, inferNanos, outputNanos);
        if (batchRows > 0) {
            v.batchSizes().record(batchRows);
        }
    }

    @Override
    public void failure(String model, String version, FailureReason reason, long requestNanos) {
        VersionSeries v = version(model, version);
        v.failure(reason).increment();
        v.failNanos.add(requestNanos);
        v.lastInference = System.currentTimeMillis();
    }
}
