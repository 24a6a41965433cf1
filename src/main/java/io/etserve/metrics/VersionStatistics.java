package io.etserve.metrics;

import java.util.List;

/**
 * One model version's totals as Triton's statistics extension reports them, read from the
 * adders {@link TritonMetrics} exports to Prometheus (the {@code _us} series are these
 * nanoseconds divided by 1,000).
 *
 * @param lastInference milliseconds since the epoch when its last request finished, 0 for none
 * @param inferenceCount {@code nv_inference_count}: rows for a batched model, else requests
 * @param executionCount {@code nv_inference_exec_count}: forward calls
 * @param success successful requests and their whole duration
 * @param fail failed requests (every reason) and their duration
 * @param batches per batch size: forward calls and where their time went
 */
public record VersionStatistics(String model, String version, long lastInference, long inferenceCount,
        long executionCount, Duration success, Duration fail, Duration queue, Duration computeInput,
        Duration computeInfer, Duration computeOutput, List<Batch> batches) {

    public VersionStatistics {
        batches = List.copyOf(batches);
    }

    /** Triton's {@code StatisticDuration}: how many, and their nanoseconds together. */
    public record Duration(long count, long ns) {}

    /** Triton's {@code InferBatchStatistics}. */
    public record Batch(int batchSize, Duration computeInput, Duration computeInfer, Duration computeOutput) {}
}
