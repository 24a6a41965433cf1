package io.etserve.sharedmemory;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.cuda.ImportedDeviceMemory;
import java.nio.ByteBuffer;
import java.util.HashMap;
import java.util.Map;

/**
 * Allocations of a pretend CUDA device, each behind a 64-byte handle; byte i of one is (i % 251).
 * Stands for {@code CudaIpc} where there is no GPU, so that the registry and the protocols' calls
 * can be tested; the real opener is checked on the GPU host (scripts/gpu/cuda-shm.sh).
 */
public final class HostAllocations implements ImportedDeviceMemory.Opener {

    private final Map<Integer, byte[]> memory = new HashMap<>();
    private final Map<Integer, Integer> devices = new HashMap<>();
    private final Map<Integer, Integer> closes = new HashMap<>();
    private int opened;
    private RuntimeException copyFailure;
    private boolean closed;

    /** How many handles were opened. */
    public synchronized int opened() {
        return opened;
    }

    /** Every copy from now on fails with {@code failure}, as a CUDA call would (null: copies work again). */
    public synchronized void failCopies(RuntimeException failure) {
        copyFailure = failure;
    }

    private synchronized void copying() {
        if (copyFailure != null) {
            throw copyFailure;
        }
    }

    /** Whether the opener itself was closed. */
    public synchronized boolean openerClosed() {
        return closed;
    }

    @Override
    public synchronized void close() {
        closed = true;
    }

    /** A new allocation of {@code bytes} on device {@code onDevice}; its handle. */
    public synchronized byte[] allocate(int bytes, int onDevice) {
        byte[] handle = new byte[ImportedDeviceMemory.HANDLE_BYTES];
        int id = memory.size() + 1;
        handle[0] = (byte) id;
        byte[] data = new byte[bytes];
        for (int i = 0; i < bytes; i++) {
            data[i] = (byte) (i % 251);
        }
        memory.put(id, data);
        devices.put(id, onDevice);
        return handle;
    }

    /** The allocation behind {@code handle}, as it is now. */
    public synchronized byte[] bytes(byte[] handle) {
        return memory.get((int) handle[0]);
    }

    /** How many times what {@code handle} opened was closed. */
    public synchronized int closed(byte[] handle) {
        return closes.getOrDefault((int) handle[0], 0);
    }

    @Override
    public synchronized ImportedDeviceMemory open(byte[] handle, int device) {
        int id = handle[0];
        byte[] data = memory.get(id);
        if (data == null || devices.get(id) != device) {
            throw new IllegalArgumentException("no allocation has that handle");
        }
        opened++;
        return new ImportedDeviceMemory() {
            @Override
            public int device() {
                return device;
            }

            @Override
            public long allocationBytes() {
                return data.length;
            }

            @Override
            public void copyToHost(long offset, ByteBuffer into) {
                assertThat(into.isDirect()).isTrue();
                copying();
                into.put(data, (int) offset, into.remaining());
            }

            @Override
            public void copyFromHost(ByteBuffer from, long offset) {
                assertThat(from.isDirect()).isTrue();
                copying();
                from.get(data, (int) offset, from.remaining());
            }

            @Override
            public void close() {
                synchronized (HostAllocations.this) {
                    closes.merge(id, 1, Integer::sum);
                }
            }
        };
    }
}
