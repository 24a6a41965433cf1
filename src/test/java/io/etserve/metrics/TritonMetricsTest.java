package io.etserve.metrics;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.execution.InferenceObserver;
import io.etserve.inference.RequestCancelledException;
import io.etserve.runtime.CompletionWaits;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.junit.jupiter.api.Test;

/** Triton's series exist at 0 from load, count what happens, and go away at unload. */
class TritonMetricsTest {

    private final SimpleMeterRegistry registry = new SimpleMeterRegistry();
    private final TritonMetrics metrics = new TritonMetrics(registry);

    private double value(String name, String model, String version) {
        return registry.get(name).tag("model", model).tag("version", version).gauge().value();
    }

    @Test
    void everySeriesExistsAtZeroOnceAModelLoads() {
        metrics.loaded("m", "1");
        for (String name : new String[] {"nv_inference_request_success", "nv_inference_count",
                "nv_inference_exec_count", "nv_inference_pending_request_count", "nv_inference_request_duration_us",
                "nv_inference_queue_duration_us", "nv_inference_compute_input_duration_us",
                "nv_inference_compute_infer_duration_us", "nv_inference_compute_output_duration_us"}) {
            assertThat(value(name, "m", "1")).as(name).isZero();
        }
        for (InferenceObserver.FailureReason reason : InferenceObserver.FailureReason.values()) {
            assertThat(registry.get("nv_inference_request_failure").tag("model", "m").tag("reason", reason.name())
                    .gauge().value()).isZero();
        }
    }

    @Test
    void countsAndDurationsAccumulateAndUnloadRemovesOnlyThatVersion() {
        metrics.loaded("m", "1");
        metrics.loaded("m", "2");
        metrics.pending("m", "1", 1);
        metrics.success("m", "1", 1, 3_000, 2_000, 10_000, 1_000);
        metrics.success("m", "1", 1, 3_000, 2_000, 10_000, 1_000);
        metrics.failure("m", "1", InferenceObserver.FailureReason.REJECTED, 5_000);
        metrics.pending("m", "1", -1);

        assertThat(value("nv_inference_request_success", "m", "1")).isEqualTo(2);
        assertThat(value("nv_inference_request_duration_us", "m", "1")).isEqualTo(32);
        assertThat(value("nv_inference_compute_infer_duration_us", "m", "1")).isEqualTo(20);
        assertThat(value("nv_inference_pending_request_count", "m", "1")).isZero();
        assertThat(registry.get("nv_inference_request_failure").tag("version", "1").tag("reason", "REJECTED")
                .gauge().value()).isEqualTo(1);

        metrics.unloaded("m", "1");
        assertThat(registry.find("nv_inference_request_success").tag("version", "1").gauges()).isEmpty();
        assertThat(registry.find("nv_inference_request_failure").tag("version", "1").gauges()).isEmpty();
        assertThat(value("nv_inference_request_success", "m", "2")).isZero();
    }

    @Test
    void aLoadThatFailedShowsAsOneUntilTheVersionLoadsOrLeavesTheIndex() {
        metrics.indexed("m", "1", false);
        metrics.indexed("m", "2", true);
        assertThat(value("etserve.model.load.failed", "m", "1")).isZero();
        assertThat(value("etserve.model.load.failed", "m", "2")).isEqualTo(1);
        metrics.indexed("m", "2", false);
        assertThat(value("etserve.model.load.failed", "m", "2")).isZero();
        metrics.indexed("m", "2", true);
        metrics.unindexed("m", "2");
        assertThat(registry.find("etserve.model.load.failed").tag("version", "2").gauges()).isEmpty();
        assertThat(value("etserve.model.load.failed", "m", "1")).isZero();
    }

    @Test
    void completionWaitsAreCountedByHowTheyEndedFromTheFirstAndGoAtUnload() {
        metrics.loaded("gpu", "1");
        assertThat(registry.find("etserve.gpu.completion.waits").counters()).isEmpty();
        metrics.completionWait("gpu", "1", CompletionWaits.Ended.IN_SPIN);
        metrics.completionWait("gpu", "1", CompletionWaits.Ended.IN_SPIN);
        metrics.completionWait("gpu", "1", CompletionWaits.Ended.OVERSLEPT);
        assertThat(registry.get("etserve.gpu.completion.waits").tag("model", "gpu").tag("ended", "in_spin")
                .counter().count()).isEqualTo(2);
        assertThat(registry.get("etserve.gpu.completion.waits").tag("ended", "overslept").counter().count())
                .isEqualTo(1);
        metrics.unloaded("gpu", "1");
        assertThat(registry.find("etserve.gpu.completion.waits").counters()).isEmpty();
    }

    @Test
    void droppedRequestsAreCountedByStageAndReasonUntilTheVersionUnloads() {
        metrics.loaded("m", "1");
        metrics.loaded("m", "2");
        metrics.cancelled("m", "1", RequestCancelledException.Stage.QUEUE, RequestCancelledException.Reason.CLIENT);
        metrics.cancelled("m", "1", RequestCancelledException.Stage.QUEUE, RequestCancelledException.Reason.CLIENT);
        metrics.cancelled("m", "1", RequestCancelledException.Stage.BATCH, RequestCancelledException.Reason.TIMEOUT);
        metrics.cancelled("m", "2", RequestCancelledException.Stage.EXECUTION, RequestCancelledException.Reason.DEADLINE);
        // etserve_inference_cancelled_total{model,version,stage,reason} in Prometheus
        assertThat(registry.get("etserve.inference.cancelled").tag("model", "m").tag("version", "1")
                .tag("stage", "queue").tag("reason", "client").counter().count()).isEqualTo(2);
        assertThat(registry.get("etserve.inference.cancelled").tag("version", "1").tag("stage", "batch")
                .tag("reason", "timeout").counter().count()).isEqualTo(1);
        metrics.unloaded("m", "1");
        assertThat(registry.find("etserve.inference.cancelled").tag("version", "1").counters()).isEmpty();
        assertThat(registry.get("etserve.inference.cancelled").tag("version", "2").tag("stage", "execution")
                .tag("reason", "deadline").counter().count()).isEqualTo(1);
    }

    @Test
    void statisticsReadTheTotalsTheGaugesExport() {
        metrics.loaded("m", "1");
        long before = System.currentTimeMillis();
        metrics.success("m", "1", 3, 1_999, 500, 10_700, 801);
        metrics.success("m", "1", 3, 1_999, 500, 10_700, 801);
        metrics.failure("m", "1", InferenceObserver.FailureReason.BACKEND, 4_000);
        metrics.failure("m", "1", InferenceObserver.FailureReason.OTHER, 1_000);
        metrics.executed("m", "1", 6, 100, 20_000, 300);
        metrics.executed("m", "1", 2, 10, 2_000, 30);
        metrics.executed("m", "1", 6, 100, 20_000, 300);
        VersionStatistics s = metrics.statistics("m", "1");
        assertThat(s.lastInference()).isBetween(before, System.currentTimeMillis());
        assertThat(s.inferenceCount()).isEqualTo(6);
        assertThat(s.executionCount()).isEqualTo(3);
        assertThat(s.success()).isEqualTo(new VersionStatistics.Duration(2, 2 * 14_000));
        assertThat(s.fail()).isEqualTo(new VersionStatistics.Duration(2, 5_000));
        assertThat(s.queue()).isEqualTo(new VersionStatistics.Duration(2, 3_998));
        assertThat(s.computeInfer()).isEqualTo(new VersionStatistics.Duration(2, 21_400));
        // the gauges read the same nanoseconds, in whole microseconds
        assertThat(value("nv_inference_queue_duration_us", "m", "1")).isEqualTo(3);
        assertThat(value("nv_inference_compute_infer_duration_us", "m", "1")).isEqualTo(21);
        assertThat(value("nv_inference_compute_output_duration_us", "m", "1")).isEqualTo(1);
        assertThat(value("nv_inference_request_duration_us", "m", "1")).isEqualTo(28);
        assertThat(s.batches()).containsExactly(
                new VersionStatistics.Batch(2, new VersionStatistics.Duration(1, 10), new VersionStatistics.Duration(1, 2_000),
                        new VersionStatistics.Duration(1, 30)),
                new VersionStatistics.Batch(6, new VersionStatistics.Duration(2, 200), new VersionStatistics.Duration(2, 40_000),
                        new VersionStatistics.Duration(2, 600)));
        metrics.unloaded("m", "1");
        assertThat(metrics.statistics("m", "1").success().count()).isZero();
    }

    @Test
    void oneExecutedCallCountsTheCallItsBatchStatisticsAndABatchedModelsRows() {
        metrics.executed("m", "1", 0, 0, 1_000, 0);
        assertThat(registry.find("etserve.inference.batch.size").summaries()).as("not a batched model's").isEmpty();
        metrics.executed("m", "1", 4, 10, 2_000, 30);
        metrics.executed("m", "1", 4, 10, 2_000, 30);
        assertThat(value("nv_inference_exec_count", "m", "1")).isEqualTo(3);
        assertThat(metrics.statistics("m", "1").batches()).extracting(VersionStatistics.Batch::batchSize)
                .as("a model that runs requests alone runs batches of 1").containsExactly(1, 4);
        var sizes = registry.get("etserve.inference.batch.size").tag("model", "m").tag("version", "1").summary();
        assertThat(sizes.count()).isEqualTo(2);
        assertThat(sizes.totalAmount()).isEqualTo(8);
        metrics.unloaded("m", "1");
        assertThat(registry.find("etserve.inference.batch.size").summaries()).isEmpty();
    }

    @Test
    void aFailureForAnUnknownModelExportsItsFailureSeriesOnly() {
        metrics.failure("unknown", "", InferenceObserver.FailureReason.OTHER, 10);
        assertThat(registry.get("nv_inference_request_failure").tag("model", "unknown").tag("reason", "OTHER").gauge()
                .value()).isEqualTo(1);
        assertThat(registry.find("nv_inference_request_success").tag("model", "unknown").gauges()).isEmpty();
        assertThat(registry.find("nv_inference_request_failure").tag("model", "unknown").tag("reason", "BACKEND")
                .gauges()).isEmpty();
    }
}
