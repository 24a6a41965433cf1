package io.etserve.config;

import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicIntegerFieldUpdater;
import java.util.concurrent.atomic.LongAdder;
import org.eclipse.jetty.io.ByteBufferPool;
import org.eclipse.jetty.io.RetainableByteBuffer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Jetty's buffer pool behind a wrapper per acquisition that passes on at most the releases owed
 * to it: a stray extra release of a buffer is dropped instead of reaching the pooled buffer,
 * which by then may belong to another connection.
 *
 * <p>Why: Jetty 12.1 (through 12.1.14) can release a connection's request buffer twice. On a
 * malformed request line, {@code HttpConnection} answers 400 from another thread, whose completion
 * resumes the connection on a third while the first is still in {@code onFillable}; both run
 * {@code releaseRequestBuffer()}, an unguarded read-then-null (upstream jetty/jetty.project#12939
 * names the same double release from another path). Jetty's pool reuses one object per pooled
 * buffer, resetting its count at each acquisition, so the late release would free whichever
 * connection holds the buffer by then and the pool would hand that memory out twice. Only a
 * wrapper per acquisition can tell a late release from a current one.
 *
 * <p>What it cannot do: the same race lets the resumed thread fill a buffer it read from the
 * connection before the first thread's one legitimate release; that is Jetty's to fix.
 */
final class ReleaseOnceBufferPool extends ByteBufferPool.Wrapper {

    private static final Logger log = LoggerFactory.getLogger(ReleaseOnceBufferPool.class);

    private final LongAdder strayReleases = new LongAdder();
    private final AtomicBoolean warned = new AtomicBoolean();

    ReleaseOnceBufferPool(ByteBufferPool pooled) {
        super(pooled);
    }

    @Override
    public RetainableByteBuffer.Mutable acquire(int size, boolean direct) {
        return new Acquisition(super.acquire(size, direct), this);
    }

    /** Releases dropped since the start: each one a buffer released more often than it was taken. */
    long strayReleases() {
        return strayReleases.sum();
    }

    private void dropped(Acquisition buffer) {
        strayReleases.increment();
        if (warned.compareAndSet(false, true)) {
            log.warn("Dropped an extra release of a connection buffer ({}): Jetty released it more often than it "
                    + "took it, as it may after a malformed request; further ones are logged at DEBUG", buffer);
        } else {
            log.debug("Dropped an extra release of {}", buffer);
        }
    }

    @Override
    public String toString() {
        return "ReleaseOnceBufferPool[stray releases " + strayReleases() + "] over " + getWrapped();
    }

    /**
     * One acquisition of a pooled buffer. It counts the references taken through it (1 at the
     * acquisition, one per {@link #retain()}) and passes each release on while it owes one;
     * retains and releases still reach the pooled buffer, whose count stays what Jetty expects.
     * Slices and copies are Jetty's own (they retain the pooled buffer directly).
     */
    private static final class Acquisition extends RetainableByteBuffer.Wrapper {

        private static final AtomicIntegerFieldUpdater<Acquisition> REFERENCES =
                AtomicIntegerFieldUpdater.newUpdater(Acquisition.class, "references");

        private final ReleaseOnceBufferPool pool;
        private volatile int references = 1;

        Acquisition(RetainableByteBuffer pooled, ReleaseOnceBufferPool pool) {
            super(pooled);
            this.pool = pool;
        }

        @Override
        public void retain() {
            // As Jetty's own counter: a released buffer cannot be taken again (the pooled one
            // may belong to someone else by now)
            if (!addWhileHeld(1)) {
                throw new IllegalStateException("released " + this);
            }
            try {
                super.retain();
            } catch (RuntimeException e) {
                REFERENCES.decrementAndGet(this);
                throw e;
            }
        }

        @Override
        public boolean release() {
            if (!addWhileHeld(-1)) {
                pool.dropped(this);
                return false;
            }
            return super.release();
        }

        /** Adds {@code delta} to the references while any are held; false, changing nothing, once none are. */
        private boolean addWhileHeld(int delta) {
            int n;
            do {
                n = references;
                if (n <= 0) {
                    return false;
                }
            } while (!REFERENCES.compareAndSet(this, n, n + delta));
            return true;
        }
    }
}
