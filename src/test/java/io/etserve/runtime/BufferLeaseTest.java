package io.etserve.runtime;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** A request's buffers go back once, with whatever was tied to them. */
class BufferLeaseTest {

    @Test
    void whatIsClosedWithTheBuffersIsClosedOnceWithThem() {
        List<String> closed = new ArrayList<>();
        BufferLease lease = new BufferLease(new DirectBufferPool(1 << 20));
        lease.acquire(64);
        lease.closeWith(() -> closed.add("reservation"));
        assertThat(closed).isEmpty();
        lease.close();
        lease.close();
        assertThat(closed).containsExactly("reservation");
        assertThatThrownBy(() -> lease.closeWith(() -> closed.add("late"))).isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(() -> lease.acquire(1)).isInstanceOf(IllegalStateException.class);
    }
}
