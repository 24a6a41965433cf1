package io.etserve.cuda;

import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.bytedeco.cuda.cudart.CUmemPoolHandle_st;
import org.bytedeco.cuda.cudart.cudaDeviceProp;
import org.bytedeco.cuda.global.cudart;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Loader;
import org.bytedeco.javacpp.LongPointer;
import org.bytedeco.javacpp.SizeTPointer;

/**
 * The host's CUDA runtime through JavaCPP, probed once. Without a driver or a device the
 * probe reports why ({@link #unavailableReason()}) and the service runs CPU-only.
 */
public final class CudaRuntime {

    /**
     * One visible device. Memory values are read when asked: see {@link #memory(int)}. {@code uuid}
     * is written as nvidia-smi and Triton's {@code gpu_uuid} label write it ({@code GPU-8-4-4-4-12}
     * lowercase hex).
     */
    public record Device(int ordinal, String name, int computeMajor, int computeMinor, long totalMemory,
            String uuid) {

        /**
         * As a record's would read; written out because a record's generated {@code toString}
         * bootstraps at its first call, on a start's main thread, which logs the devices
         * (bench/results/2026-12-05-h100-startup-tensorrt.md).
         */
        @Override
        public String toString() {
            return "Device[ordinal=" + ordinal + ", name=" + name + ", computeMajor=" + computeMajor
                    + ", computeMinor=" + computeMinor + ", totalMemory=" + totalMemory + ", uuid=" + uuid + "]";
        }
    }

    public record Memory(long free, long total) {}

    private final boolean available;
    private final String unavailableReason;
    private final int driverVersion;
    private final int runtimeVersion;
    private final List<Device> devices;

    CudaRuntime(boolean available, String reason, int driver, int runtime, List<Device> devices) {
        this.available = available;
        this.unavailableReason = reason;
        this.driverVersion = driver;
        this.runtimeVersion = runtime;
        this.devices = List.copyOf(devices);
    }

    /**
     * The runtime the service uses: what {@link CudaEarlyStart} started while the context was
     * being built, or a probe now.
     */
    public static CudaRuntime started() {
        return CudaEarlyStart.takeOrProbe();
    }

    /** Loads JavaCPP's CUDA bindings and lists devices; never throws. */
    public static CudaRuntime probe() {
        try {
            Loader.load(cudart.class);
        } catch (UnsatisfiedLinkError | NoClassDefFoundError | ExceptionInInitializerError e) {
            return unavailable("CUDA runtime not loadable (no driver or libcudart.so.13 on this host): "
                    + rootMessage(e));
        }
        try {
            int[] count = {0};
            int rc = cudart.cudaGetDeviceCount(count);
            int[] driver = {0};
            int[] runtime = {0};
            cudart.cudaDriverGetVersion(driver);
            cudart.cudaRuntimeGetVersion(runtime);
            if (rc != 0) {
                return new CudaRuntime(false, "cudaGetDeviceCount: " + errorName(rc), driver[0], runtime[0], List.of());
            }
            if (count[0] == 0) {
                return new CudaRuntime(false, "no CUDA device visible", driver[0], runtime[0], List.of());
            }
            List<Device> devices = new ArrayList<>();
            for (int d = 0; d < count[0]; d++) {
                try (cudaDeviceProp prop = new cudaDeviceProp()) {
                    check("cudaGetDeviceProperties", cudart.cudaGetDeviceProperties(prop, d));
                    byte[] uuid = new byte[16];
                    new BytePointer(prop.uuid()).get(uuid);
                    devices.add(new Device(d, prop.name().getString(), prop.major(), prop.minor(),
                            prop.totalGlobalMem(), gpuUuid(uuid)));
                }
            }
            return new CudaRuntime(true, null, driver[0], runtime[0], devices);
        } catch (RuntimeException | UnsatisfiedLinkError e) {
            return unavailable("CUDA probe failed: " + rootMessage(e));
        }
    }

    /** A device's 16 UUID bytes as {@code GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx}. */
    static String gpuUuid(byte[] b) {
        if (b.length != 16) {
            throw new IllegalArgumentException("a device UUID has 16 bytes, not " + b.length);
        }
        StringBuilder s = new StringBuilder("GPU-");
        for (int i = 0; i < b.length; i++) {
            if (i == 4 || i == 6 || i == 8 || i == 10) {
                s.append('-');
            }
            s.append(Character.forDigit((b[i] >> 4) & 0xf, 16)).append(Character.forDigit(b[i] & 0xf, 16));
        }
        return s.toString();
    }

    public static CudaRuntime unavailable(String reason) {
        return new CudaRuntime(false, reason, 0, 0, List.of());
    }

    public boolean available() {
        return available;
    }

    public Optional<String> unavailableReason() {
        return Optional.ofNullable(unavailableReason);
    }

    public List<Device> devices() {
        return devices;
    }

    /** Driver API version as CUDA encodes it (1000 * major + 10 * minor), 0 when unknown. */
    public int driverVersion() {
        return driverVersion;
    }

    public int runtimeVersion() {
        return runtimeVersion;
    }

    public Memory memory(int device) {
        requireAvailable();
        synchronized (CudaRuntime.class) {
            check("cudaSetDevice", cudart.cudaSetDevice(device));
            try (SizeTPointer free = new SizeTPointer(1); SizeTPointer total = new SizeTPointer(1)) {
                check("cudaMemGetInfo", cudart.cudaMemGetInfo(free, total));
                return new Memory(free.get(), total.get());
            }
        }
    }

    /**
     * Prepares a device for serving: its {@link DeviceSchedule} (left as it is for
     * {@link DeviceSchedule#AUTO}), and a default memory pool that keeps what it frees. Delegates
     * that allocate stream-ordered memory per call (ExecuTorch's CUDA backend does, for every
     * intermediate tensor) would otherwise hand it back to the driver at each synchronize and map
     * it again on the next call.
     *
     * @return empty, or what could not be set (the device still serves)
     */
    public Optional<String> prepare(int device, DeviceSchedule schedule) {
        requireAvailable();
        synchronized (CudaRuntime.class) {
            check("cudaSetDevice", cudart.cudaSetDevice(device));
            StringBuilder problems = new StringBuilder();
            if (schedule != DeviceSchedule.AUTO) {
                int rc = cudart.cudaSetDeviceFlags(schedule.flag());
                if (rc != 0) {
                    problems.append("device schedule ").append(schedule).append(": ").append(errorName(rc));
                }
            }
            CUmemPoolHandle_st pool = new CUmemPoolHandle_st();
            int rc = cudart.cudaDeviceGetDefaultMemPool(pool, device);
            if (rc == 0) {
                try (LongPointer keepAll = new LongPointer(1)) {
                    keepAll.put(-1L);  // UINT64_MAX: never trim the pool on synchronize
                    rc = cudart.cudaMemPoolSetAttribute(pool, cudart.cudaMemPoolAttrReleaseThreshold, keepAll);
                }
            }
            if (rc != 0) {
                problems.append(problems.isEmpty() ? "" : "; ").append("memory pool release threshold: ")
                        .append(errorName(rc));
            }
            return problems.isEmpty() ? Optional.empty() : Optional.of(problems.toString());
        }
    }

    /** Priorities the device accepts: [least, greatest] (greatest is numerically lower). */
    public int[] priorityRange(int device) {
        requireAvailable();
        synchronized (CudaRuntime.class) {
            check("cudaSetDevice", cudart.cudaSetDevice(device));
            int[] least = {0};
            int[] greatest = {0};
            check("cudaDeviceGetStreamPriorityRange", cudart.cudaDeviceGetStreamPriorityRange(least, greatest));
            return new int[] {least[0], greatest[0]};
        }
    }

    private void requireAvailable() {
        if (!available) {
            throw new IllegalStateException("CUDA unavailable: " + unavailableReason);
        }
    }

    static void check(String call, int rc) {
        if (rc != 0) {
            clearLastError();
            throw new CudaException(call, rc, errorName(rc), cudart.cudaGetErrorString(rc).getString());
        }
    }

    /**
     * Resets the calling thread's last CUDA error after a failure this code reports itself:
     * left set, it would be the next check of a delegate's kernel launch on this thread (one
     * that asks {@code cudaGetLastError}), failing a call that did nothing wrong. A sticky error
     * stays whatever this does.
     */
    static void clearLastError() {
        cudart.cudaGetLastError();
    }

    static String errorName(int rc) {
        return cudart.cudaGetErrorName(rc).getString();
    }

    /** A CUDA version as {@code major.minor}, "unknown" for 0. */
    public static String versionString(int v) {
        return v == 0 ? "unknown" : (v / 1000) + "." + (v % 1000) / 10;
    }

    private static String rootMessage(Throwable e) {
        Throwable t = e;
        while (t.getCause() != null) {
            t = t.getCause();
        }
        return t.getMessage() == null ? t.getClass().getSimpleName() : t.getMessage();
    }
}
