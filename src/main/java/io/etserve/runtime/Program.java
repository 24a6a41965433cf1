package io.etserve.runtime;

import java.nio.file.Path;
import java.util.List;
import java.util.Objects;

/**
 * A loaded ExecuTorch program ({@code .pte}), memory-mapped and verified. Thread-safe: many
 * {@link ProgramInstance}s share it, one per concurrent worker.
 *
 * <p>Closing releases the Java handle; native memory goes once the last instance is closed
 * too, since instances keep the shared program alive.
 */
public final class Program implements AutoCloseable {

    /** How thoroughly ExecuTorch checks the file before trusting it. */
    public enum Verification {
        MINIMAL,
        INTERNAL_CONSISTENCY
    }

    private final Path path;
    private final Object lock = new Object();
    private long handle;

    private Program(Path path, long handle) {
        this.path = path;
        this.handle = handle;
    }

    /** Loads a program; throws {@link ExecuTorchException} for a missing, corrupt or foreign file. */
    public static Program load(Path path, Verification verification) {
        return load(path, verification, List.of());
    }

    /**
     * Loads a program whose methods read named data (external constants) from {@code dataFiles}
     * (.ptd): each file is mapped once and shared by every instance.
     */
    public static Program load(Path path, Verification verification, List<Path> dataFiles) {
        NativeRuntime.fixCpuThreads();  // loads the libraries first when they are not yet
        Objects.requireNonNull(path, "path");
        String[] files = dataFiles.stream().map(p -> p.toAbsolutePath().toString()).toArray(String[]::new);
        long handle = NativeBridge.openProgram(path.toAbsolutePath().toString(), verification.ordinal(), files);
        return new Program(path, handle);
    }

    public Path path() {
        return path;
    }

    public List<String> methodNames() {
        synchronized (lock) {
            return List.of(NativeBridge.methodNames(live()));
        }
    }

    public MethodSignature signature(String method) {
        synchronized (lock) {
            long h = live();
            return MethodSignature.decode(method, NativeBridge.methodSignature(h, method),
                    NativeBridge.methodBackends(h, method));
        }
    }

    /** A new CPU instance over this program with {@code method} loaded (planned memory allocated now). */
    public ProgramInstance newInstance(String method) {
        return newInstance(method, -1);
    }

    /**
     * A new instance over this program with {@code method} loaded on CUDA {@code device} (-1: the
     * CPU): its delegates initialize there, its planned host memory is page-locked and the buffers
     * the program plans on the device are allocated there.
     */
    public ProgramInstance newInstance(String method, int device) {
        return newInstance(method, device, true);
    }

    /**
     * {@link #newInstance(String, int)}, choosing whether the method's CPU operators (XNNPACK's,
     * the optimized kernels') split their work over ExecuTorch's CPU threadpool or run on the
     * thread that calls {@link ProgramInstance#execute}. Without the pool, a small model's call
     * wakes no other thread and takes no pool lock: on a host with few cores that costs more than
     * such operators (bench/results/2026-12-07-2core-caller-thread-only.md).
     */
    public ProgramInstance newInstance(String method, int device, boolean cpuThreadpool) {
        synchronized (lock) {
            MethodSignature signature = signature(method);
            long instance = NativeBridge.openInstance(live(), method, device, !cpuThreadpool);
            try {
                signature = signature.withDynamism(NativeBridge.instanceSignature(instance));
            } catch (RuntimeException e) {
                NativeBridge.closeInstance(instance);
                throw e;
            }
            return new ProgramInstance(instance, signature, cpuThreadpool);
        }
    }

    private long live() {
        if (handle == 0) {
            throw new IllegalStateException("program " + path + " is closed");
        }
        return handle;
    }

    @Override
    public void close() {
        synchronized (lock) {
            if (handle != 0) {
                NativeBridge.closeProgram(handle);
                handle = 0;
            }
        }
    }
}
