package io.etserve.inference;

import io.etserve.runtime.ExecuTorchException;
import io.etserve.runtime.ExecutionInput;
import io.etserve.runtime.ExecutionOutput;
import io.etserve.runtime.OutputBuffers;
import io.etserve.runtime.ProgramInstance;
import io.etserve.runtime.StreamSelection;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.OptionalInt;

/**
 * Runs one request on one model version: checks it against the model's signature, takes a
 * free instance (bounded wait), executes, and names the outputs.
 */
public final class InferenceService {

    private final ModelRegistry registry;
    private final Duration queueTimeout;
    private final InferenceObserver observer;
    private final ModelAdmission admission;
    private final FaultListener faults;

    /**
     * @param faults told of every runtime failure, so a sticky CUDA fault can take the process
     *     out of liveness (io.etserve.health.CudaFaultMonitor)
     */
    public InferenceService(ModelRegistry registry, Duration queueTimeout, InferenceObserver observer,
            ModelAdmission admission, FaultListener faults) {
        this.registry = registry;
        this.queueTimeout = queueTimeout;
        this.observer = observer;
        this.admission = admission;
        this.faults = faults;
    }

    /** Why this model version cannot take a call now (not loaded, unavailable, breaker open). */
    public java.util.Optional<String> whyNotServing(ModelVersionState state) {
        if (!state.ready()) {
            return java.util.Optional.of(state.reason());
        }
        return state.model().instances().unavailableReason().or(() -> admission.whyNotAdmitting(state.model()));
    }

    /** As {@link #infer(String, String, InferenceRequest, OutputBuffers)}, outputs in fresh buffers. */
    public InferenceResponse infer(String modelName, String version, InferenceRequest request) {
        return infer(modelName, version, request, OutputBuffers.ALLOCATE);
    }

    /**
     * Runs {@code request}; its outputs are copied once, out of the Module, into buffers from
     * {@code outputs} (the caller's to give back once the response is written).
     */
    public InferenceResponse infer(String modelName, String version, InferenceRequest request, OutputBuffers outputs) {
        long start = System.nanoTime();
        ModelVersionState state;
        try {
            state = registry.resolve(modelName, version);
        } catch (ModelNotFoundException e) {
            observer.failure("unknown", "", InferenceObserver.FailureReason.OTHER, System.nanoTime() - start);
            throw e;
        }
        if (!state.ready()) {
            observer.failure(state.name(), state.version(), InferenceObserver.FailureReason.OTHER,
                    System.nanoTime() - start);
            throw new ModelUnavailableException("model '" + state.name() + "' version " + state.version()
                    + " is not ready: " + state.reason());
        }
        LoadedModel model = state.model();
        observer.pending(model.name(), model.version(), 1);
        try {
            return run(model, request, outputs, start);
        } finally {
            observer.pending(model.name(), model.version(), -1);
        }
    }

    private InferenceResponse run(LoadedModel model, InferenceRequest request, OutputBuffers outputs, long start) {
        ModelAdmission.Admission admitted = null;
        OptionalInt device = OptionalInt.empty();
        long executing = 0;
        try {
            List<ExecutionInput> inputs = TensorContract.bindInputs(model, request);
            TensorContract.OutputSelection selected = TensorContract.selectOutputs(model, request);
            long queued = System.nanoTime();
            admitted = admission.admit(model);
            executing = System.nanoTime();
            try (ExecutionSlot slot = acquire(model)) {
                executing = System.nanoTime();
                if (slot.selection().mode() != StreamSelection.Mode.NONE) {
                    device = OptionalInt.of(slot.selection().device());
                }
                List<ExecutionOutput> outs = slot.instance().execute(inputs, slot.selection(), outputs);
                long executed = System.nanoTime();
                admitted.succeeded(executed - executing);
                InferenceResponse response = new InferenceResponse(model.name(), model.version(), request.id(),
                        TensorContract.nameOutputs(model, outs, selected.names()), selected.binary());
                observer.success(model.name(), model.version(), executing - queued, queued - start,
                        executed - executing, System.nanoTime() - executed);
                return response;
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw settle(model, admitted, device, executing, start, e);
        } catch (RuntimeException e) {
            throw settle(model, admitted, device, executing, start, e);
        } finally {
            if (admitted != null) {
                admitted.close();
            }
        }
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
        BACKEND_FAILURE(InferenceObserver.FailureReason.BACKEND);

        final InferenceObserver.FailureReason reason;

        Outcome(InferenceObserver.FailureReason reason) {
            this.reason = reason;
        }

        static Outcome of(Throwable t) {
            if (t instanceof InvalidInputException || (t instanceof ExecuTorchException e && e.isInvalidInput())) {
                return BAD_INPUT;
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

    /** Records a failed call's one outcome and returns what to throw. */
    private RuntimeException settle(LoadedModel model, ModelAdmission.Admission admitted, OptionalInt device,
            long executing, long start, Exception e) {
        Outcome outcome = Outcome.of(e);
        if (admitted != null) {
            if (outcome == Outcome.BACKEND_FAILURE) {
                admitted.failed(System.nanoTime() - executing, e);
            } else {
                admitted.ignored();
            }
        }
        if (outcome == Outcome.BACKEND_FAILURE) {
            // Includes a stream that could not be synchronized on release (a CUDA fault).
            faults.onRuntimeFailure(device, e);
        }
        observer.failure(model.name(), model.version(), outcome.reason, System.nanoTime() - start);
        if (outcome == Outcome.BAD_INPUT && e instanceof ExecuTorchException x) {
            return new InvalidInputException("model '" + model.name() + "' rejected the input: " + x.getMessage());
        }
        if (e instanceof ProgramInstance.InstanceClosedException) {
            return new ModelUnavailableException("model '" + model.name() + "' is unloading", java.time.Duration.ofSeconds(1));
        }
        if (e instanceof InterruptedException) {
            return new ModelUnavailableException("interrupted while waiting for an instance");
        }
        return e instanceof RuntimeException r ? r : new IllegalStateException(e);
    }

    private ExecutionSlot acquire(LoadedModel model) throws InterruptedException {
        try {
            return model.instances().acquire(queueTimeout);
        } catch (OverloadedException e) {
            throw new OverloadedException("model '" + model.name() + "' is at capacity: " + e.getMessage(),
                    e.retryAfter());
        }
    }
}
