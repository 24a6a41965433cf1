package io.etserve.cuda;

import io.etserve.runtime.StreamSelection;

/**
 * Exclusive use of one stream slot until {@link #close()}, which hands the stream back only
 * after all work queued on it has completed.
 */
public final class StreamLease implements AutoCloseable {

    private final StreamPool pool;
    private final int slot;
    private final ComputeStream stream;
    private boolean closed;

    StreamLease(StreamPool pool, int slot, ComputeStream stream) {
        this.pool = pool;
        this.slot = slot;
        this.stream = stream;
    }

    /** Index of the slot: the model instance bound to this slot runs on this stream. */
    public int slot() {
        return slot;
    }

    public ComputeStream stream() {
        return stream;
    }

    public int device() {
        return stream.device();
    }

    /** What the bridge needs to run a forward call on this stream. */
    public StreamSelection selection() {
        return switch (pool.selectionMode()) {
            case CUDA -> StreamSelection.cuda(stream.handle(), stream.device(), pool.completionWait(),
                    pool.sleepSliceMicros(), pool.waitTimeoutMillis());
            case SELECT_ONLY -> StreamSelection.selectOnly(stream.handle());
            case NONE -> StreamSelection.none();
        };
    }

    @Override
    public void close() {
        if (!closed) {
            closed = true;
            pool.release(this);
        }
    }
}
