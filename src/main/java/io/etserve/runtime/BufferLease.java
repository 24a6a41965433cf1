package io.etserve.runtime;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;

/**
 * One request's tensor memory from a {@link DirectBufferPool}: its inputs' buffers and the
 * forward call's outputs, all given back by {@link #close} once the answer no longer needs them
 * (gRPC: serialized into the transport's buffers). A fresh direct buffer per tensor would cost a
 * zeroed allocation and a cleaner each, and the collector a phantom reference to process per
 * buffer in every young pause. Once closed, nothing more is lent: the request is over.
 */
public final class BufferLease implements OutputBuffers, AutoCloseable {

    private final DirectBufferPool pool;
    private final List<ByteBuffer> taken = new ArrayList<>(4);  // guarded by this
    private final List<AutoCloseable> alsoClosed = new ArrayList<>(1);  // guarded by this
    private boolean closed;  // guarded by this

    public BufferLease(DirectBufferPool pool) {
        this.pool = pool;
    }

    /** A little-endian buffer with position 0 and limit {@code bytes}; its contents are undefined. */
    public synchronized ByteBuffer acquire(long bytes) {
        if (closed) {
            throw new IllegalStateException("the request's buffers were given back");
        }
        ByteBuffer b = pool.acquire(bytes);
        taken.add(b);
        return b;
    }

    /** Closes {@code resource} with the buffers (a reservation of what they hold, say). */
    public synchronized void closeWith(AutoCloseable resource) {
        if (closed) {
            throw new IllegalStateException("the request's buffers were given back");
        }
        alsoClosed.add(resource);
    }

    @Override
    public ByteBuffer allocate(int output, long bytes) {
        return acquire(bytes);
    }

    /** Gives every buffer back (once); none may be used after. */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        taken.forEach(pool::release);
        taken.clear();
        for (AutoCloseable resource : alsoClosed) {
            try {
                resource.close();
            } catch (Exception e) {
                throw new IllegalStateException("could not release " + resource, e);
            }
        }
        alsoClosed.clear();
    }
}
