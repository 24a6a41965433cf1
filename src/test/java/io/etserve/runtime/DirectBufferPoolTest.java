package io.etserve.runtime;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.junit.jupiter.api.Test;

class DirectBufferPoolTest {

    @Test
    void buffersComeInPowerOfTwoBucketsAndAreReused() {
        DirectBufferPool pool = new DirectBufferPool(1 << 24);
        ByteBuffer a = pool.acquire(600_000);
        assertThat(a.isDirect()).isTrue();
        assertThat(a.order()).isEqualTo(ByteOrder.LITTLE_ENDIAN);
        assertThat(a.capacity()).isEqualTo(1 << 20);
        assertThat(a.position()).isZero();
        assertThat(a.limit()).isEqualTo(600_000);
        a.position(123);
        pool.release(a);
        assertThat(pool.retainedBytes()).isEqualTo(1 << 20);
        ByteBuffer b = pool.acquire(700_000);
        assertThat(b).isSameAs(a);
        assertThat(b.position()).isZero();
        assertThat(b.limit()).isEqualTo(700_000);
        assertThat(pool.retainedBytes()).isZero();
        // Small requests share the smallest bucket.
        assertThat(pool.acquire(1).capacity()).isEqualTo(4096);
        assertThat(pool.acquire(0).remaining()).isZero();
    }

    @Test
    void idleMemoryIsBoundedAndForeignBuffersAreNotKept() {
        DirectBufferPool pool = new DirectBufferPool(1 << 20);
        ByteBuffer one = pool.acquire(1 << 20);
        ByteBuffer two = pool.acquire(1 << 20);
        pool.release(one);
        pool.release(two);  // over the bound: dropped for the collector
        assertThat(pool.retainedBytes()).isEqualTo(1 << 20);
        pool.release(ByteBuffer.allocateDirect(3000));  // not a bucket size
        pool.release(ByteBuffer.allocate(4096));        // not direct
        assertThat(pool.retainedBytes()).isEqualTo(1 << 20);
    }
}
