package io.etserve.execution;

import io.etserve.inference.Caller;
import io.etserve.inference.InferenceException;
import io.etserve.inference.InferenceFailedException;
import io.etserve.inference.InferenceRequest;
import io.etserve.inference.InferenceResponse;
import io.etserve.inference.ModelNotFoundException;
import io.etserve.inference.ModelUnavailableException;
import io.etserve.inference.OverloadedException;
import io.etserve.inference.RequestCancelledException;
import io.etserve.runtime.CompletionWaits;
import io.etserve.runtime.DirectBufferPool;
import io.etserve.runtime.ExecutionInput;
import io.etserve.runtime.ExecutionOutput;
import io.etserve.runtime.OutputBuffers;
import io.etserve.runtime.StreamSelection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.OptionalInt;

/**
 * Runs one request on one model version: checks it against the model's signature, then either
 * takes a free instance (bounded wait) and executes it alone, or, for a model with dynamic
 * batching, joins a batch that one forward call runs for all its requests. Either way the
 * forward call goes through {@link #forward}, which tells the breaker and the fault listener its
 * outcome, and the request ends in {@link #infer}'s one recorded outcome: a success, or one
 * {@link InferenceException} whose kind the protocols, the metrics and the breaker all read.
 *
 * <p>A request nobody waits for any more is dropped before it runs ({@link Cancellation}): its
 * {@link Caller} went (an HTTP client that closed its connection, a cancelled gRPC call) while it
 * waited for an instance or a batch, or its deadline passed (the protocol's {@code timeout}
 * parameter, a gRPC deadline). One whose caller goes during its forward call has its outputs
 * discarded. Each is counted once, by where it was ({@link RequestCancelledException.Stage}).
 */
public final class InferenceService {

    private final ModelLookup models;
    private final Duration queueTimeout;
    private final InferenceObserver observer;
    private final ModelAdmission admission;
    private final FaultListener faults;
    private final DirectBufferPool buffers;
    private final InferenceSpans spans;

    /** As the full constructor, untraced. */
    public InferenceService(ModelLookup models, Duration queueTimeout, InferenceObserver observer,
            ModelAdmission admission, FaultListener faults, DirectBufferPool buffers) {
        this(models, queueTimeout, observer, admission, faults, buffers, InferenceSpans.OFF);
    }

    /**
     * @param faults told of every runtime failure, so a sticky CUDA fault can take the process
     *     out of liveness (io.etserve.health.CudaFaultMonitor)
     * @param spans trace spans of each request's queueing and forward call ({@link InferenceSpans#OFF}: none)
     */
    public InferenceService(ModelLookup models, Duration queueTimeout, InferenceObserver observer,
            ModelAdmission admission, FaultListener faults, DirectBufferPool buffers, InferenceSpans spans) {
        this.spans = spans;
        this.models = models;
        this.queueTimeout = queueTimeout;
        this.observer = observer;
        this.admission = admission;
        this.faults = faults;
        this.buffers = buffers;
    }

    /** Where the protocols record the span of encoding an answer, beside this service's spans. */
    public InferenceSpans spans() {
        return spans;
    }

    /** Why this loaded model cannot take a call now (its instances unavailable, breaker open). */
    public Optional<String> whyNotServing(LoadedModel model) {
        return model.instances().unavailableReason().or(() -> admission.whyNotAdmitting(model));
    }

    /** What now answers where {@code retiring} did, or null when nothing else does (unloaded). */
    private LoadedModel successor(String modelName, String version, LoadedModel retiring) {
        try {
            LoadedModel now = models.serving(modelName, version);
            return now != retiring ? now : null;
        } catch (ModelNotFoundException | ModelUnavailableException e) {
            return null;
        }
    }

    /** As {@link #infer(String, String, InferenceRequest, OutputBuffers, Caller)}, outputs in fresh buffers. */
    public InferenceResponse infer(String modelName, String version, InferenceRequest request) {
        return infer(modelName, version, request, OutputBuffers.ALLOCATE, Caller.STAYS);
    }

    /** As {@link #infer(String, String, InferenceRequest, OutputBuffers, Caller)}, for a caller that stays. */
    public InferenceResponse infer(String modelName, String version, InferenceRequest request, OutputBuffers outputs) {
        return infer(modelName, version, request, outputs, Caller.STAYS);
    }

    /**
     * Runs {@code request}; its outputs are copied once, out of the Module, into buffers from
     * {@code outputs} (the caller's to give back once the response is written). Every call ends
     * in one outcome, recorded once in its {@code finally}: a success with its times, or one
     * {@link InferenceException}, which is what the caller sees.
     *
     * @param caller who waits for the answer: a request whose caller goes before it runs is
     *     dropped ({@link RequestCancelledException})
     * @throws InferenceException whatever failed, as its kind
     */
    public InferenceResponse infer(String modelName, String version, InferenceRequest request, OutputBuffers outputs,
            Caller caller) {
        long start = System.nanoTime();
        LoadedModel model = null;
        Cancellation cancellation = null;
        long bound = 0;
        long named = 0;
        Executed done = null;
        InferenceResponse response = null;
        InferenceException failure = null;
        try {
            model = use(modelName, version);
            spans.resolved(model.name(), model.version());
            observer.pending(model.name(), model.version(), 1);
            cancellation = Cancellation.of(caller, request.parameters(), start);
            List<ExecutionInput> inputs = TensorContract.bindInputs(model, request);
            TensorContract.OutputSelection selected = TensorContract.selectOutputs(model, request);
            Optional<DynamicBatcher> batcher = model.batcher();
            bound = System.nanoTime();
            done = batcher.isPresent()
                    ? joinBatch(model, batcher.get(), inputs, outputs, cancellation)
                    : runAlone(model, inputs, outputs, cancellation);
            if (cancellation.hasLeft()) {
                // It ran, but nobody waits for it any more.
                throw cancellation.dropped(RequestCancelledException.Stage.EXECUTION, model.name());
            }
            named = System.nanoTime();
            response = new InferenceResponse(model.name(), model.version(), request.id(),
                    TensorContract.nameOutputs(model, done.outputs(), selected.names()), selected.binary());
            return response;
        } catch (RuntimeException e) {
            failure = InferenceException.of(e, model == null ? null : model.name());
            throw failure;
        } finally {
            if (cancellation != null) {
                cancellation.close();
            }
            if (model != null) {
                observer.pending(model.name(), model.version(), -1);
                model.release();
            }
            if (failure != null) {
                recordFailure(modelName, model, failure, System.nanoTime() - start);
            } else if (response != null) {
                observer.success(model.name(), model.version(), done.rows(), done.queueNanos(),
                        (bound - start) + done.inputNanos(), done.inferNanos(),
                        done.outputNanos() + (System.nanoTime() - named));
            }
        }
    }

    /**
     * The model that serves the request, in use until released. One retired after what replaces
     * it was installed hands the request to that one, if any.
     */
    private LoadedModel use(String modelName, String version) {
        LoadedModel model = models.serving(modelName, version);
        while (!model.tryUse()) {
            LoadedModel successor = successor(modelName, version, model);
            if (successor == null) {
                throw new ModelUnavailableException("model '" + model.name() + "' version " + model.version()
                        + " is being unloaded", Duration.ofSeconds(1), model.version());
            }
            model = successor;
        }
        return model;
    }

    /**
     * A failed request in the metrics: under the version it ran on; one that never reached a
     * model under the version it asked for (unknown models all under "unknown").
     */
    private void recordFailure(String modelName, LoadedModel model, InferenceException failure, long nanos) {
        String name = model != null ? model.name() : failure instanceof ModelNotFoundException ? "unknown" : modelName;
        String version = model != null ? model.version()
                : failure instanceof ModelUnavailableException u ? u.version() : "";
        if (failure instanceof RequestCancelledException c) {
            observer.cancelled(name, version, c.stage(), c.reason());
        }
        observer.failure(name, version, InferenceObserver.FailureReason.of(failure.kind()), nanos);
    }

    /** A call's outputs and where its time went (Triton's queue / input / infer / output). */
    private record Executed(List<ExecutionOutput> outputs, long rows, long queueNanos, long inputNanos,
            long inferNanos, long outputNanos) {}

    /**
     * The request as its own forward call: a free instance, admission, execute. The wait is in
     * the instance line, which a request whose caller goes leaves at once; admission after it
     * finds the bulkhead's permit free (it counts the instances) or the breaker's refusal.
     * {@link #forward} reports the call's outcome to the breaker and the fault listener; a
     * failure before it, {@link #notRun}.
     */
    private Executed runAlone(LoadedModel model, List<ExecutionInput> inputs, OutputBuffers outputs,
            Cancellation cancellation) {
        long queued = System.nanoTime();
        ExecutionSlot slot = null;
        ModelAdmission.Admission admitted;
        try {
            try (InferenceSpans.Phase queue = spans.queue(model.name(), model.version())) {
                slot = acquireTraced(model, cancellation, queue);
            }
            admitted = admission.admit(model);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new ModelUnavailableException("interrupted while waiting for an instance");
        } catch (RuntimeException e) {
            if (slot != null) {
                slot.close();
            }
            notRun(e);
            throw e;
        }
        try (admitted) {
            long executing = System.nanoTime();
            List<ExecutionOutput> outs = forward(model, admitted, slot, inputs, outputs, 0, null);
            long inferNanos = System.nanoTime() - executing;
            observer.executed(model.name(), model.version(), 0, 0, inferNanos, 0);
            return new Executed(outs, 1, executing - queued, 0, inferNanos, 0);
        }
    }

    /**
     * A call that failed before its forward call (no instance, a stream that could not be leased
     * on a faulted device) reaches the fault listener as a runtime failure would, once.
     */
    private void notRun(RuntimeException e) {
        if (InferenceException.of(e) instanceof InferenceFailedException) {
            faults.onRuntimeFailure(OptionalInt.empty(), e);
        }
    }

    /**
     * The request joins its model's batcher and waits; if it is the oldest of the batch it is
     * given, its thread runs the batch for all of its members.
     */
    private Executed joinBatch(LoadedModel model, DynamicBatcher batcher, List<ExecutionInput> inputs,
            OutputBuffers outputs, Cancellation cancellation) {
        int rows = TensorContract.batchRows(inputs);
        DynamicBatcher.Member me = new DynamicBatcher.Member(inputs, rows, outputs, batcher.policy().maxQueueDelay(),
                queueTimeout, cancellation, this::notRun);
        InferenceSpans.Phase queue = spans.queue(model.name(), model.version());
        me.traceContext = queue.context();
        Object given;
        try {
            batcher.submit(me);
            given = me.await();
        } catch (RuntimeException e) {
            queue.failed(e);
            queue.close();
            throw e;
        }
        DynamicBatcher.Share share;
        if (given instanceof DynamicBatcher.Batch batch) {
            // Leading: its queue span ends as the batch is cut; the forward span follows it.
            queue.endAt(batch.startedNanos());
            share = runBatch(model, batch);
        } else {
            share = (DynamicBatcher.Share) given;
            queue.joined(me.joined);
            queue.endAt(me.enqueuedNanos + share.queueNanos());
        }
        return new Executed(share.outputs(), rows, share.queueNanos(), share.inputNanos(), share.inferNanos(),
                share.outputNanos());
    }

    /**
     * Runs a batch on the instance the batcher found for it, gives every other member its share
     * (or the batch's error) and returns the leader's own. A batch of one runs on its request's
     * own buffers, exactly as alone. Members whose callers went since the batch was cut are
     * dropped before it runs; the leader runs it for the others even when its own caller went.
     */
    private DynamicBatcher.Share runBatch(LoadedModel model, DynamicBatcher.Batch batch) {
        DynamicBatcher.Member leader = batch.members().get(0);
        List<DynamicBatcher.Member> members = new ArrayList<>(batch.members().size());
        int rows = 0;
        for (DynamicBatcher.Member m : batch.members()) {
            if (!m.cancellation.hasLeft()) {
                members.add(m);
                rows += m.rows;
            } else if (m != leader) {
                m.fail(m.cancellation.dropped(RequestCancelledException.Stage.BATCH, model.name()));
            }
        }
        ModelAdmission.Admission admitted = null;
        boolean reported = false;
        try (BatchTensors tensors = new BatchTensors(buffers)) {
            if (members.isEmpty()) {
                throw leader.cancellation.dropped(RequestCancelledException.Stage.BATCH, model.name());
            }
            // The bulkhead admits at once (the batcher holds one of the instances it counts);
            // the breaker may still refuse the whole batch.
            admitted = admission.admit(model);
            long joining = System.nanoTime();
            boolean alone = members.size() == 1;
            List<ExecutionInput> inputs = alone ? members.get(0).inputs : tensors.concatenate(members, rows);
            long executing = System.nanoTime();
            reported = true;
            List<ExecutionOutput> outs = forward(model, admitted, batch.slot(), inputs,
                    alone ? members.get(0).outputs : tensors, rows, members);
            long executed = System.nanoTime();
            List<List<ExecutionOutput>> shares = new ArrayList<>(members.size());
            int row = 0;
            for (DynamicBatcher.Member m : members) {
                shares.add(alone ? outs : BatchTensors.share(outs, rows, row, m.rows, m.outputs));
                row += m.rows;
            }
            long cut = System.nanoTime();
            observer.executed(model.name(), model.version(), rows, executing - joining, executed - executing,
                    cut - executed);
            DynamicBatcher.Share mine = null;
            for (int i = 0; i < members.size(); i++) {
                DynamicBatcher.Member m = members.get(i);
                DynamicBatcher.Share share = new DynamicBatcher.Share(shares.get(i), rows,
                        batch.startedNanos() - m.enqueuedNanos, executing - joining, executed - executing,
                        cut - executed);
                if (m == leader) {
                    mine = share;
                } else {
                    m.complete(share);
                }
            }
            if (mine == null) {
                // The leader's caller went before the batch ran: its rows were left out.
                throw leader.cancellation.dropped(RequestCancelledException.Stage.BATCH, model.name());
            }
            return mine;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            ModelUnavailableException failure = new ModelUnavailableException("interrupted while running a batch");
            members.forEach(m -> m.fail(failure));
            throw failure;
        } catch (RuntimeException e) {
            if (!reported) {
                notRun(e);
            }
            members.forEach(m -> m.fail(e));  // those already given their share keep it
            throw e;
        } finally {
            batch.slot().close();  // idempotent: forward() gave it back unless it never ran
            release(admitted, reported);
            batch.batcher().finished(batch);
        }
    }

    /** Closes an admission; one whose call never ran (refused before it) reports "ignored" first. */
    private static void release(ModelAdmission.Admission admitted, boolean reported) {
        if (admitted != null) {
            if (!reported) {
                admitted.ignored();
            }
            admitted.close();
        }
    }

    /**
     * One forward call on a held instance, which it gives back: the breaker learns the outcome
     * once, and a runtime failure (also one found when the instance's stream is given back,
     * a CUDA fault) reaches the fault listener once, however many requests shared the call.
     *
     * @param batchRows rows joined into this call, 0 when the model does not batch
     * @param batch the requests sharing it, null when it runs one request alone
     */
    private List<ExecutionOutput> forward(LoadedModel model, ModelAdmission.Admission admitted, ExecutionSlot slot,
            List<ExecutionInput> inputs, OutputBuffers outputs, int batchRows, List<DynamicBatcher.Member> batch) {
        try (InferenceSpans.Phase span = spans.forward(model.name(), model.version(), slot,
                batch == null ? 1 : batch.size(), batchRows, batchLinks(batch))) {
            if (batch != null && span.context() != null) {
                InferenceSpans.BatchJoined joined = new InferenceSpans.BatchJoined(span.context(), batch.size(),
                        batchRows);
                batch.forEach(m -> m.joined = joined);
            }
            try {
                return forward(model, admitted, slot, inputs, outputs, batchRows);
            } catch (RuntimeException e) {
                span.failed(e);
                throw e;
            }
        }
    }

    /** The batched requests' queue spans, which the batch's forward span links to (none untraced). */
    private static List<Object> batchLinks(List<DynamicBatcher.Member> batch) {
        if (batch == null || batch.get(0).traceContext == null) {
            return List.of();
        }
        List<Object> links = new ArrayList<>(batch.size());
        for (DynamicBatcher.Member m : batch) {
            if (m.traceContext != null) {
                links.add(m.traceContext);
            }
        }
        return links;
    }

    private List<ExecutionOutput> forward(LoadedModel model, ModelAdmission.Admission admitted, ExecutionSlot slot,
            List<ExecutionInput> inputs, OutputBuffers outputs, int batchRows) {
        OptionalInt device = slot.selection().mode() != StreamSelection.Mode.NONE
                ? OptionalInt.of(slot.selection().device()) : OptionalInt.empty();
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
            if (InferenceException.of(e, model.name()) instanceof InferenceFailedException failed) {
                admitted.failed(System.nanoTime() - executing, failed);
                faults.onRuntimeFailure(device, e);
            } else {
                admitted.ignored();
            }
            throw e;
        }
    }

    /** {@link #acquire}, with a failure recorded on the queue span. */
    private ExecutionSlot acquireTraced(LoadedModel model, Cancellation cancellation, InferenceSpans.Phase queue)
            throws InterruptedException {
        try {
            return acquire(model, cancellation);
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
