package io.etserve.inference;

import io.etserve.runtime.ExecuTorchException;
import io.etserve.runtime.ExecutionInput;
import io.etserve.runtime.ExecutionOutput;
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

    public InferenceResponse infer(String modelName, String version, InferenceRequest request) {
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
            return run(model, request, start);
        } finally {
            observer.pending(model.name(), model.version(), -1);
        }
    }

    private InferenceResponse run(LoadedModel model, InferenceRequest request, long start) {
        List<ExecutionInput> inputs;
        Selection selected;
        try {
            inputs = bindInputs(model, request);
            selected = selectOutputs(model, request);
        } catch (InvalidInputException e) {
            failed(model, InferenceObserver.FailureReason.OTHER, start);
            throw e;
        }
        long queued = System.nanoTime();
        try (ModelAdmission.Admission admitted = admit(model, start)) {
            long executing = System.nanoTime();
            OptionalInt device = OptionalInt.empty();
            try (ExecutionSlot slot = acquire(model)) {
                executing = System.nanoTime();
                if (slot.selection().mode() != StreamSelection.Mode.NONE) {
                    device = OptionalInt.of(slot.selection().device());
                }
                List<ExecutionOutput> outs = slot.instance().execute(inputs, slot.selection());
                long executed = System.nanoTime();
                admitted.succeeded(executed - executing);
                InferenceResponse response = new InferenceResponse(model.name(), model.version(), request.id(),
                        nameOutputs(model, outs, selected.names()), selected.binary());
                observer.success(model.name(), model.version(), executing - queued, queued - start,
                        executed - executing, System.nanoTime() - executed);
                return response;
            } catch (ExecuTorchException e) {
                if (!e.isInvalidInput()) {
                    throw backendFailure(model, admitted, device, executing, start, e);
                }
                admitted.ignored();
                failed(model, InferenceObserver.FailureReason.OTHER, start);
                throw new InvalidInputException("model '" + model.name() + "' rejected the input: " + e.getMessage());
            } catch (OverloadedException e) {
                admitted.ignored();
                failed(model, InferenceObserver.FailureReason.REJECTED, start);
                throw e;
            } catch (ProgramInstance.InstanceClosedException e) {
                admitted.ignored();
                failed(model, InferenceObserver.FailureReason.OTHER, start);
                throw new ModelUnavailableException("model '" + model.name() + "' is unloading", java.time.Duration.ofSeconds(1));
            } catch (RuntimeException e) {
                // Includes a stream that could not be synchronized on release (a CUDA fault).
                throw backendFailure(model, admitted, device, executing, start, e);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            failed(model, InferenceObserver.FailureReason.REJECTED, start);
            throw new ModelUnavailableException("interrupted while waiting for an instance");
        }
    }

    /** A failure of the runtime or the device: it counts against the breaker and may be a CUDA fault. */
    private RuntimeException backendFailure(LoadedModel model, ModelAdmission.Admission admitted, OptionalInt device,
            long executing, long start, RuntimeException e) {
        admitted.failed(System.nanoTime() - executing, e);
        faults.onRuntimeFailure(device, e);
        failed(model, InferenceObserver.FailureReason.BACKEND, start);
        return e;
    }

    private void failed(LoadedModel model, InferenceObserver.FailureReason reason, long start) {
        observer.failure(model.name(), model.version(), reason, System.nanoTime() - start);
    }

    private ModelAdmission.Admission admit(LoadedModel model, long start) throws InterruptedException {
        try {
            return admission.admit(model);
        } catch (OverloadedException e) {
            failed(model, InferenceObserver.FailureReason.REJECTED, start);
            throw e;
        } catch (ModelUnavailableException e) {
            failed(model, InferenceObserver.FailureReason.OTHER, start);
            throw e;
        }
    }

    private ExecutionSlot acquire(LoadedModel model) throws InterruptedException {
        try {
            return model.instances().acquire(queueTimeout);
        } catch (OverloadedException e) {
            throw new OverloadedException("model '" + model.name() + "' is at capacity: " + e.getMessage(),
                    e.retryAfter());
        }
    }

    /** Orders the request's tensors as the method expects them, checking each one. */
    /**
     * A request's shape against the metadata: a static dimension must match exactly, a dynamic one
     * (-1 in the metadata) may take 1 up to the program's bound.
     */
    static void checkShape(TensorMetadata meta, long[] shape, long[] bounds) {
        long[] declared = meta.shape();
        if (shape.length != declared.length) {
            throw new InvalidInputException("input '" + meta.name() + "' must have shape " + Arrays.toString(declared)
                    + ", got " + Arrays.toString(shape));
        }
        for (int d = 0; d < shape.length; d++) {
            if (declared[d] < 0) {
                if (shape[d] < 1 || shape[d] > bounds[d]) {
                    throw new InvalidInputException("input '" + meta.name() + "' dimension " + d + " is " + shape[d]
                            + "; it may vary from 1 to its bound " + bounds[d]);
                }
            } else if (shape[d] != declared[d]) {
                throw new InvalidInputException("input '" + meta.name() + "' dimension " + d + " must be "
                        + declared[d] + " (static), got " + shape[d] + " in " + Arrays.toString(shape));
            }
        }
    }

    static List<ExecutionInput> bindInputs(LoadedModel model, InferenceRequest request) {
        List<TensorMetadata> expected = model.inputs();
        Map<String, Tensor> byName = new HashMap<>();
        for (Tensor t : request.inputs()) {
            if (byName.put(t.name(), t) != null) {
                throw new InvalidInputException("input '" + t.name() + "' appears twice");
            }
        }
        for (String name : byName.keySet()) {
            if (expected.stream().noneMatch(m -> m.name().equals(name))) {
                throw new InvalidInputException("model '" + model.name() + "' has no input '" + ModelRegistry.abbreviate(name)
                        + "'; its inputs are " + expected.stream().map(TensorMetadata::name).toList());
            }
        }
        List<ExecutionInput> bound = new ArrayList<>(expected.size());
        for (TensorMetadata meta : expected) {
            Tensor t = byName.get(meta.name());
            if (t == null) {
                throw new InvalidInputException("missing input '" + meta.name() + "' (" + meta.dataType().protocolName()
                        + " " + Arrays.toString(meta.shape()) + ")");
            }
            if (t.dataType() != meta.dataType()) {
                throw new InvalidInputException("input '" + meta.name() + "' must be " + meta.dataType().protocolName()
                        + ", got " + t.dataType().protocolName());
            }
            long[] shape = t.shape();
            checkShape(meta, shape, model.signature().inputs().get(expected.indexOf(meta)).sizes());
            long elements = t.elementCount();
            if (elements > model.maxElementsPerTensor()) {
                throw new InvalidInputException("input '" + meta.name() + "' has " + elements
                        + " elements; the limit is " + model.maxElementsPerTensor());
            }
            ByteBuffer data = t.data();
            long bytes = elements * meta.dataType().byteSize();
            if (data.remaining() != bytes) {
                throw new InvalidInputException("input '" + meta.name() + "' carries " + data.remaining()
                        + " bytes; its shape needs " + bytes);
            }
            if (!data.isDirect()) {
                ByteBuffer direct = ByteBuffer.allocateDirect(data.remaining());
                direct.put(data).flip();
                data = direct;
            }
            bound.add(new ExecutionInput(data, meta.dataType().executorchCode(), shape));
        }
        return bound;
    }

    private record Selection(List<String> names, Set<String> binary) {}

    private static Selection selectOutputs(LoadedModel model, InferenceRequest request) {
        List<String> all = model.outputs().stream().map(TensorMetadata::name).toList();
        Set<String> binary = new HashSet<>();
        if (request.outputs().isEmpty()) {
            if (request.binaryOutputByDefault()) {
                binary.addAll(all);
            }
            return new Selection(all, binary);
        }
        List<String> names = new ArrayList<>();
        for (InferenceRequest.RequestedOutput o : request.outputs()) {
            if (!all.contains(o.name())) {
                throw new InvalidInputException("model '" + model.name() + "' has no output '"
                        + ModelRegistry.abbreviate(o.name()) + "'; its outputs are " + all);
            }
            if (names.contains(o.name())) {
                throw new InvalidInputException("output '" + o.name() + "' requested twice");
            }
            names.add(o.name());
            if (o.binary() != null ? o.binary() : request.binaryOutputByDefault()) {
                binary.add(o.name());
            }
        }
        return new Selection(names, binary);
    }

    private static List<Tensor> nameOutputs(LoadedModel model, List<ExecutionOutput> outs, List<String> wanted) {
        List<TensorMetadata> meta = model.outputs();
        if (outs.size() != meta.size()) {
            throw new IllegalStateException("method returned " + outs.size() + " outputs, its signature declares "
                    + meta.size());
        }
        List<Tensor> result = new ArrayList<>(wanted.size());
        for (String name : wanted) {
            int i = 0;
            while (!meta.get(i).name().equals(name)) {
                i++;
            }
            ExecutionOutput out = outs.get(i);
            DataType type = DataType.fromExecutorch(out.scalarType()).orElseThrow(
                    () -> new IllegalStateException("output '" + name + "' has unsupported dtype " + out.scalarType()));
            result.add(new Tensor(name, type, out.shape(), ByteBuffer.wrap(out.data())));
        }
        return result;
    }
}
