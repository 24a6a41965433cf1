package io.etserve.runtime;

import java.util.ArrayList;
import java.util.List;

/**
 * Inputs, outputs and delegate backends of one method of a program, and the sizes of its
 * memory-planned buffers (what each instance of the method allocates).
 */
public record MethodSignature(String method, List<TensorSpec> inputs, List<TensorSpec> outputs,
        List<String> backends, List<Long> plannedBuffers) {

    private static final int TAG_TENSOR = 1;

    public MethodSignature {
        inputs = List.copyOf(inputs);
        outputs = List.copyOf(outputs);
        backends = List.copyOf(backends);
        plannedBuffers = List.copyOf(plannedBuffers);
    }

    /** Planned working memory of one instance, in bytes (saturating: a hostile file may declare anything). */
    public long plannedBytes() {
        long total = 0;
        for (long b : plannedBuffers) {
            total = b < 0 || Long.MAX_VALUE - total < b ? Long.MAX_VALUE : total + b;
        }
        return total;
    }

    public boolean usesBackend(String backend) {
        return backends.contains(backend);
    }

    /** The same signature with a loaded instance's dynamism (see {@link NativeBridge#instanceSignature}). */
    MethodSignature withDynamism(long[] encoded) {
        MethodSignature loaded = decode(method, encoded, new String[0]);
        return new MethodSignature(method, loaded.inputs, loaded.outputs, backends, plannedBuffers);
    }

    /** Decodes the bridge's flat encoding (see {@link NativeBridge#methodSignature}). */
    static MethodSignature decode(String method, long[] encoded, String[] backends) {
        int[] cursor = {0};
        List<TensorSpec> inputs = decodeSpecs(encoded, cursor);
        List<TensorSpec> outputs = decodeSpecs(encoded, cursor);
        List<Long> planned = new ArrayList<>();
        if (cursor[0] < encoded.length) {
            int count = (int) encoded[cursor[0]++];
            for (int i = 0; i < count; i++) {
                planned.add(encoded[cursor[0]++]);
            }
        }
        return new MethodSignature(method, inputs, outputs, List.of(backends), planned);
    }

    private static List<TensorSpec> decodeSpecs(long[] e, int[] cursor) {
        int count = (int) e[cursor[0]++];
        List<TensorSpec> specs = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            boolean tensor = e[cursor[0]++] == TAG_TENSOR;
            int dtype = (int) e[cursor[0]++];
            boolean dynamic = e[cursor[0]++] != 0;
            boolean planned = e[cursor[0]++] != 0;
            int rank = (int) e[cursor[0]++];
            long[] sizes = new long[rank];
            System.arraycopy(e, cursor[0], sizes, 0, rank);
            cursor[0] += rank;
            specs.add(new TensorSpec(tensor, dtype, sizes, dynamic, planned));
        }
        return specs;
    }
}
