package io.etserve.config;

import static org.assertj.core.api.Assertions.assertThat;

import org.eclipse.jetty.io.ArrayByteBufferPool;
import org.eclipse.jetty.io.RetainableByteBuffer;
import org.junit.jupiter.api.Test;

class ConnectionBufferPoolTest {

    @Test
    void upTo64KiBTheBucketsAreJettysDefaultOnes() {
        ArrayByteBufferPool jetty = new ArrayByteBufferPool();
        ConnectionBufferPool pool = new ConnectionBufferPool(1 << 20);
        for (int size : new int[] {1, 4096, 4097, 8192, 8193, 30_000, 65_535, 65_536}) {
            assertThat(capacityOf(pool, size)).as("%d bytes", size).isEqualTo(capacityOf(jetty, size));
        }
        assertThat(capacityOf(pool, 4097)).isEqualTo(8192);
    }

    @Test
    void aboveThatOneBucketPerPowerOfTwoUpToTheInputBuffer() {
        ConnectionBufferPool pool = new ConnectionBufferPool(1 << 20);
        assertThat(pool.getMaxCapacity()).isEqualTo(1 << 20);
        assertThat(capacityOf(pool, 65_537)).isEqualTo(128 * 1024);
        assertThat(capacityOf(pool, 128 * 1024)).isEqualTo(128 * 1024);
        assertThat(capacityOf(pool, 128 * 1024 + 1)).isEqualTo(256 * 1024);
        assertThat(capacityOf(pool, 1 << 20)).isEqualTo(1 << 20);
        // 16 buckets of 4 KiB, then 128, 256, 512 KiB and 1 MiB
        assertThat(ConnectionBufferPool.bucketIndex(1 << 20)).isEqualTo(19);
        assertThat(ConnectionBufferPool.bucketIndex(16 << 20)).isEqualTo(23);
        for (int i = 0; i <= 23; i++) {
            assertThat(ConnectionBufferPool.bucketIndex(ConnectionBufferPool.bucketCapacity(i))).isEqualTo(i);
        }
    }

    @Test
    void anInputBufferBetweenPowersOfTwoIsKeptInTheNextOneUp() {
        ConnectionBufferPool pool = new ConnectionBufferPool(100 * 1024);
        assertThat(pool.getMaxCapacity()).isEqualTo(128 * 1024);
        assertThat(capacityOf(pool, 100 * 1024)).isEqualTo(128 * 1024);
        assertThat(new ConnectionBufferPool(8192).getMaxCapacity()).isEqualTo(64 * 1024);  // never below Jetty's
    }

    @Test
    void aRequestBufferOfTheInputBuffersSizeIsKeptAndTakenAgain() {
        ConnectionBufferPool pool = new ConnectionBufferPool(1 << 20);
        RetainableByteBuffer first = pool.acquire(1 << 20, true);
        first.release();
        assertThat(pool.getDirectByteBufferCount()).isEqualTo(1);
        assertThat(pool.getDirectMemory()).isEqualTo(1 << 20);
        RetainableByteBuffer again = pool.acquire(1 << 20, true);
        assertThat(again.getByteBuffer()).isSameAs(first.getByteBuffer());
        again.release();
        // Past the largest, a buffer is made for the caller and dropped, as Jetty's pool does
        RetainableByteBuffer larger = pool.acquire((1 << 20) + 1, true);
        larger.release();
        assertThat(pool.getDirectByteBufferCount()).isEqualTo(1);
    }

    private static int capacityOf(ArrayByteBufferPool pool, int size) {
        RetainableByteBuffer buffer = pool.acquire(size, false);
        try {
            return buffer.capacity();
        } finally {
            buffer.release();
        }
    }
}
