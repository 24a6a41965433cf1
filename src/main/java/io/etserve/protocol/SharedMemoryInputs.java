package io.etserve.protocol;

import io.etserve.inference.DataType;
import io.etserve.inference.SharedMemoryReference;
import java.nio.ByteBuffer;
import java.util.function.IntFunction;

/**
 * Where the decoders read an input that names a system shared-memory region (Triton's
 * extension) instead of carrying its bytes: {@code io.etserve.sharedmemory.SharedMemoryRegions}
 * in the service, {@link #NONE} where no region can be named (a model's warm-up files).
 */
public interface SharedMemoryInputs {

    /**
     * The bytes {@code reference} names, copied into a buffer from {@code buffers}: the tensor
     * does not change if the client writes the region again while the request runs.
     *
     * @param label how messages name the input ({@code Input 'x'})
     * @throws io.etserve.inference.InvalidInputException for an unknown region or one the
     *     reference does not fit
     */
    ByteBuffer read(String label, SharedMemoryReference reference, IntFunction<ByteBuffer> buffers);

    /** Most bytes one request may read from shared memory, all its inputs together. */
    long maxBytesPerRequest();

    /**
     * One input of {@code count} elements from shared memory, checked as the decoders check bytes
     * that came in the request: its size before anything is read or allocated (a fixed-size
     * type's must be exactly the shape's), then the bytes themselves ({@link TensorChecks#requireBytes}).
     *
     * @param readBefore bytes the request's earlier inputs read from shared memory
     */
    default ByteBuffer readInput(String label, DataType type, long[] shape, long count, SharedMemoryReference at,
            long readBefore, IntFunction<ByteBuffer> buffers) {
        String claim = "has " + TensorChecks.SHARED_MEMORY_BYTE_SIZE + " " + at.byteSize();
        if (type.kind() != DataType.Kind.BYTES) {
            TensorChecks.requireByteSize(label, claim, type, shape, count, at.byteSize());
        }
        if (at.byteSize() > TensorChecks.MAX_TENSOR_BYTES) {
            throw new InvalidRequestException(label + " " + claim + ", more than the " + TensorChecks.MAX_TENSOR_BYTES
                    + " bytes one tensor can hold.");
        }
        if (at.byteSize() > maxBytesPerRequest() - readBefore) {
            throw new InvalidRequestException(label + " " + claim + ": the request's inputs in shared memory would"
                    + " come to more than the " + maxBytesPerRequest() + " bytes a request may read"
                    + " (etserve.inference.max-request-size).");
        }
        ByteBuffer data = read(label, at, buffers);
        TensorChecks.requireBytes(label, claim, type, shape, count, data);
        return data;
    }

    /** No regions: an input that names one is refused. */
    SharedMemoryInputs NONE = new SharedMemoryInputs() {
        @Override
        public ByteBuffer readInput(String label, DataType type, long[] shape, long count, SharedMemoryReference at,
                long readBefore, IntFunction<ByteBuffer> buffers) {
            throw TensorChecks.sharedMemoryRefused(label);
        }

        @Override
        public ByteBuffer read(String label, SharedMemoryReference reference, IntFunction<ByteBuffer> buffers) {
            throw TensorChecks.sharedMemoryRefused(label);
        }

        @Override
        public long maxBytesPerRequest() {
            return Long.MAX_VALUE;
        }
    };
}
