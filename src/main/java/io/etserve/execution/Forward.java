package io.etserve.execution;

import io.etserve.inference.InferenceException;
import io.etserve.inference.InferenceFailedException;
import io.etserve.runtime.CompletionWaits;
import io.etserve.runtime.DirectBufferPool;
import io.etserve.runtime.ExecutionInput;
import io.etserve.runtime.ExecutionOutput;
import io.etserve.runtime.OutputBuffers;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalInt;

/**
 * Forward calls on held instances, for a request alone ({@link InferenceService}) and for a batch
 * ({@link DynamicBatcher.Batch#run}): the one place a call is admitted, traced, executed and
 * reported. The breaker learns each call's outcome once, and a runtime failure (also one found
 * when the instance's stream is given back, a CUDA fault) reaches the fault listener once,
 * however many requests shared the call.
 */
final class Forward {

    private final InferenceObserver observer;
    private final ModelAdmission admission;
    private final FaultListener faults;
    private final InferenceSpans spans;
    private final DirectBufferPool buffers;

    /** @param buffers where a batch's joined tensors and outputs are held while it runs */
    Forward(InferenceObserver observer, ModelAdmission admission, FaultListener faults, InferenceSpans spans,
            DirectBufferPool buffers) {
        this.observer = observer;
        this.admission = admission;
        this.faults = faults;
        this.spans = spans;
        this.buffers = buffers;
    }

    DirectBufferPool buffers() {
        return buffers;
    }

    /**
     * Admits one call of {@code model} on {@code slot}: the slot is its share of the model's
     * capacity, and the breaker may still refuse.
     *
     * @throws RuntimeException the admission's refusal (breaker open), after the slot is given back
     */
    Call admit(LoadedModel model, ExecutionSlot slot) throws InterruptedException {
        try {
            return new Call(model, slot, admission.admit(model));
        } catch (InterruptedException | RuntimeException e) {
            try {
                slot.close();
            } catch (RuntimeException release) {
                e.addSuppressed(release);  // the refusal is what the caller is told
            }
            throw e;
        }
    }

    /**
     * A call that failed before its forward call ran (no instance, a stream that could not be
     * leased on a faulted device, a refused admission) reaches the fault listener as a runtime
     * failure would, once.
     */
    void notRun(RuntimeException e) {
        if (InferenceException.of(e) instanceof InferenceFailedException) {
            faults.onRuntimeFailure(OptionalInt.empty(), e);
        }
    }

    /** One admitted call on one held instance: run it at most once, then close it. */
    final class Call implements AutoCloseable {
        private final LoadedModel model;
        private final ExecutionSlot slot;
        private final ModelAdmission.Admission admitted;
        private boolean ran;
        private int rows;
        private InferenceSpans.BatchJoined joined;

        private Call(LoadedModel model, ExecutionSlot slot, ModelAdmission.Admission admitted) {
            this.model = model;
            this.slot = slot;
            this.admitted = admitted;
        }

        /**
         * The forward call; it gives the instance back, and reports its outcome itself.
         *
         * @param rows rows joined into this call, 0 when the model does not batch
         * @param members the requests sharing it (their queue spans are linked); empty alone
         */
        List<ExecutionOutput> run(List<ExecutionInput> inputs, OutputBuffers outputs, int rows,
                List<DynamicBatcher.Member> members) {
            ran = true;
            this.rows = rows;
            try (InferenceSpans.Phase span = spans.forward(model.name(), model.version(), slot,
                    Math.max(1, members.size()), rows, links(members))) {
                if (!members.isEmpty() && span.context() != null) {
                    joined = new InferenceSpans.BatchJoined(span.context(), members.size(), rows);
                }
                try {
                    return execute(inputs, outputs);
                } catch (RuntimeException e) {
                    span.failed(e);
                    throw e;
                }
            }
        }

        private List<ExecutionOutput> execute(List<ExecutionInput> inputs, OutputBuffers outputs) {
            OptionalInt device = slot.selection().onDevice();
            long executing = System.nanoTime();
            try (slot) {
                List<ExecutionOutput> outs = slot.instance().execute(inputs, slot.selection(), outputs);
                admitted.succeeded(System.nanoTime() - executing);
                CompletionWaits.Ended waited = slot.instance().lastAdaptiveWait();
                if (waited != CompletionWaits.Ended.NONE) {
                    observer.completionWait(model.name(), model.version(), waited);
                }
                return outs;
            } catch (RuntimeException e) {
                if (InferenceException.of(e, model.name(), model.shapesAreTheCallers())
                        instanceof InferenceFailedException failed) {
                    admitted.failed(System.nanoTime() - executing, failed);
                    faults.onRuntimeFailure(device, e);
                } else {
                    admitted.ignored();
                }
                throw e;
            }
        }

        /** Whether the forward call ran (its outcome is reported, whatever it was). */
        boolean ran() {
            return ran;
        }

        /** The batch's forward span, which its members' queue spans name; null alone or untraced. */
        InferenceSpans.BatchJoined joined() {
            return joined;
        }

        /** The call ran, and where its time went, in Triton's terms: one observer call per forward call. */
        void times(long inputNanos, long inferNanos, long outputNanos) {
            observer.executed(model.name(), model.version(), rows, inputNanos, inferNanos, outputNanos);
        }

        /** Gives the instance back; a call that never ran says nothing about the model ("ignored"). */
        @Override
        public void close() {
            try {
                slot.close();  // may throw: giving a stream back synchronizes it
            } finally {
                if (!ran) {
                    admitted.ignored();
                }
                admitted.close();
            }
        }
    }

    /** The batched requests' queue spans, which the batch's forward span links to (none untraced). */
    private static List<Object> links(List<DynamicBatcher.Member> members) {
        if (members.isEmpty() || members.get(0).queue.context() == null) {
            return List.of();
        }
        List<Object> links = new ArrayList<>(members.size());
        for (DynamicBatcher.Member m : members) {
            if (m.queue.context() != null) {
                links.add(m.queue.context());
            }
        }
        return links;
    }
}
