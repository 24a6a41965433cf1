package io.etserve.triton;

import io.etserve.grpc.protocol.InferBatchStatistics;
import io.etserve.grpc.protocol.InferStatistics;
import io.etserve.grpc.protocol.ModelStatistics;
import io.etserve.grpc.protocol.StatisticDuration;
import io.etserve.metrics.VersionStatistics;

/** One version's totals ({@link VersionStatistics}) as Triton's statistics extension's message. */
public final class TritonStatistics {

    private TritonStatistics() {}

    public static ModelStatistics of(VersionStatistics s) {
        ModelStatistics.Builder b = ModelStatistics.newBuilder().setName(s.model()).setVersion(s.version())
                .setLastInference(s.lastInference()).setInferenceCount(s.inferenceCount())
                .setExecutionCount(s.executionCount())
                .setInferenceStats(InferStatistics.newBuilder().setSuccess(duration(s.success()))
                        .setFail(duration(s.fail())).setQueue(duration(s.queue()))
                        .setComputeInput(duration(s.computeInput())).setComputeInfer(duration(s.computeInfer()))
                        .setComputeOutput(duration(s.computeOutput()))
                        // no response cache: never a hit, never a miss (Triton counts misses only with a cache)
                        .setCacheHit(StatisticDuration.getDefaultInstance())
                        .setCacheMiss(StatisticDuration.getDefaultInstance()));
        for (VersionStatistics.Batch batch : s.batches()) {
            b.addBatchStats(InferBatchStatistics.newBuilder().setBatchSize(batch.batchSize())
                    .setComputeInput(duration(batch.computeInput())).setComputeInfer(duration(batch.computeInfer()))
                    .setComputeOutput(duration(batch.computeOutput())));
        }
        return b.build();
    }

    private static StatisticDuration duration(VersionStatistics.Duration d) {
        return StatisticDuration.newBuilder().setCount(d.count()).setNs(d.ns()).build();
    }
}
