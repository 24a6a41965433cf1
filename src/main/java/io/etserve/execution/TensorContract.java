package io.etserve.execution;

import io.etserve.inference.DataType;
import io.etserve.inference.InferenceRequest;
import io.etserve.inference.InvalidInputException;
import io.etserve.inference.ModelDescription;
import io.etserve.inference.Tensor;
import io.etserve.inference.TensorMetadata;
import io.etserve.inference.UntrustedText;
import io.etserve.runtime.ExecutionInput;
import io.etserve.runtime.ExecutionOutput;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;

/**
 * The one place a request meets a model's method: input names (unknown, missing), dtypes,
 * shapes against static sizes and dynamic bounds (a zero dimension is refused: no program here
 * runs on an empty batch), element counts against the model's limit, and the outputs asked
 * for. Every refusal is an {@link InvalidInputException} (400), thrown before anything runs.
 *
 * <p>What a request must be on its own (names given once, bytes that fit each input's shape,
 * the server's size limits) the decoders check before they allocate, REST and gRPC alike
 * ({@code protocol.TensorChecks}); warm-up files go through the same decoder. The bridge's
 * own checks stay as a defence, not as where users' errors come from.
 */
public final class TensorContract {

    private TensorContract() {}

    /**
     * A request's shape against the metadata: a static dimension must match exactly, a dynamic one
     * (-1 in the metadata) may take 1 up to the program's bound.
     */
    public static void checkShape(TensorMetadata meta, long[] shape, long[] bounds) {
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

    /** The request's inputs in the method's order, each checked against its signature. */
    static List<ExecutionInput> bindInputs(LoadedModel model, InferenceRequest request) {
        return bindInputs(model.description(), model.maxElementsPerTensor(), request);
    }

    /**
     * {@link #bindInputs(LoadedModel, InferenceRequest)} for a version still loading (its
     * warm-up): the description it will serve with and its element limit.
     */
    public static List<ExecutionInput> bindInputs(ModelDescription model, long maxElementsPerTensor,
            InferenceRequest request) {
        List<TensorMetadata> expected = model.inputs();
        List<Tensor> given = request.inputs();
        // By scanning: a method has a few inputs, and a map per request cost more than the search.
        for (Tensor t : given) {
            if (indexOf(expected, t.name()) < 0) {
                throw new InvalidInputException("model '" + model.name() + "' has no input '"
                        + UntrustedText.abbreviate(t.name()) + "'; its inputs are "
                        + expected.stream().map(TensorMetadata::name).toList());
            }
        }
        // The decoders refuse a repeated name; only code can build such a request. Every name is
        // the method's by now, so a repeat shows among its first (inputs + 1) names.
        for (int i = 0; i < Math.min(given.size(), expected.size() + 1); i++) {
            for (int j = 0; j < i; j++) {
                if (given.get(j).name().equals(given.get(i).name())) {
                    throw new IllegalArgumentException("input '" + given.get(i).name() + "' is in the request twice");
                }
            }
        }
        List<ExecutionInput> bound = new ArrayList<>(expected.size());
        for (int i = 0; i < expected.size(); i++) {
            TensorMetadata meta = expected.get(i);
            Tensor t = named(given, meta.name());
            if (t == null) {
                throw new InvalidInputException("missing input '" + meta.name() + "' (" + meta.dataType().protocolName()
                        + " " + Arrays.toString(meta.shape()) + ")");
            }
            if (t.dataType() != meta.dataType()) {
                throw new InvalidInputException("input '" + meta.name() + "' must be " + meta.dataType().protocolName()
                        + ", got " + t.dataType().protocolName());
            }
            long[] shape = t.shape();
            checkShape(meta, shape, model.signature().inputs().get(i).sizes());
            long elements = t.elementCount();
            if (elements > maxElementsPerTensor) {
                throw new InvalidInputException("input '" + meta.name() + "' has " + elements
                        + " elements; the limit is " + maxElementsPerTensor);
            }
            ByteBuffer data = t.data();
            if (!data.isDirect()) {
                ByteBuffer direct = ByteBuffer.allocateDirect(data.remaining());
                direct.put(data).flip();
                data = direct;
            }
            bound.add(new ExecutionInput(data, meta.dataType().executorchCode(), shape));
        }
        return bound;
    }

    private static int indexOf(List<TensorMetadata> tensors, String name) {
        for (int i = 0; i < tensors.size(); i++) {
            if (tensors.get(i).name().equals(name)) {
                return i;
            }
        }
        return -1;
    }

    private static Tensor named(List<Tensor> tensors, String name) {
        for (Tensor t : tensors) {
            if (t.name().equals(name)) {
                return t;
            }
        }
        return null;
    }

    /**
     * The rows a request brings to a batch: every input's first dimension, which must agree
     * (a batched model's inputs are all batched along dimension 0).
     */
    static int batchRows(List<ExecutionInput> inputs) {
        long rows = inputs.get(0).shape()[0];
        for (ExecutionInput in : inputs) {
            if (in.shape()[0] != rows) {
                throw new InvalidInputException("the model batches its inputs along dimension 0, so every input's "
                        + "first dimension must be the same; got " + inputs.stream()
                                .map(i -> Arrays.toString(i.shape())).toList());
            }
        }
        return Math.toIntExact(rows);
    }

    /** The outputs a request asked for, in its order, and which of them travel as binary. */
    record OutputSelection(List<String> names, Set<String> binary) {}

    /** A model's output names in its order, as a list and a set: built once per loaded model. */
    record DeclaredOutputs(List<String> names, Set<String> all) {
        static DeclaredOutputs of(ModelDescription model) {
            List<String> names = model.outputs().stream().map(TensorMetadata::name).toList();
            return new DeclaredOutputs(names, Set.copyOf(names));
        }
    }

    static OutputSelection selectOutputs(LoadedModel model, InferenceRequest request) {
        return selectOutputs(model.name(), model.declaredOutputs(), request);
    }

    static OutputSelection selectOutputs(ModelDescription model, InferenceRequest request) {
        return selectOutputs(model.name(), DeclaredOutputs.of(model), request);
    }

    private static OutputSelection selectOutputs(String modelName, DeclaredOutputs declared, InferenceRequest request) {
        List<String> all = declared.names();
        if (request.outputs().isEmpty()) {  // the usual request: every output, the model's own list and set
            return new OutputSelection(all, request.binaryOutputByDefault() ? declared.all() : Set.of());
        }
        // Names are unique once checked, so the binary ones become an immutable set as they are,
        // which the response keeps without a copy.
        String[] binary = new String[request.outputs().size()];
        int binaryCount = 0;
        List<String> names = new ArrayList<>(request.outputs().size());
        for (InferenceRequest.RequestedOutput o : request.outputs()) {
            if (!all.contains(o.name())) {
                throw new InvalidInputException("model '" + modelName + "' has no output '"
                        + UntrustedText.abbreviate(o.name()) + "'; its outputs are " + all);
            }
            if (names.contains(o.name())) {
                throw new InvalidInputException("output '" + o.name() + "' requested twice");
            }
            names.add(o.name());
            if (o.binary() != null ? o.binary() : request.binaryOutputByDefault()) {
                binary[binaryCount++] = o.name();
            }
        }
        return new OutputSelection(names, Set.of(Arrays.copyOf(binary, binaryCount)));
    }

    /** The forward call's outputs that were asked for, named as the model's config names them. */
    static List<Tensor> nameOutputs(LoadedModel model, List<ExecutionOutput> outs, List<String> wanted) {
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
            result.add(new Tensor(name, type, out.shape(), out.data()));
        }
        return result;
    }
}
