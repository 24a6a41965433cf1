package io.etserve.support;

import io.etserve.cuda.ComputeStream;
import io.etserve.cuda.StreamFactory;
import io.etserve.runtime.StreamSelection;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Streams as opaque handle values, for hosts without a GPU (ExecuTorch's own caller-stream
 * tests do the same). No CUDA library is faked: the bridge runs in SELECT_ONLY mode, so it
 * hands the handle to ExecuTorch's guard and never to CUDA.
 */
public final class OpaqueStreamFactory implements StreamFactory {

    public static final long BASE = 0x5EED_0000L;

    private final List<Integer> devices;
    private final AtomicLong next = new AtomicLong(BASE);
    public final ConcurrentLinkedQueue<Long> synchronizedHandles = new ConcurrentLinkedQueue<>();
    public final ConcurrentLinkedQueue<Long> destroyed = new ConcurrentLinkedQueue<>();

    public OpaqueStreamFactory(List<Integer> devices) {
        this.devices = List.copyOf(devices);
    }

    record Handle(int device, long handle) implements ComputeStream {}

    @Override
    public List<Integer> devices() {
        return devices;
    }

    private final Map<Long, Integer> deviceByHandle = new ConcurrentHashMap<>();

    @Override
    public ComputeStream create(int device, int priority) {
        Handle h = new Handle(device, next.getAndAdd(0x100));
        deviceByHandle.put(h.handle(), device);
        return h;
    }

    /** The device a handle was created for, or null for a handle this factory never made. */
    public Integer deviceOf(long handle) {
        return deviceByHandle.get(handle);
    }

    @Override
    public void synchronize(ComputeStream stream) {
        synchronizedHandles.add(stream.handle());
    }

    @Override
    public void destroy(ComputeStream stream) {
        destroyed.add(stream.handle());
    }

    @Override
    public StreamSelection.Mode selectionMode() {
        return StreamSelection.Mode.SELECT_ONLY;
    }
}
