package io.etserve.execution;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.etserve.cuda.LeaseQueue;
import io.etserve.cuda.StreamPool;
import io.etserve.inference.ModelUnavailableException;
import io.etserve.inference.OverloadedException;
import io.etserve.runtime.Program;
import io.etserve.runtime.ProgramInstance;
import io.etserve.support.OpaqueStreamFactory;
import io.etserve.support.TestPaths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Instances and streams are separate resources: a model's instances bound its concurrency, the
 * device's streams are shared by every model there (real Modules, opaque stream handles).
 */
class GpuInstancePoolTest {

    private static final Duration SHORT = Duration.ofMillis(50);

    private Program program;
    private final List<ProgramInstance> instances = new ArrayList<>();

    @BeforeEach
    void load() {
        program = Program.load(TestPaths.demoModels().resolve("demo-portable/1/model.pte"),
                Program.Verification.INTERNAL_CONSISTENCY);
    }

    @AfterEach
    void close() {
        instances.forEach(ProgramInstance::close);
        program.close();
    }

    private List<ProgramInstance> newInstances(int n) {
        List<ProgramInstance> created = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            created.add(program.newInstance("forward"));
        }
        instances.addAll(created);
        return created;
    }

    @Test
    void twoModelsShareOneDevicesStreamsEachLimitedByItsInstances() throws Exception {
        StreamPool streams = new StreamPool(0, 4, 0, new OpaqueStreamFactory(List.of(0)), n -> {});
        GpuInstancePool a = new GpuInstancePool(streams, newInstances(1));
        GpuInstancePool b = new GpuInstancePool(streams, newInstances(1));

        try (ExecutionSlot sa = a.acquire(SHORT); ExecutionSlot sb = b.acquire(SHORT)) {
            assertThat(streams.leasedCount()).isEqualTo(2);
            assertThat(sa.selection().handle()).isNotEqualTo(sb.selection().handle());
            // a's one instance is busy: a waits and is refused, although two streams are idle
            assertThatThrownBy(() -> a.acquire(SHORT)).isInstanceOf(OverloadedException.class)
                    .hasMessageContaining("instances");
            assertThat(streams.leasedCount()).isEqualTo(2);
        }
        assertThat(streams.leasedCount()).isZero();
        assertThat(streams.idleCount()).isEqualTo(4);
        streams.close();
    }

    @Test
    void moreInstancesThanStreamsWaitForAStreamAndGiveTheInstanceBack() throws Exception {
        StreamPool streams = new StreamPool(0, 1, 0, new OpaqueStreamFactory(List.of(0)), n -> {});
        GpuInstancePool pool = new GpuInstancePool(streams, newInstances(2));
        assertThat(pool.capacity()).isEqualTo(2);

        Set<ProgramInstance> used = new HashSet<>();
        try (ExecutionSlot first = pool.acquire(SHORT)) {
            used.add(first.instance());
            // the second instance is free, the only stream is not: refused after the wait
            assertThatThrownBy(() -> pool.acquire(SHORT)).isInstanceOf(OverloadedException.class);
        }
        // the refused call gave its instance back: both instances serve calls on the one stream
        for (int i = 0; i < 4; i++) {
            try (ExecutionSlot s = pool.acquire(SHORT)) {
                used.add(s.instance());
                assertThat(streams.leasedCount()).isEqualTo(1);
            }
        }
        assertThat(used).hasSize(2);
        streams.close();
    }

    @Test
    void aFaultedDeviceRefusesWithTheReasonAndKeepsNothing() throws Exception {
        StreamPool streams = new StreamPool(0, 2, 0, new OpaqueStreamFactory(List.of(0)), n -> {});
        GpuInstancePool pool = new GpuInstancePool(streams, newInstances(1));
        streams.markFaulted("cudaErrorIllegalAddress");
        assertThatThrownBy(() -> pool.acquire(SHORT)).isInstanceOf(ModelUnavailableException.class)
                .hasMessageContaining("device 0 is faulted");
        assertThat(pool.unavailableReason()).hasValueSatisfying(r -> assertThat(r).contains("IllegalAddress"));
        assertThat(streams.leasedCount()).isZero();
        streams.close();
    }

    @Test
    void closingOnAHungDeviceLeavesTheInstancesToTheProcessExitAndOnlyThere() throws Exception {
        // Freeing a Module frees device memory, which waits for the device's work: on a device
        // taken as hung that work may never end. A sticky fault fails such calls at once: freed.
        StreamPool hung = new StreamPool(0, 2, 0, new OpaqueStreamFactory(List.of(0)), n -> {});
        List<ProgramInstance> held = newInstances(1);
        GpuInstancePool pool = new GpuInstancePool(hung, held);
        hung.markHung("the GPU work did not complete within 500 ms");
        pool.close();
        assertThat(held.get(0).stats()).as("not freed").isNotNull();

        StreamPool faulted = new StreamPool(0, 2, 0, new OpaqueStreamFactory(List.of(0)), n -> {});
        List<ProgramInstance> freed = newInstances(1);
        faulted.markFaulted("cudaErrorIllegalAddress");
        new GpuInstancePool(faulted, freed).close();
        assertThatThrownBy(() -> freed.get(0).stats()).isInstanceOf(ProgramInstance.InstanceClosedException.class);
        hung.close();
        faulted.close();
    }

    @Test
    void severalDevicesAskedWithoutATimeoutNeverWaitForTheLastOne() throws Exception {
        StreamPool zero = new StreamPool(0, 1, 0, new OpaqueStreamFactory(List.of(0)), n -> {});
        StreamPool one = new StreamPool(1, 1, 0, new OpaqueStreamFactory(List.of(1)), n -> {});
        MultiDeviceInstancePool pool = new MultiDeviceInstancePool(
                List.of(new GpuInstancePool(zero, newInstances(1)), new GpuInstancePool(one, newInstances(1))));
        try (ExecutionSlot a = pool.acquire(SHORT); ExecutionSlot b = pool.acquire(SHORT)) {
            assertThat(a.instance()).isNotSameAs(b.instance());
            // Both busy: a zero timeout is refused without waiting in any device's line (a wait
            // there, even the 2 ms poll of the last device, starts by announcing its waiter).
            AtomicInteger waits = new AtomicInteger();
            LeaseQueue.Abandon counting = new LeaseQueue.Abandon() {
                @Override
                public void watching(Thread waiter) {
                    waits.incrementAndGet();
                }

                @Override
                public boolean abandoned() {
                    return false;
                }
            };
            for (int i = 0; i < 100; i++) {
                assertThatThrownBy(() -> pool.acquire(Duration.ZERO, counting)).isInstanceOf(OverloadedException.class);
            }
            assertThat(waits).as("lines waited in with a zero timeout").hasValue(0);
            assertThatThrownBy(() -> pool.acquire(Duration.ofMillis(5), counting)).isInstanceOf(OverloadedException.class);
            assertThat(waits.get()).as("a timeout of 5 ms does wait (what the count above would have seen)").isPositive();
        }
        try (ExecutionSlot free = pool.acquire(Duration.ZERO)) {
            assertThat(free).isNotNull();
        }
        zero.close();
        one.close();
    }
}
