package io.etserve.execution;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.cuda.StreamPool;
import io.etserve.inference.Caller;
import io.etserve.runtime.Program;
import io.etserve.runtime.ProgramInstance;
import io.etserve.support.ModelActivity;
import io.etserve.support.OpaqueStreamFactory;
import io.etserve.support.TestPaths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * A model's instances on two devices (real Modules, opaque stream handles): how a caller waits
 * when every instance is busy or one device is faulted.
 */
class MultiDeviceInstancePoolTest {

    private static final Duration LONG = Duration.ofSeconds(60);

    private Program program;
    private final List<ProgramInstance> instances = new ArrayList<>();
    private final List<StreamPool> streams = new ArrayList<>();
    private final ExecutorService callers = Executors.newCachedThreadPool(r -> new Thread(r, "multi-device-caller"));

    @BeforeEach
    void load() {
        program = Program.load(TestPaths.demoModels().resolve("demo-portable/1/model.pte"),
                Program.Verification.INTERNAL_CONSISTENCY);
    }

    @AfterEach
    void close() throws InterruptedException {
        callers.shutdownNow();
        callers.awaitTermination(30, TimeUnit.SECONDS);
        instances.forEach(ProgramInstance::close);
        streams.forEach(StreamPool::close);
        program.close();
    }

    private GpuInstancePool device(int device) {
        StreamPool pool = new StreamPool(device, 2, 0, new OpaqueStreamFactory(List.of(device)), n -> {});
        streams.add(pool);
        ProgramInstance instance = program.newInstance("forward");
        instances.add(instance);
        return new GpuInstancePool(pool, List.of(instance));
    }

    @Test
    void anHttpClientThatLeavesWhileEveryDeviceIsBusyIsWatchedAndLeavesTheLine() throws Exception {
        GpuInstancePool zero = device(0);
        GpuInstancePool one = device(1);
        MultiDeviceInstancePool pool = new MultiDeviceInstancePool(List.of(zero, one));
        AtomicInteger watches = new AtomicInteger();
        // An HTTP client: gone only once watched (it closed its connection), never known otherwise.
        Caller closedItsConnection = gone -> {
            watches.incrementAndGet();
            gone.run();
            return () -> {};
        };
        try (ExecutionSlot held0 = zero.acquire(Duration.ZERO); ExecutionSlot held1 = one.acquire(Duration.ZERO)) {
            Cancellation cancellation = Cancellation.of(closedItsConnection, Map.of(), System.nanoTime());
            // Each device is polled for 2 ms at a time; the caller must still be watched once it
            // has waited as long in all, and leave (null) instead of waiting out the minute.
            CompletableFuture<ExecutionSlot> waited = CompletableFuture.supplyAsync(() -> {
                try {
                    return pool.acquire(LONG, cancellation);
                } catch (InterruptedException e) {
                    throw new IllegalStateException(e);
                }
            }, callers);
            assertThat(waited.get(30, TimeUnit.SECONDS)).isNull();
            assertThat(watches).hasValue(1);
        }
    }

    @Test
    void aCallerWhoseTurnEndsOnAFaultedDeviceWaitsInTheHealthyDevicesLine() throws Exception {
        GpuInstancePool zero = device(0);
        GpuInstancePool one = device(1);
        MultiDeviceInstancePool pool = new MultiDeviceInstancePool(List.of(zero, one));
        streams.get(1).markFaulted("an illegal address");
        try (ExecutionSlot held = zero.acquire(Duration.ZERO)) {
            // The first caller's turn starts on device 0 and ends on device 1, the faulted one:
            // it must wait in device 0's line (parked there), not ask both devices in a loop.
            CompletableFuture<ExecutionSlot> waited = CompletableFuture.supplyAsync(() -> {
                try {
                    return pool.acquire(LONG);
                } catch (InterruptedException e) {
                    throw new IllegalStateException(e);
                }
            }, callers);
            ModelActivity.awaitWaiterInInstanceLine("multi-device-caller");
            held.close();
            try (ExecutionSlot slot = waited.get(30, TimeUnit.SECONDS)) {
                assertThat(slot.selection().device()).isZero();
            }
        }
    }
}
