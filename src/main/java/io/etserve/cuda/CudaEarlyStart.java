package io.etserve.cuda;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicReference;
import org.bytedeco.cuda.global.cudart;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.boot.context.event.ApplicationEnvironmentPreparedEvent;
import org.springframework.context.ApplicationListener;
import org.springframework.core.env.Environment;

/**
 * Starts CUDA while Spring builds the context. Loading the CUDA bindings, initializing the
 * driver and creating each device's primary context take hundreds of milliseconds on a GPU
 * host and depend on nothing in the context, so they run on their own thread from the moment
 * the configuration is known; the {@link CudaRuntime} bean then takes the result (or probes
 * itself when this did not run). Registered in {@code META-INF/spring.factories};
 * {@code etserve.cuda.early-start=false} turns it off.
 */
public final class CudaEarlyStart implements ApplicationListener<ApplicationEnvironmentPreparedEvent> {

    private static final Logger log = LoggerFactory.getLogger(CudaEarlyStart.class);
    private static final AtomicReference<CompletableFuture<CudaRuntime>> started = new AtomicReference<>();

    @Override
    public void onApplicationEvent(ApplicationEnvironmentPreparedEvent event) {
        if (!wanted(event.getEnvironment()) || Boolean.getBoolean("spring.aot.processing")) {
            return;
        }
        CompletableFuture<CudaRuntime> future = new CompletableFuture<>();
        if (!started.compareAndSet(null, future)) {
            return;  // a second application in this JVM (tests): the first one's start stands
        }
        Thread thread = new Thread(() -> {
            try {
                future.complete(startCuda());
            } catch (Throwable e) {
                future.completeExceptionally(e);  // the bean probes again, and reports what it finds
            }
        }, "cuda-early-start");
        thread.setDaemon(true);
        thread.start();
    }

    /** Off when CUDA is disabled or {@code etserve.cuda.early-start=false}. */
    static boolean wanted(Environment env) {
        return !"false".equalsIgnoreCase(env.getProperty("etserve.cuda.enabled", "auto"))
                && env.getProperty("etserve.cuda.early-start", Boolean.class, true);
    }

    /**
     * Waits for the early start, if one runs, without taking its result: what loads CUDA's runtime
     * after it ({@code NativeEarlyLoad}) then finds the one JavaCPP's bindings loaded, as when it
     * loaded inside the context, seconds later.
     */
    public static void awaitEarlyStart() {
        CompletableFuture<CudaRuntime> future = started.get();
        if (future != null) {
            future.exceptionally(failed -> null).join();
        }
    }

    /**
     * The early start's result, once: later callers (another context in the same JVM) probe
     * again, which is cheap once the driver is up.
     */
    static CudaRuntime takeOrProbe() {
        CompletableFuture<CudaRuntime> future = started.getAndSet(CompletableFuture.completedFuture(null));
        if (future == null) {
            return CudaRuntime.probe();
        }
        long t0 = System.nanoTime();
        CudaRuntime early = future.exceptionally(failed -> null).join();
        log.debug("the context waited {} ms for CUDA's early start", (System.nanoTime() - t0) / 1_000_000);
        return early != null ? early : CudaRuntime.probe();
    }

    private static CudaRuntime startCuda() {
        long t0 = System.nanoTime();
        CudaRuntime cuda = CudaRuntime.probe();
        if (cuda.available()) {
            // cudaFree(0) creates the device's primary context, which streams and Modules need.
            for (CudaRuntime.Device d : cuda.devices()) {
                synchronized (CudaRuntime.class) {
                    if (cudart.cudaSetDevice(d.ordinal()) == 0) {
                        cudart.cudaFree(null);
                    }
                }
            }
        }
        log.debug("CUDA started early in {} ms (available: {})", (System.nanoTime() - t0) / 1_000_000, cuda.available());
        return cuda;
    }
}
