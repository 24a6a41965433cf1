package io.etserve.cuda;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Function;
import java.util.function.Supplier;
import org.bytedeco.cuda.global.cudart;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.boot.context.event.ApplicationEnvironmentPreparedEvent;
import org.springframework.boot.support.EnvironmentPostProcessorApplicationListener;
import org.springframework.context.ApplicationListener;
import org.springframework.core.Ordered;
import org.springframework.core.env.Environment;

/**
 * Starts CUDA, then probes TensorRT, while Spring builds the context. Loading the CUDA bindings,
 * initializing the driver and creating each device's primary context take hundreds of
 * milliseconds on a GPU host, loading TensorRT's bindings and library more,
 * and none of it depends on anything in the context, so they run on their own thread from the
 * moment the configuration is known; the {@link CudaRuntime} bean then takes CUDA's result and
 * the {@link TensorRtProbe} bean TensorRT's (each probes itself when this did not run). Both are
 * loaded through JavaCPP, whose class initializers take its loader's lock, so they run on this one
 * thread, and the {@code CudaRuntime} bean waits for both before the context uses JavaCPP itself:
 * two threads initializing JavaCPP classes at once can deadlock. Registered in
 * {@code META-INF/spring.factories}; {@code etserve.cuda.early-start=false} turns it off.
 */
public final class CudaEarlyStart implements ApplicationListener<ApplicationEnvironmentPreparedEvent>, Ordered {

    private static final Logger log = LoggerFactory.getLogger(CudaEarlyStart.class);
    /** The early start, until the CudaRuntime bean takes it; then one that has ended with nothing to give. */
    private static final AtomicReference<Run> started = new AtomicReference<>();
    /** TensorRT's probe from the early start the CudaRuntime bean took, until the TensorRtProbe bean takes it. */
    private static final AtomicReference<TensorRtProbe> probedTensorRt = new AtomicReference<>();

    /**
     * As soon as the configuration files are read (Boot's listener at +10), before the other
     * listeners' work on the main thread: a faster start reached the context's use of CUDA
     * while this thread was still starting it (bench/results/2026-12-05-startup-probe-warmup.md).
     */
    @Override
    public int getOrder() {
        return EnvironmentPostProcessorApplicationListener.DEFAULT_ORDER + 1;
    }

    @Override
    public void onApplicationEvent(ApplicationEnvironmentPreparedEvent event) {
        if (!wanted(event.getEnvironment()) || Boolean.getBoolean("spring.aot.processing")) {
            return;
        }
        Run run = new Run();
        if (!started.compareAndSet(null, run)) {
            return;  // a second application in this JVM (tests): the first one's start stands
        }
        Thread thread = new Thread(() -> run.run(CudaEarlyStart::startCuda, cuda -> TensorRtProbe.probe()),
                "cuda-early-start");
        thread.setDaemon(true);
        thread.start();
    }

    /** Off when CUDA is disabled or {@code etserve.cuda.early-start=false}. */
    static boolean wanted(Environment env) {
        return !"false".equalsIgnoreCase(env.getProperty("etserve.cuda.enabled", "auto"))
                && env.getProperty("etserve.cuda.early-start", Boolean.class, true);
    }

    /**
     * Waits for CUDA's early start, if one runs, without taking its result: what loads CUDA's
     * runtime after it ({@code NativeEarlyLoad}) then finds the one JavaCPP's bindings loaded, as
     * when it loaded inside the context, seconds later. (It need not wait for TensorRT's probe:
     * it loads no JavaCPP classes.)
     */
    public static void awaitEarlyStart() {
        Run run = started.get();
        if (run != null) {
            run.cuda.exceptionally(failed -> null).join();
        }
    }

    /**
     * The early start's CUDA, once, after its TensorRT probe has ended too: later callers
     * (another context in the same JVM) probe again, which is cheap once the driver is up.
     */
    static CudaRuntime takeOrProbe() {
        Run run = started.getAndSet(Run.ENDED);
        if (run == null) {
            return CudaRuntime.probe();
        }
        long t0 = System.nanoTime();
        CudaRuntime early = run.cuda.exceptionally(failed -> null).join();
        probedTensorRt.set(run.tensorRt.exceptionally(failed -> null).join());
        log.debug("the context waited {} ms for CUDA's early start and TensorRT's probe",
                (System.nanoTime() - t0) / 1_000_000);
        return early != null ? early : CudaRuntime.probe();
    }

    /** TensorRT's probe from the early start whose CUDA the context took, once; else a probe now. */
    static TensorRtProbe takeTensorRtOrProbe() {
        TensorRtProbe early = probedTensorRt.getAndSet(null);
        return early != null ? early : TensorRtProbe.probe();
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
        log.debug("CUDA started early in {} ms (available: {})", (System.nanoTime() - t0) / 1_000_000,
                cuda.available());
        return cuda;
    }

    /** One early start: CUDA, then (where CUDA is available) TensorRT's probe, on one thread. */
    static final class Run {

        static final Run ENDED = new Run();

        static {
            ENDED.cuda.complete(null);
            ENDED.tensorRt.complete(null);
        }

        final CompletableFuture<CudaRuntime> cuda = new CompletableFuture<>();
        /** Null when CUDA is unavailable: TensorRT needs it, and is not probed. */
        final CompletableFuture<TensorRtProbe> tensorRt = new CompletableFuture<>();

        void run(Supplier<CudaRuntime> startCuda, Function<CudaRuntime, TensorRtProbe> probeTensorRt) {
            CudaRuntime up = null;
            try {
                up = startCuda.get();
                cuda.complete(up);
            } catch (Throwable e) {
                cuda.completeExceptionally(e);  // the bean probes again, and reports what it finds
            }
            try {
                long t0 = System.nanoTime();
                TensorRtProbe probe = up != null && up.available() ? probeTensorRt.apply(up) : null;
                if (probe != null) {
                    log.debug("TensorRT probed early in {} ms (available: {})", (System.nanoTime() - t0) / 1_000_000,
                            probe.available());
                }
                tensorRt.complete(probe);
            } catch (Throwable e) {
                tensorRt.completeExceptionally(e);  // the bean probes again
            }
        }
    }
}
