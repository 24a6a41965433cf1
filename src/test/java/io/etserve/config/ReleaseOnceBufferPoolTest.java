package io.etserve.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.eclipse.jetty.io.ArrayByteBufferPool;
import org.eclipse.jetty.io.ByteBufferPool;
import org.eclipse.jetty.io.RetainableByteBuffer;
import org.junit.jupiter.api.Test;

/**
 * A buffer released twice, as Jetty's HTTP/1 connection can on a malformed request line, over
 * Jetty's real pool: without the lease the late release frees the buffer's next owner too and
 * the pool hands its memory out twice; through {@link ReleaseOnceBufferPool} it is dropped.
 */
class ReleaseOnceBufferPoolTest {

    static final int SIZE = 4096;

    /**
     * On a pool that holds a buffer (the first acquisition of a size makes a one-off buffer that
     * goes into the pool when released): acquire, release, let the next owner take it, release
     * the first lease again, acquire once more.
     */
    record Sequence(RetainableByteBuffer next, RetainableByteBuffer after, boolean lateRelease) {
        static Sequence run(ByteBufferPool pool) {
            pool.acquire(SIZE, false).release();
            RetainableByteBuffer first = pool.acquire(SIZE, false);
            first.release();
            RetainableByteBuffer next = pool.acquire(SIZE, false);
            boolean late = first.release();
            RetainableByteBuffer after = pool.acquire(SIZE, false);
            return new Sequence(next, after, late);
        }
    }

    @Test
    void withoutTheLeaseALateReleaseHandsTheNextOwnersMemoryOutAgain() {
        // The hazard itself, on Jetty's pool alone (if this stops holding, the pool changed).
        Sequence s = Sequence.run(new ArrayByteBufferPool());
        assertThat(s.lateRelease()).isTrue();
        assertThat(s.after().getByteBuffer()).isSameAs(s.next().getByteBuffer());
    }

    @Test
    void throughTheLeaseALateReleaseIsDroppedAndTheNextOwnerKeepsItsBuffer() {
        ReleaseOnceBufferPool pool = new ReleaseOnceBufferPool(new ArrayByteBufferPool());
        Sequence s = Sequence.run(pool);
        assertThat(s.lateRelease()).isFalse();
        assertThat(pool.strayReleases()).isEqualTo(1);
        assertThat(s.after().getByteBuffer()).isNotSameAs(s.next().getByteBuffer());
        // The next owner's buffer is still its own, released by its own release.
        assertThat(s.next().getRetained()).isEqualTo(1);
        assertThat(s.next().release()).isTrue();
    }

    @Test
    void retainsAndReleasesThroughTheLeaseReachThePooledBufferOnce() {
        ReleaseOnceBufferPool pool = new ReleaseOnceBufferPool(new ArrayByteBufferPool());
        pool.acquire(SIZE, true).release();
        RetainableByteBuffer lease = pool.acquire(SIZE, true);
        lease.retain();
        assertThat(lease.isRetained()).isTrue();
        assertThat(lease.release()).isFalse();
        assertThat(lease.isRetained()).isFalse();
        assertThat(lease.release()).isTrue();
        assertThat(lease.release()).isFalse();
        assertThat(pool.strayReleases()).isEqualTo(1);
        // Back in the pool once: the next acquisition gets the same memory, the one after a new one.
        RetainableByteBuffer again = pool.acquire(SIZE, true);
        assertThat(again.getByteBuffer()).isSameAs(lease.getByteBuffer());
        assertThat(pool.acquire(SIZE, true).getByteBuffer()).isNotSameAs(again.getByteBuffer());
    }

    @Test
    void aReleasedLeaseCannotBeRetainedAgain() {
        ReleaseOnceBufferPool pool = new ReleaseOnceBufferPool(new ArrayByteBufferPool());
        pool.acquire(SIZE, false).release();
        RetainableByteBuffer lease = pool.acquire(SIZE, false);
        lease.release();
        RetainableByteBuffer next = pool.acquire(SIZE, false);
        assertThatThrownBy(lease::retain).isInstanceOf(IllegalStateException.class);
        assertThat(next.getRetained()).isEqualTo(1);
    }

    @Test
    void twoThreadsReleasingOneLeaseAtOnceReleaseThePooledBufferOnce() throws Exception {
        ReleaseOnceBufferPool pool = new ReleaseOnceBufferPool(new ArrayByteBufferPool());
        ExecutorService threads = Executors.newFixedThreadPool(2);
        try {
            for (int i = 0; i < 2_000; i++) {
                RetainableByteBuffer lease = pool.acquire(SIZE, false);
                CyclicBarrier together = new CyclicBarrier(2);
                Future<Boolean> a = threads.submit(() -> {
                    together.await();
                    return lease.release();
                });
                Future<Boolean> b = threads.submit(() -> {
                    together.await();
                    return lease.release();
                });
                assertThat(a.get(5, TimeUnit.SECONDS) ^ b.get(5, TimeUnit.SECONDS)).as("round %d", i).isTrue();
            }
        } finally {
            threads.shutdownNow();
        }
        assertThat(pool.strayReleases()).isEqualTo(2_000);
    }
}
