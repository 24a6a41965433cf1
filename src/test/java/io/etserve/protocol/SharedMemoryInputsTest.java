package io.etserve.protocol;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.etserve.inference.DataType;
import io.etserve.inference.SharedMemoryReference;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.function.IntFunction;
import org.junit.jupiter.api.Test;

/** An input from shared memory is checked as bytes in a body are, and its size before anything is read. */
class SharedMemoryInputsTest {

    /** Regions that hand out {@code bytes}, remembering what was asked for. */
    static final class Fixed implements SharedMemoryInputs {
        final List<SharedMemoryReference> reads = new ArrayList<>();
        final byte[] bytes;

        Fixed(byte... bytes) {
            this.bytes = bytes;
        }

        @Override
        public ByteBuffer read(String label, SharedMemoryReference reference, IntFunction<ByteBuffer> buffers) {
            reads.add(reference);
            return buffers.apply((int) reference.byteSize()).put(bytes, 0, (int) reference.byteSize()).flip();
        }

        @Override
        public long maxBytesPerRequest() {
            return 16;
        }
    }

    @Test
    void aFixedSizeInputMustBeItsShapesBytesAndIsRefusedBeforeItIsRead() {
        Fixed regions = new Fixed(new byte[16]);
        ByteBuffer data = regions.readInput("Input 'x'", DataType.FP32, new long[] {2}, 2,
                new SharedMemoryReference("r", 0, 8), 0, ByteBuffer::allocate);
        assertThat(data.remaining()).isEqualTo(8);
        assertThatThrownBy(() -> regions.readInput("Input 'x'", DataType.FP32, new long[] {2}, 2,
                new SharedMemoryReference("r", 0, 7), 0, ByteBuffer::allocate))
                .isInstanceOf(InvalidRequestException.class)
                .hasMessage("Input 'x' has shared_memory_byte_size 7, but 2 FP32 elements (shape [2]) need 8 bytes.");
        assertThat(regions.reads).hasSize(1);
    }

    @Test
    void aRequestsInputsTogetherReadAtMostItsLimit() {
        Fixed regions = new Fixed(new byte[16]);
        assertThatThrownBy(() -> regions.readInput("Input 'y'", DataType.FP32, new long[] {2}, 2,
                new SharedMemoryReference("r", 0, 8), 12, ByteBuffer::allocate))
                .isInstanceOf(InvalidRequestException.class)
                .hasMessage("Input 'y' has shared_memory_byte_size 8: the request's inputs in shared memory would come to"
                        + " more than the 16 bytes a request may read (etserve.inference.max-request-size).");
        assertThat(regions.reads).isEmpty();
    }

    @Test
    void bytesElementsAreCheckedAsInABodyAndAHugeSizeIsRefused() {
        // One BYTES element: length 3, then "abc"; a second claimed element is not there.
        ByteBuffer one = ByteBuffer.allocate(7).order(ByteOrder.LITTLE_ENDIAN).putInt(3).put(new byte[] {'a', 'b', 'c'});
        Fixed regions = new Fixed(one.array());
        assertThat(regions.readInput("Input 's'", DataType.BYTES, new long[] {1}, 1,
                new SharedMemoryReference("r", 0, 7), 0, ByteBuffer::allocate).remaining()).isEqualTo(7);
        assertThatThrownBy(() -> regions.readInput("Input 's'", DataType.BYTES, new long[] {2}, 2,
                new SharedMemoryReference("r", 0, 7), 0, ByteBuffer::allocate))
                .hasMessage("Input 's' binary BYTES data ends before element 1 of 2.");
        assertThatThrownBy(() -> regions.readInput("Input 's'", DataType.BYTES, new long[] {1}, 1,
                new SharedMemoryReference("r", 0, 1L << 31), 0, ByteBuffer::allocate))
                .hasMessage("Input 's' has shared_memory_byte_size 2147483648, more than the 2147483647 bytes one"
                        + " tensor can hold.");
    }

    @Test
    void withoutRegionsAnInputThatNamesOneIsRefused() {
        assertThatThrownBy(() -> SharedMemoryInputs.NONE.readInput("Input 'x'", DataType.FP32, new long[] {1}, 1,
                new SharedMemoryReference("r", 0, 4), 0, ByteBuffer::allocate))
                .hasMessage("Input 'x' uses shared memory, which cannot be used here.");
    }
}
