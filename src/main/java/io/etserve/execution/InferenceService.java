package io.etserve.execution;

import io.etserve.inference.Caller;
import io.etserve.inference.InferenceException;
import io.etserve.inference.InferenceRequest;
import io.etserve.inference.InferenceResponse;
import io.etserve.inference.ModelNotFoundException;
import io.etserve.inference.ModelUnavailableException;
import io.etserve.inference.OutputDelivery;
import io.etserve.inference.RequestCancelledException;
import io.etserve.inference.ReservedParameters;
import io.etserve.inference.WouldWaitException;
import io.etserve.runtime.DirectBufferPool;
import io.etserve.runtime.ExecutionInput;
import io.etserve.runtime.ExecutionOutput;
import io.etserve.runtime.OutputBuffers;
import java.time.Duration;
import java.util.List;
import java.util.Optional;

/**
 * Runs one request on one model version: checks it against the model's signature, then either
 * takes a free instance (bounded wait) and executes it alone, or, for a model with dynamic
 * batching, hands it to the model's {@link DynamicBatcher}, which runs one forward call for a
 * batch of requests. Either way the forward call goes through {@link Forward}, which tells the
 * breaker and the fault listener its outcome, and the request ends in {@link #infer}'s one
 * recorded outcome: a success, or one {@link InferenceException} whose kind the protocols, the
 * metrics and the breaker all read.
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
    private final UnbatchedCalls unbatched;
    private final OutputDelivery delivery;

    /** As the full constructor, every output in the answer ({@link OutputDelivery#NONE}). */
    public InferenceService(ModelLookup models, Duration queueTimeout, InferenceObserver observer,
            ModelAdmission admission, FaultListener faults, DirectBufferPool buffers, InferenceSpans spans) {
        this(models, queueTimeout, observer, admission, faults, buffers, spans, OutputDelivery.NONE);
    }

    /**
     * @param faults told of every runtime failure, so a sticky CUDA fault can take the process
     *     out of liveness (io.etserve.health.CudaFaultMonitor)
     * @param buffers where batches hold their joined tensors while they run
     * @param spans trace spans of each request's queueing and forward call ({@link InferenceSpans#OFF}: none)
     * @param delivery writes the outputs a request asks for in shared memory, as the call's last
     *     step: its time is the call's output time, its refusal the call's outcome
     */
    public InferenceService(ModelLookup models, Duration queueTimeout, InferenceObserver observer,
            ModelAdmission admission, FaultListener faults, DirectBufferPool buffers, InferenceSpans spans,
            OutputDelivery delivery) {
        this.delivery = delivery;
        this.spans = spans;
        this.models = models;
        this.queueTimeout = queueTimeout;
        this.observer = observer;
        this.admission = admission;
        this.forward = new Forward(observer, admission, faults, spans, buffers);
        this.unbatched = new UnbatchedCalls(queueTimeout, spans, forward);
    }

    /** Where the protocols record the span of encoding an answer, beside this service's spans. */
    public InferenceSpans spans() {
        return spans;
    }

    /** Why this loaded model cannot take a call now (its instances unavailable, breaker open). */
    public Optional<String> whyNotServing(LoadedModel model) {
        return model.instances().unavailableReason().or(() -> admission.whyNotAdmitting(model));
    }

    /**
     * Whether a call to this model would start at once and end soon: it has no batcher, static
     * input shapes (a dynamic one may make one call far longer than the last), an idle CPU
     * instance ({@link InstancePool#idleNow}) and its forward calls take under {@code within}
     * lately. A transport may then run the call on its I/O thread instead of handing it to a
     * worker (two thread switches, more than such a call's forward). A model that cannot serve
     * says true: its answer is an immediate error.
     */
    public boolean runsAtOnce(String modelName, String version, Duration within) {
        LoadedModel model = servingOrNull(modelName, version);
        return model == null || endsSoon(model, within) && model.instances().idleNow();
    }

    /**
     * Whether a call to this model ends soon once it starts, wherever it runs (CPU or GPU): it
     * has no batcher, static input shapes and its forward calls take under {@code within} lately.
     * Unlike {@link #runsAtOnce} it does not ask whether an instance is free: a transport that
     * runs the call on an I/O thread no other connection uses asks for one with
     * {@link Caller#AT_ONCE} and hands the call on when none is. A model that cannot serve says
     * true, as there.
     */
    public boolean endsSoon(String modelName, String version, Duration within) {
        LoadedModel model = servingOrNull(modelName, version);
        return model == null || endsSoon(model, within);
    }

    private static boolean endsSoon(LoadedModel model, Duration within) {
        return model.batcher().isEmpty() && model.hasStaticInputs() && model.typicalForwardNanos() < within.toNanos();
    }

    /** The version that serves, or null when none can (the call's answer is then an error). */
    private LoadedModel servingOrNull(String modelName, String version) {
        try {
            return models.serving(modelName, version);
        } catch (InferenceException e) {
            return null;
        }
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

    /** As {@link #infer(String, String, InferenceRequest, OutputBuffers, Caller, long)}, arrived now. */
    public InferenceResponse infer(String modelName, String version, InferenceRequest request, OutputBuffers outputs,
            Caller caller) {
        return infer(modelName, version, request, outputs, caller, System.nanoTime());
    }

    /**
     * Runs {@code request}; its outputs are copied once, out of the Module, into buffers from
     * {@code outputs} (the caller's to give back once the response is written), and those it asks
     * for in shared memory written there ({@link OutputDelivery}). Every call ends
     * in one outcome, recorded once in its {@code finally}: a success with its times, or one
     * {@link InferenceException}, which is what the caller sees.
     *
     * @param caller who waits for the answer: a request whose caller goes before it runs is
     *     dropped ({@link RequestCancelledException})
     * @param arrivedNanos when the transport received the request ({@code System.nanoTime()}):
     *     its {@code timeout} counts from there, and a second attempt (after
     *     {@link WouldWaitException}) counts the time since as waiting
     * @throws InferenceException whatever failed, as its kind
     */
    public InferenceResponse infer(String modelName, String version, InferenceRequest request, OutputBuffers outputs,
            Caller caller, long arrivedNanos) {
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
            ReservedParameters.check(request.parameters());
            cancellation = Cancellation.of(caller, request.parameters(), arrivedNanos);
            List<ExecutionInput> inputs = TensorContract.bindInputs(model, request);
            TensorContract.OutputSelection selected = TensorContract.selectOutputs(model, request);
            Optional<DynamicBatcher> batcher = model.batcher();
            if (batcher.isPresent() && !cancellation.mayWait()) {
                throw new WouldWaitException(model.name());  // a batch always waits (reloaded since asked)
            }
            bound = System.nanoTime();
            done = batcher.isPresent()
                    ? joinBatch(model, batcher.get(), inputs, outputs, cancellation)
                    : unbatched.run(model, inputs, outputs, cancellation);
            if (cancellation.hasLeft()) {
                // It ran, but nobody waits for it any more.
                throw cancellation.dropped(RequestCancelledException.Stage.EXECUTION, model.name());
            }
            named = System.nanoTime();
            response = delivery.deliver(request, new InferenceResponse(model.name(), model.version(), request.id(),
                    TensorContract.nameOutputs(model, done.outputs(), selected.names()), selected.binary()));
            return response;
        } catch (WouldWaitException e) {
            throw e;  // not an outcome: the request runs again on a thread that may wait
        } catch (RuntimeException e) {
            failure = model == null ? InferenceException.of(e) : InferenceException.of(e, model.name(),
                    model.shapesAreTheCallers());
            throw failure;
        } finally {
            if (cancellation != null) {
                cancellation.close();
            }
            if (done != null && model.batcher().isEmpty()) {
                // Its forward call's times (Triton's batch statistics) with this request's own
                // input and output work, which only this method sees; counted if it ran, answered or not.
                observer.executed(model.name(), model.version(), 0, bound - start, done.inferNanos(),
                        response != null ? System.nanoTime() - named : 0);
            }
            if (model != null) {
                observer.pending(model.name(), model.version(), -1);
            }
            if (failure != null) {
                recordFailure(modelName, model, failure, System.nanoTime() - arrivedNanos);
            } else if (response != null) {
                observer.success(model.name(), model.version(), done.rows(), (start - arrivedNanos) + done.queueNanos(),
                        (bound - start) + done.inputNanos(), done.inferNanos(),
                        done.outputNanos() + (System.nanoTime() - named));
            }
            if (model != null) {
                // Last: a version being unloaded removes its series once its last use is given
                // back, and a series written after that would come back for good.
                model.release();
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
    record Executed(List<ExecutionOutput> outputs, long rows, long queueNanos, long inputNanos,
            long inferNanos, long outputNanos) {}

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
}
