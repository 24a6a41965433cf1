package io.etserve.execution;

import io.etserve.inference.ModelUnavailableException;
import io.etserve.inference.OverloadedException;
import io.etserve.inference.RequestCancelledException;
import io.etserve.inference.WouldWaitException;
import io.etserve.runtime.ExecutionInput;
import io.etserve.runtime.ExecutionOutput;
import io.etserve.runtime.OutputBuffers;
import java.time.Duration;
import java.util.List;

/**
 * Requests of a model without dynamic batching, each its own forward call: a free instance
 * within the queue timeout (or the request's deadline), admission, execute. A request whose
 * caller goes leaves the instance line at once.
 */
final class UnbatchedCalls {

    private final Duration queueTimeout;
    private final InferenceSpans spans;
    private final Forward forward;

    UnbatchedCalls(Duration queueTimeout, InferenceSpans spans, Forward forward) {
        this.queueTimeout = queueTimeout;
        this.spans = spans;
        this.forward = forward;
    }

    /**
     * The request as its own forward call: a free instance, admission, execute. The wait is in
     * the instance line, which a request whose caller goes leaves at once; admission after it
     * can only meet the breaker's refusal.
     */
    InferenceService.Executed run(LoadedModel model, List<ExecutionInput> inputs, OutputBuffers outputs,
            Cancellation cancellation) {
        long queued = System.nanoTime();
        Forward.Call call = null;
        try {
            ExecutionSlot slot;
            try (InferenceSpans.Phase queue = spans.queue(model.name(), model.version())) {
                slot = acquireTraced(model, cancellation, queue);
            }
            call = forward.admit(model, slot);
            long executing = System.nanoTime();
            List<ExecutionOutput> outs = call.run(inputs, outputs, 0, List.of());
            long inferNanos = System.nanoTime() - executing;
            model.forwardTook(inferNanos);
            return new InferenceService.Executed(outs, 1, executing - queued, 0, inferNanos, 0);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new ModelUnavailableException("interrupted while waiting for an instance");
        } catch (WouldWaitException e) {
            throw e;  // nothing ran and nothing failed: the transport runs it again elsewhere
        } catch (RuntimeException e) {
            if (call == null || !call.ran()) {
                forward.notRun(e);
            }
            throw e;
        } finally {
            if (call != null) {
                call.close();
            }
        }
    }

    /** {@link #acquire}, with a failure recorded on the queue span. */
    private ExecutionSlot acquireTraced(LoadedModel model, Cancellation cancellation, InferenceSpans.Phase queue)
            throws InterruptedException {
        try {
            return acquire(model, cancellation);
        } catch (WouldWaitException e) {
            throw e;
        } catch (InterruptedException | RuntimeException e) {
            queue.failed(e);
            throw e;
        }
    }

    /**
     * A free instance within the queue timeout (or the request's deadline, when sooner); leaves
     * the line when the caller goes.
     *
     * @throws RequestCancelledException when the caller went or the deadline passed first
     * @throws OverloadedException when the queue timeout passed first
     */
    private ExecutionSlot acquire(LoadedModel model, Cancellation cancellation) throws InterruptedException {
        if (!cancellation.mayWait()) {
            try {
                ExecutionSlot free = model.instances().acquire(Duration.ZERO, cancellation);
                if (free != null) {
                    return free;
                }
            } catch (OverloadedException e) {
                // none free now
            }
            throw new WouldWaitException(model.name());
        }
        ExecutionSlot slot;
        try {
            slot = model.instances().acquire(
                    Duration.ofNanos(cancellation.waitNanos(System.nanoTime(), queueTimeout.toNanos())), cancellation);
        } catch (OverloadedException e) {
            if (cancellation.expired(System.nanoTime())) {
                throw cancellation.dropped(RequestCancelledException.Stage.QUEUE, model.name());
            }
            throw new OverloadedException("model '" + model.name() + "' is at capacity: " + e.getMessage(),
                    e.retryAfter());
        } finally {
            cancellation.stopWaiting();
        }
        if (slot == null || cancellation.hasLeft()) {
            if (slot != null) {
                slot.close();
            }
            throw cancellation.dropped(RequestCancelledException.Stage.QUEUE, model.name());
        }
        return slot;
    }
}
