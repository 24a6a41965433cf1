package io.etserve.support;

import io.etserve.cuda.LeaseQueue;
import io.etserve.cuda.StreamPool;
import io.etserve.execution.CpuInstancePool;
import io.etserve.execution.LoadedModel;
import io.etserve.repository.ModelRegistry;
import io.etserve.repository.ModelVersionState;
import java.util.concurrent.TimeUnit;

/**
 * Waits on what a served model shows rather than on time: a test that holds a model's instance
 * with a slow call goes on once the call holds it, however slow the machine.
 */
public final class ModelActivity {

    private static final long GUARD_NANOS = TimeUnit.SECONDS.toNanos(30);

    private ModelActivity() {}

    /**
     * Returns once none of {@code model}'s (latest version's) CPU instances is idle: the call
     * sent to hold it runs. Fails after a 30 s guard.
     */
    public static void awaitNoIdleInstance(ModelRegistry registry, String model) throws InterruptedException {
        LoadedModel loaded = ready(registry, model);
        long until = System.nanoTime() + GUARD_NANOS;
        while (loaded.instances().idleNow()) {
            if (System.nanoTime() - until > 0) {
                throw new AssertionError(model + ": no call took its instance within 30 s");
            }
            Thread.sleep(2);
        }
    }

    /** Returns once {@code pool} has {@code n} streams leased (GPU calls running); fails after a 30 s guard. */
    public static void awaitLeasedStreams(StreamPool pool, int n) throws InterruptedException {
        long until = System.nanoTime() + GUARD_NANOS;
        while (pool.leasedCount() != n) {
            if (System.nanoTime() - until > 0) {
                throw new AssertionError("device " + pool.device() + ": " + pool.leasedCount() + " streams leased, not " + n);
            }
            Thread.sleep(2);
        }
    }

    /**
     * Returns once a thread whose name starts with {@code threadNamePrefix} (a server's request
     * threads: other servers may share the JVM) waits in an instance line ({@code LeaseQueue.take},
     * parked): a request that found every instance held. Fails after a 30 s guard.
     */
    public static void awaitWaiterInInstanceLine(String threadNamePrefix) throws InterruptedException {
        long until = System.nanoTime() + GUARD_NANOS;
        while (!someoneWaitsInLine(threadNamePrefix)) {
            if (System.nanoTime() - until > 0) {
                throw new AssertionError("no thread waited in an instance line within 30 s");
            }
            Thread.sleep(2);
        }
    }

    private static boolean someoneWaitsInLine(String threadNamePrefix) {
        for (var thread : Thread.getAllStackTraces().entrySet()) {
            if (!thread.getKey().getName().startsWith(threadNamePrefix)) {
                continue;
            }
            boolean parked = false;
            for (StackTraceElement frame : thread.getValue()) {
                parked |= frame.getClassName().equals("java.util.concurrent.locks.LockSupport");
                if (parked && frame.getClassName().equals(LeaseQueue.class.getName()) && frame.getMethodName().equals("take")) {
                    return true;
                }
            }
        }
        return false;
    }

    /** Whether one of {@code model}'s CPU instances is idle now. */
    public static boolean idleNow(ModelRegistry registry, String model) {
        return ready(registry, model).instances().idleNow();
    }

    private static LoadedModel ready(ModelRegistry registry, String model) {
        if (!(registry.resolve(model, null) instanceof ModelVersionState.Ready ready)) {
            throw new AssertionError(model + " is not being served: " + registry.resolve(model, null));
        }
        if (!(ready.model().instances() instanceof CpuInstancePool)) {
            // Only a CPU pool knows it is idle (InstancePool.idleNow): anything else would read busy.
            throw new AssertionError(model + " does not run on CPU instances: " + ready.model().instances().placement());
        }
        return ready.model();
    }
}
