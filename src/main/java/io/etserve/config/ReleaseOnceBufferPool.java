package io.etserve.config;

import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;
import org.eclipse.jetty.io.ByteBufferPool;
import org.eclipse.jetty.io.RetainableByteBuffer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Jetty's buffer pool behind a lease per acquisition that passes on at most the releases it
 * was owed: a stray second release of a buffer is dropped instead of reaching the pooled buffer.
 *
 * <p>Why: Jetty 12.1 (through 12.1.14) can release a connection's request buffer twice. On a
 * malformed request line, {@code HttpConnection} answers 400 from another thread, whose completion
 * resumes the connection on a third while the first is still in {@code onFillable}; both run
 * {@code releaseRequestBuffer()}, an unguarded read-then-null (upstream jetty/jetty.project#12939
 * names the same double release from another path). If the pool hands the buffer to another
 * connection between the two releases, the second one frees that connection's buffer too, and the
 * next acquisition shares it: one client's request bytes under another's. Pooled buffers are
 * reused objects, so only a wrapper per acquisition can tell a late release from a current one.
 */
final class ReleaseOnceBufferPool extends ByteBufferPool.Wrapper {

    private static final Logger log = LoggerFactory.getLogger(ReleaseOnceBufferPool.class);

    private final LongAdder strayReleases = new LongAdder();

    ReleaseOnceBufferPool(ByteBufferPool pooled) {
        super(pooled);
    }

    @Override
    public RetainableByteBuffer.Mutable acquire(int size, boolean direct) {
        return new Lease(super.acquire(size, direct));
    }

    /** Releases dropped since the start: each one a buffer Jetty would have released twice. */
    long strayReleases() {
        return strayReleases.sum();
    }

    /**
     * One acquisition of a pooled buffer. It counts the references taken through it (1 at the
     * acquisition, one per {@link #retain()}) and passes each release on while it owes one;
     * retains and releases still reach the pooled buffer, whose count stays what Jetty expects.
     * Slices and copies are Jetty's own (they retain the pooled buffer directly).
     */
    private final class Lease extends RetainableByteBuffer.Wrapper {

        private final AtomicInteger references = new AtomicInteger(1);

        Lease(RetainableByteBuffer pooled) {
            super(pooled);
        }

        @Override
        public void retain() {
            // As Jetty's own counter: a released buffer cannot be taken again (the pooled one
            // may belong to someone else by now)
            int n;
            do {
                n = references.get();
                if (n <= 0) {
                    throw new IllegalStateException("released " + this);
                }
            } while (!references.compareAndSet(n, n + 1));
            try {
                super.retain();
            } catch (RuntimeException e) {
                references.decrementAndGet();
                throw e;
            }
        }

        @Override
        public boolean release() {
            int n;
            do {
                n = references.get();
                if (n <= 0) {
                    strayReleases.increment();
                    log.debug("Dropped a second release of {} (a Jetty race, not a leak)", this);
                    return false;
                }
            } while (!references.compareAndSet(n, n - 1));
            return super.release();
        }
    }
}
