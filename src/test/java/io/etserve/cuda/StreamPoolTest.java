package io.etserve.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.etserve.runtime.StreamSelection;
import io.etserve.support.OpaqueStreamFactory;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

class StreamPoolTest {

    @Test
    void leasesEachStreamToOneCallerAtATime() throws Exception {
        OpaqueStreamFactory factory = new OpaqueStreamFactory(List.of(0));
        StreamPool pool = new StreamPool(0, 3, 0, factory, n -> {});
        ExecutorService exec = Executors.newFixedThreadPool(6);
        Set<Long> inUse = ConcurrentHashMap.newKeySet();
        AtomicInteger overlaps = new AtomicInteger();
        List<Future<?>> fs = new ArrayList<>();
        for (int t = 0; t < 6; t++) {
            fs.add(exec.submit(() -> {
                for (int i = 0; i < 300; i++) {
                    try (StreamLease lease = pool.lease(Duration.ofSeconds(10))) {
                        if (!inUse.add(lease.stream().handle())) {
                            overlaps.incrementAndGet();
                        }
                        Thread.onSpinWait();
                        inUse.remove(lease.stream().handle());
                    }
                }
                return null;
            }));
        }
        for (Future<?> f : fs) {
            f.get(60, TimeUnit.SECONDS);
        }
        exec.shutdown();
        assertThat(overlaps.get()).isZero();
        assertThat(pool.idleCount()).isEqualTo(3);
        assertThat(factory.synchronizedHandles).hasSize(6 * 300);
    }

    @Test
    void boundedWaitThenExhausted() throws Exception {
        StreamPool pool = new StreamPool(0, 1, 0, new OpaqueStreamFactory(List.of(0)), n -> {});
        try (StreamLease held = pool.lease(Duration.ofSeconds(1))) {
            assertThat(pool.leasedCount()).isEqualTo(1);
            long start = System.nanoTime();
            assertThatThrownBy(() -> pool.lease(Duration.ofMillis(100))).isInstanceOf(StreamPoolExhaustedException.class)
                    .hasMessageContaining("device 0");
            assertThat(Duration.ofNanos(System.nanoTime() - start)).isGreaterThanOrEqualTo(Duration.ofMillis(90));
        }
        assertThat(pool.idleCount()).isEqualTo(1);
    }

    @Test
    void waitersAreCountedAndServedInOrder() throws Exception {
        StreamPool pool = new StreamPool(0, 1, 0, new OpaqueStreamFactory(List.of(0)), n -> {});
        StreamLease held = pool.lease(Duration.ofSeconds(1));
        CountDownLatch started = new CountDownLatch(1);
        ExecutorService exec = Executors.newSingleThreadExecutor();
        Future<Long> waiter = exec.submit(() -> {
            started.countDown();
            try (StreamLease l = pool.lease(Duration.ofSeconds(10))) {
                return l.stream().handle();
            }
        });
        started.await();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (pool.waitingCount() == 0 && System.nanoTime() < deadline) {
            Thread.sleep(5);
        }
        assertThat(pool.waitingCount()).isEqualTo(1);
        long handle = held.stream().handle();
        held.close();
        assertThat(waiter.get(10, TimeUnit.SECONDS)).isEqualTo(handle);
        assertThat(pool.waitingCount()).isZero();
        exec.shutdown();
    }

    @Test
    void leaseSelectionCarriesTheHandleAndMode() throws Exception {
        StreamPool pool = new StreamPool(2, 1, 0, new OpaqueStreamFactory(List.of(2)), n -> {});
        try (StreamLease l = pool.lease(Duration.ofSeconds(1))) {
            StreamSelection s = l.selection();
            assertThat(s.mode()).isEqualTo(StreamSelection.Mode.SELECT_ONLY);
            assertThat(s.handle()).isEqualTo(l.stream().handle());
            assertThat(l.device()).isEqualTo(2);
        }
    }

    @Test
    void recordsLeaseWaitTime() throws Exception {
        AtomicLong recorded = new AtomicLong(-1);
        StreamPool pool = new StreamPool(0, 1, 0, new OpaqueStreamFactory(List.of(0)), recorded::set);
        pool.lease(Duration.ofSeconds(1)).close();
        assertThat(recorded.get()).isGreaterThanOrEqualTo(0);
    }

    @Test
    void closeDrainsLeasesThenDestroysStreams() throws Exception {
        OpaqueStreamFactory factory = new OpaqueStreamFactory(List.of(0));
        StreamPool pool = new StreamPool(0, 2, 0, factory, n -> {});
        StreamLease held = pool.lease(Duration.ofSeconds(1));
        ExecutorService exec = Executors.newSingleThreadExecutor();
        Future<?> closing = exec.submit(() -> pool.close(Duration.ofSeconds(10)));
        // Until the close begins a lease still succeeds (the idle stream): lease until refused.
        IllegalStateException refused = null;
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (refused == null) {
            assertThat(System.nanoTime()).as("the pool never closed").isLessThan(until);
            try (StreamLease before = pool.lease(Duration.ofMillis(10))) {
                Thread.sleep(1);
            } catch (IllegalStateException e) {
                refused = e;
            }
        }
        assertThat(refused).hasMessageContaining("closed");
        assertThat(factory.destroyed).isEmpty(); // a stream is still leased: nothing destroyed yet
        held.close();
        closing.get(10, TimeUnit.SECONDS);
        assertThat(new HashSet<>(factory.destroyed)).hasSize(2);
        exec.shutdown();
    }

    @Test
    void aStreamThatCannotBeSynchronizedFaultsThePool() throws Exception {
        OpaqueStreamFactory inner = new OpaqueStreamFactory(List.of(0));
        StreamFactory failing = new StreamFactory() {
            public List<Integer> devices() { return inner.devices(); }
            public ComputeStream create(int d, int p) { return inner.create(d, p); }
            public void synchronize(ComputeStream s) {
                throw new CudaException("cudaStreamSynchronize", 700, "cudaErrorIllegalAddress", "illegal address");
            }
            public void destroy(ComputeStream s) { inner.destroy(s); }
            public StreamSelection.Mode selectionMode() { return inner.selectionMode(); }
        };
        StreamPool pool = new StreamPool(0, 2, 0, failing, n -> {});
        StreamLease l = pool.lease(Duration.ofSeconds(1));
        assertThatThrownBy(l::close).isInstanceOf(CudaException.class);
        assertThat(pool.fault()).hasValueSatisfying(f -> assertThat(f).contains("cudaErrorIllegalAddress"));
        assertThatThrownBy(() -> pool.lease(Duration.ofMillis(10))).isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("faulted");
        assertThat(new CudaException("x", 700, "cudaErrorIllegalAddress", "").sticky()).isTrue();
        assertThat(new CudaException("x", 2, "cudaErrorMemoryAllocation", "").sticky()).isFalse();
    }

    @Test
    void aFaultedPoolNeitherWaitsForNorDestroysItsStreams() throws Exception {
        // A stream whose work never completes (a call gave up waiting) would hang its synchronize.
        OpaqueStreamFactory factory = new OpaqueStreamFactory(List.of(0));
        StreamPool pool = new StreamPool(0, 2, 0, factory, n -> {});
        StreamLease hung = pool.lease(Duration.ofSeconds(1));
        pool.markHung("the GPU work did not complete within 500 ms");
        hung.close();
        assertThat(factory.synchronizedHandles).isEmpty();
        assertThat(pool.idleCount()).as("its slot is back, though never leased again").isEqualTo(2);
        pool.close(Duration.ofSeconds(1));
        assertThat(factory.destroyed).isEmpty();
    }
}
