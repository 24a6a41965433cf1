package io.etserve.execution;

import io.etserve.inference.Caller;
import io.etserve.inference.InferenceRequest;
import io.etserve.inference.InferenceResponse;
import io.etserve.inference.InvalidInputException;
import io.etserve.inference.ModelNotFoundException;
import io.etserve.inference.ModelUnavailableException;
import io.etserve.inference.OverloadedException;
import io.etserve.inference.RequestCancelledException;
import io.etserve.runtime.DirectBufferPool;
import io.etserve.runtime.ExecuTorchException;
import io.etserve.runtime.ExecutionInput;
import io.etserve.runtime.ExecutionOutput;
import io.etserve.runtime.OutputBuffers;
import io.etserve.runtime.ProgramInstance;
import java.time.Duration;
import java.util.List;
import java.util.Optional;

/**
 * Runs one request on one model version: checks it against the model's signature, then either
 * takes a free instance (bounded wait) and executes it alone, or, for a model with dynamic
 * batching, hands it to the model's {@link DynamicBatcher}, which runs one forward call for a
 * batch of requests. Either way the forward call goes through {@link Forward} and the request's
 * outcome through {@link #settleRequest}: one path for every protocol.
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
    private final InferenceSpans spans;
    private final Forward forward;

    /**
     * @param faults told of every runtime failure, so a sticky CUDA fault can take the process
     *     out of liveness (io.etserve.health.CudaFaultMonitor)
     * @param buffers where batches hold their joined tensors while they run
     * @param spans trace spans of each request's queueing and forward call ({@link InferenceSpans#OFF}: none)
     */
    public InferenceService(ModelLookup models, Duration queueTimeout, InferenceObserver observer,
            ModelAdmission admission, FaultListener faults, DirectBufferPool buffers, InferenceSpans spans) {
        this.spans = spans;
        this.models = models;
        this.queueTimeout = queueTimeout;
        this.observer = observer;
        this.admission = admission;
        this.forward = new Forward(observer, admission, faults, spans, buffers);
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
     * {@code outputs} (the caller's to give back once the response is written).
     *
     * @param caller who waits for the answer: a request whose caller goes before it runs is
     *     dropped ({@link RequestCancelledException})
     */
    public InferenceResponse infer(String modelName, String version, InferenceRequest request, OutputBuffers outputs,
            Caller caller) {
        long start = System.nanoTime();
        LoadedModel model;
        try {
            model = models.serving(modelName, version);
        } catch (ModelNotFoundException e) {
            observer.failure("unknown", "", InferenceObserver.FailureReason.OTHER, System.nanoTime() - start);
            throw e;
        } catch (ModelUnavailableException e) {
            observer.failure(modelName, e.version(), InferenceObserver.FailureReason.OTHER, System.nanoTime() - start);
            throw e;
        }
        while (!model.tryUse()) {
            // Retired after what replaces it was installed: that one, if any, takes the request.
            LoadedModel successor = successor(modelName, version, model);
            if (successor == null) {
                observer.failure(model.name(), model.version(), InferenceObserver.FailureReason.OTHER,
                        System.nanoTime() - start);
                throw new ModelUnavailableException("model '" + model.name() + "' version " + model.version()
                        + " is being unloaded", Duration.ofSeconds(1));
            }
            model = successor;
        }
        spans.resolved(model.name(), model.version());
        observer.pending(model.name(), model.version(), 1);
        try {
            return run(model, request, outputs, caller, start);
        } finally {
            observer.pending(model.name(), model.version(), -1);
            model.release();
        }
    }

    private InferenceResponse run(LoadedModel model, InferenceRequest request, OutputBuffers outputs, Caller caller,
            long start) {
        Cancellation cancellation = null;
        try {
            cancellation = Cancellation.of(caller, request.parameters(), start);
            List<ExecutionInput> inputs = TensorContract.bindInputs(model, request);
            TensorContract.OutputSelection selected = TensorContract.selectOutputs(model, request);
            Optional<DynamicBatcher> batcher = model.batcher();
            long bound = System.nanoTime();
            Executed done = batcher.isPresent()
                    ? joinBatch(model, batcher.get(), inputs, outputs, cancellation)
                    : runAlone(model, inputs, outputs, cancellation);
            if (cancellation.hasLeft()) {
                // It ran, but nobody waits for it any more.
                throw cancellation.dropped(RequestCancelledException.Stage.EXECUTION, model.name());
            }
            long named = System.nanoTime();
            InferenceResponse response = new InferenceResponse(model.name(), model.version(), request.id(),
                    TensorContract.nameOutputs(model, done.outputs(), selected.names()), selected.binary());
            observer.success(model.name(), model.version(), done.rows(), done.queueNanos(),
                    (bound - start) + done.inputNanos(), done.inferNanos(),
                    done.outputNanos() + (System.nanoTime() - named));
            return response;
        } catch (RuntimeException e) {
            throw settleRequest(model, start, e);
        } finally {
            if (cancellation != null) {
                cancellation.close();
            }
        }
    }

    /** A call's outputs and where its time went (Triton's queue / input / infer / output). */
    private record Executed(List<ExecutionOutput> outputs, long rows, long queueNanos, long inputNanos,
            long inferNanos, long outputNanos) {}

    /**
     * The request as its own forward call: a free instance, admission, execute. The wait is in
     * the instance line, which a request whose caller goes leaves at once; admission after it
     * finds the bulkhead's permit free (it counts the instances) or the breaker's refusal.
     */
    private Executed runAlone(LoadedModel model, List<ExecutionInput> inputs, OutputBuffers outputs,
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
            call.times(1, 0, inferNanos, 0);
            return new Executed(outs, 1, executing - queued, 0, inferNanos, 0);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new ModelUnavailableException("interrupted while waiting for an instance");
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

    /** The request joins its model's batcher, which runs it in a batch and hands it its share. */
    private Executed joinBatch(LoadedModel model, DynamicBatcher batcher, List<ExecutionInput> inputs,
            OutputBuffers outputs, Cancellation cancellation) {
        int rows = TensorContract.batchRows(inputs);
        DynamicBatcher.Member me = new DynamicBatcher.Member(inputs, rows, outputs, batcher.policy().maxQueueDelay(),
                queueTimeout, cancellation, spans.queue(model.name(), model.version()), forward::notRun);
        DynamicBatcher.Share share = batcher.run(me, model, forward);
        return new Executed(share.outputs(), rows, share.queueNanos(), share.inputNanos(), share.inferNanos(),
                share.outputNanos());
    }

    /**
     * What a failed call was, decided once: it drives the metrics, the breaker, the fault
     * listener and the exception the caller (and so the HTTP status) sees.
     */
    enum Outcome {
        /** The request does not fit the method: 400, says nothing about the model's health. */
        BAD_INPUT(InferenceObserver.FailureReason.OTHER),
        /** No capacity within the wait (bulkhead or instances): 503, retry. */
        REJECTED(InferenceObserver.FailureReason.REJECTED),
        /** The model cannot take calls (breaker open, unloading): 503. */
        UNAVAILABLE(InferenceObserver.FailureReason.OTHER),
        /** The runtime or the device failed: 500, counts against the breaker, may be a CUDA fault. */
        BACKEND_FAILURE(InferenceObserver.FailureReason.BACKEND),
        /** Nobody waits for it (its caller went, its deadline passed): says nothing about the model. */
        CANCELLED(InferenceObserver.FailureReason.CANCELED);

        final InferenceObserver.FailureReason reason;

        Outcome(InferenceObserver.FailureReason reason) {
            this.reason = reason;
        }

        static Outcome of(Throwable t) {
            if (t instanceof InvalidInputException || (t instanceof ExecuTorchException e && e.isInvalidInput())) {
                return BAD_INPUT;
            }
            if (t instanceof RequestCancelledException c) {
                // Triton counts a request whose timeout expired in the queue as rejected.
                return c.reason() == RequestCancelledException.Reason.TIMEOUT ? REJECTED : CANCELLED;
            }
            if (t instanceof OverloadedException || t instanceof InterruptedException) {
                return REJECTED;
            }
            if (t instanceof ModelUnavailableException || t instanceof ProgramInstance.InstanceClosedException) {
                return UNAVAILABLE;
            }
            return BACKEND_FAILURE;
        }
    }

    /**
     * Records a failed request's one outcome (the forward call's, if it ran, was reported by
     * {@link Forward}) and returns what to throw.
     */
    private RuntimeException settleRequest(LoadedModel model, long start, RuntimeException e) {
        Outcome outcome = Outcome.of(e);
        if (e instanceof RequestCancelledException c) {
            observer.cancelled(model.name(), model.version(), c.stage(), c.reason());
        }
        observer.failure(model.name(), model.version(), outcome.reason, System.nanoTime() - start);
        if (outcome == Outcome.BAD_INPUT && e instanceof ExecuTorchException x) {
            return new InvalidInputException("model '" + model.name() + "' rejected the input: " + x.getMessage());
        }
        if (e instanceof ProgramInstance.InstanceClosedException) {
            return new ModelUnavailableException("model '" + model.name() + "' is unloading", Duration.ofSeconds(1));
        }
        return e;
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
