package io.etserve.execution;

import io.etserve.inference.ModelDescription;
import io.etserve.inference.TensorMetadata;
import io.etserve.modelconfig.ModelConfig;
import io.etserve.runtime.MethodSignature;
import io.etserve.runtime.Program;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.LoggerFactory;

/**
 * One model version that serves: its program, its description, its instances (always some),
 * its per-request limit and, when its config.yml asks for it, its batcher. Closing it runs what
 * is queued for a batch, then frees the instances and the program.
 */
public final class LoadedModel implements AutoCloseable {

    private final ModelDescription description;
    private final Program program;
    private volatile Runnable deleteFiles;
    private final InstancePool instances;
    private final long maxElementsPerTensor;
    private final DynamicBatcher batcher;
    private final ModelConfig config;
    private final boolean staticInputs;
    private final TensorContract.DeclaredOutputs declaredOutputs;
    /** Requests using this model now; {@link #RETIRING} set once it is being unloaded. */
    private final AtomicLong uses = new AtomicLong();
    private static final long RETIRING = 1L << 62;
    private static final AtomicLong LOADS = new AtomicLong();
    /** Which load made it: a version loaded again (files changed, a reload) is a later one. */
    private final long load = LOADS.incrementAndGet();
    /** Told once it is freed (the registry removes its metric series then). */
    private volatile Runnable onFreed;
    /** Set once an unload stopped waiting for its requests: the last one to end frees it. */
    private volatile boolean freeWhenIdle;
    private final AtomicBoolean freed = new AtomicBoolean();
    /** A moving average of its unbatched forward calls (1/8 weight to the latest); MAX until one ran. */
    private volatile long typicalForwardNanos = Long.MAX_VALUE;

    /**
     * @param batcher joins this model's requests into batches, or null when it runs each alone
     * @param config the configuration it was loaded with (config.yml, and a load's override)
     */
    public LoadedModel(ModelDescription description, Program program, InstancePool instances,
            long maxElementsPerTensor, DynamicBatcher batcher, ModelConfig config) {
        this.config = Objects.requireNonNull(config, "config");
        this.description = Objects.requireNonNull(description, "description");
        this.program = Objects.requireNonNull(program, "program");
        this.instances = Objects.requireNonNull(instances, "instances");
        this.maxElementsPerTensor = maxElementsPerTensor;
        this.batcher = batcher;
        this.staticInputs = description.inputs().stream()
                .allMatch(t -> Arrays.stream(t.shape()).allMatch(d -> d >= 0));
        this.declaredOutputs = TensorContract.DeclaredOutputs.of(description);
    }

    /** Its outputs' names, for requests that name none (built once, not per request). */
    TensorContract.DeclaredOutputs declaredOutputs() {
        return declaredOutputs;
    }

    /**
     * Whether a forward call's input shapes are the caller's own: some input has a dynamic
     * dimension (a static one is checked before the call) and no batcher joins requests into
     * shapes of the server's making. Then a delegate that cannot carry them through the program
     * answers the caller's mistake, not a failure of the model.
     */
    public boolean shapesAreTheCallers() {
        return !staticInputs && batcher == null;
    }

    /** Whether every input has a static shape: its forward calls then take about the same time. */
    public boolean hasStaticInputs() {
        return staticInputs;
    }

    public ModelDescription description() {
        return description;
    }

    /**
     * Which load made this model, increasing across the process: of two models of one name and
     * version (one still draining as its reload takes over), the greater is the newer.
     */
    public long load() {
        return load;
    }

    public String name() {
        return description.name();
    }

    public String version() {
        return description.version();
    }

    public MethodSignature signature() {
        return description.signature();
    }

    public List<TensorMetadata> inputs() {
        return description.inputs();
    }

    public List<TensorMetadata> outputs() {
        return description.outputs();
    }

    /** Records an unbatched forward call's time (racy updates lose a sample at worst). */
    void forwardTook(long nanos) {
        long typical = typicalForwardNanos;
        typicalForwardNanos = typical == Long.MAX_VALUE ? nanos : typical + ((nanos - typical) >> 3);
    }

    /** How long its unbatched forward calls take lately; {@link Long#MAX_VALUE} before the first. */
    public long typicalForwardNanos() {
        return typicalForwardNanos;
    }

    public InstancePool instances() {
        return instances;
    }

    public long maxElementsPerTensor() {
        return maxElementsPerTensor;
    }

    /** The configuration it was loaded with: config.yml, with a load request's override applied. */
    public ModelConfig config() {
        return config;
    }

    /** The model's batcher, when its config.yml asks for dynamic batching. */
    public Optional<DynamicBatcher> batcher() {
        return Optional.ofNullable(batcher);
    }

    /**
     * Takes a use of this model for one request; false once it is being unloaded (the request
     * then goes elsewhere or is refused, it never runs on a model that is closing).
     */
    public boolean tryUse() {
        while (true) {
            long s = uses.get();
            if ((s & RETIRING) != 0) {
                return false;
            }
            if (uses.compareAndSet(s, s + 1)) {
                return true;
            }
        }
    }

    /** Gives back a use taken by {@link #tryUse()}. */
    public void release() {
        if (uses.decrementAndGet() == RETIRING) {
            synchronized (uses) {
                uses.notifyAll();
            }
            if (freeWhenIdle) {
                freeElsewhere();  // the last request of a model whose unload stopped waiting for it
            }
        }
    }

    /**
     * Unloads it: no new use from now on; the requests using it finish (at most {@code timeout};
     * a batcher's queue goes at once), then its batcher, instances and program are freed. A model
     * still in use after the timeout is freed by its last request as it ends, never under running
     * native work.
     *
     * @return whether it drained and was freed within the timeout
     */
    public boolean retire(Duration timeout) throws InterruptedException {
        long s;
        do {
            s = uses.get();
        } while ((s & RETIRING) == 0 && !uses.compareAndSet(s, s | RETIRING));
        if (batcher != null) {
            batcher.flush();
        }
        long deadline = System.nanoTime() + timeout.toNanos();
        synchronized (uses) {
            try {
                while (uses.get() != RETIRING) {
                    long left = deadline - System.nanoTime();
                    if (left <= 0) {
                        return !stopWaiting();
                    }
                    uses.wait(Math.max(1, left / 1_000_000));
                }
            } catch (InterruptedException e) {
                stopWaiting();
                throw e;
            }
        }
        close();
        return true;
    }

    /**
     * The unload waits no more: the last request frees it, or this thread if none is left (the
     * last one ended as the wait did, and no release will). Whether requests were still running.
     */
    private boolean stopWaiting() {
        freeWhenIdle = true;
        if (uses.get() == RETIRING) {
            close();
            return false;
        }
        return true;
    }

    /**
     * Frees it on a thread of its own, not the last request's: freeing joins the batcher, waits
     * for device memory and deletes files, which that request's answer must not wait for.
     */
    private void freeElsewhere() {
        Thread t = new Thread(() -> {
            try {
                close();
            } catch (RuntimeException e) {
                LoggerFactory.getLogger(LoadedModel.class).warn("model {} version {}: freeing it failed: {}",
                        name(), version(), e.toString());
            }
        }, "etserve-free-" + name());
        t.setDaemon(true);
        t.start();
    }

    /** Runs {@code action} once this model is freed, on the thread that frees it. */
    public void onFreed(Runnable action) {
        this.onFreed = action;
    }

    /** Requests using it now. */
    public long inUse() {
        return uses.get() & ~RETIRING;
    }

    /** Deletes the files the program was loaded from (its private copy) once the program is freed. */
    public void deleteOnClose(Runnable deleteFiles) {
        this.deleteFiles = deleteFiles;
    }

    /** Frees its batcher, instances and program, once. */
    @Override
    public void close() {
        if (!freed.compareAndSet(false, true)) {
            return;
        }
        if (batcher != null) {
            batcher.close();
        }
        try {
            instances.close();
            program.close();
            if (deleteFiles != null) {
                deleteFiles.run();
            }
        } finally {
            Runnable freedHook = onFreed;
            if (freedHook != null) {
                freedHook.run();
            }
        }
    }
}
