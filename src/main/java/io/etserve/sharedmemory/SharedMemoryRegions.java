package io.etserve.sharedmemory;

import io.etserve.cuda.ImportedDeviceMemory;
import io.etserve.execution.FaultListener;
import io.etserve.inference.InferenceRequest;
import io.etserve.inference.InferenceResponse;
import io.etserve.inference.InvalidInputException;
import io.etserve.inference.OutputDelivery;
import io.etserve.inference.SharedMemoryReference;
import io.etserve.inference.Tensor;
import io.etserve.inference.UntrustedText;
import io.etserve.protocol.SharedMemoryInputs;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.IntFunction;
import java.util.function.Predicate;

/**
 * Triton's shared-memory extensions: regions a client on the same host registers by name, so
 * that large inputs and outputs skip the socket. A system region is part of a POSIX
 * shared-memory object ({@link SystemRegion}); a CUDA region is device memory the client
 * allocated and exported as a CUDA IPC handle ({@link CudaRegion}). One name is one region of
 * one kind. An input that names a region is read from it ({@link #read}); an output asked for
 * in a region is written there ({@link #deliver}) and the answer carries only its name, datatype
 * and shape.
 *
 * <p>A system region is read and written with positional reads and writes on its object's file
 * ({@code pread}/{@code pwrite} under {@code /dev/shm}), never mapped: a client that truncates
 * its object under a mapping would fault the reading thread (SIGBUS; in native code, the
 * process), where a read past the end is a short read, answered as the client's error. A CUDA
 * region is bounded by its allocation, which the driver reports when the handle is opened.
 * Inputs of both kinds are copied into the request's own buffers, so a client that writes the
 * region again while its request runs cannot change the tensor under the model.
 *
 * <p>A region unregistered while requests use it stays open until the last of them is done.
 * Registration is off unless {@code etserve.shared-memory.enabled} (as Triton's
 * {@code --allow-client-shm}): any client that reaches the port could otherwise read and write
 * every shared-memory object the service's user may open, and the device memory of any process
 * whose IPC handles it learns. Thread-safe.
 */
public final class SharedMemoryRegions implements SharedMemoryInputs, OutputDelivery, AutoCloseable {

    /** Where glibc's {@code shm_open(3)} keeps POSIX shared-memory objects. */
    public static final Path POSIX_SHARED_MEMORY = Path.of("/dev/shm");

    /** Longest region name and key: a file name's limit. */
    static final int MAX_NAME_LENGTH = 255;

    /** Why a registration is refused while {@code etserve.shared-memory.enabled} is false. */
    public static final String REGISTRATION_OFF = "Client shared memory is off: start the server with"
            + " etserve.shared-memory.enabled=true to register regions.";

    /** A registered system region as the status calls list it. */
    public record Status(String name, String key, long offset, long byteSize) {}

    /** A registered CUDA region as the status calls list it. */
    public record CudaStatus(String name, int deviceId, long byteSize) {}

    private final Path directory;
    private final boolean registrationEnabled;
    private final int maxRegions;
    private final long maxBytesPerRequest;
    /** Opens CUDA IPC handles; null on a host without a CUDA device. */
    private final ImportedDeviceMemory.Opener cuda;
    private final String noCuda;
    private final FaultListener faults;
    /** Regions of both kinds: a name is registered once, as one or the other (as Triton's). */
    private final ConcurrentHashMap<String, Region> regions = new ConcurrentHashMap<>();
    /** Registrations and unregistrations one at a time: the count and the names stay consistent. */
    private final Object changes = new Object();

    /**
     * System shared memory only: a CUDA registration is refused as on a host without a device.
     *
     * @see #SharedMemoryRegions(Path, boolean, int, long, ImportedDeviceMemory.Opener, String, FaultListener)
     */
    public SharedMemoryRegions(Path directory, boolean registrationEnabled, int maxRegions, long maxBytesPerRequest) {
        this(directory, registrationEnabled, maxRegions, maxBytesPerRequest, null, "no CUDA device", FaultListener.NONE);
    }

    /**
     * @param directory where the objects' files are ({@link #POSIX_SHARED_MEMORY} but in tests)
     * @param registrationEnabled whether clients may register regions
     * @param maxRegions most regions registered at once, of both kinds together
     * @param maxBytesPerRequest most bytes one request's inputs may read from regions
     * @param cuda opens CUDA IPC handles, or null where there is no CUDA device
     * @param noCuda why there is none (for the refusal of a CUDA registration), when {@code cuda} is null
     * @param faults told of a CUDA region's failed copy and its device, as of a failed forward call
     */
    public SharedMemoryRegions(Path directory, boolean registrationEnabled, int maxRegions, long maxBytesPerRequest,
            ImportedDeviceMemory.Opener cuda, String noCuda, FaultListener faults) {
        if (maxRegions < 0 || maxBytesPerRequest < 0) {
            throw new IllegalArgumentException("maxRegions and maxBytesPerRequest must be >= 0");
        }
        this.directory = directory;
        this.registrationEnabled = registrationEnabled;
        this.maxRegions = maxRegions;
        this.maxBytesPerRequest = maxBytesPerRequest;
        this.cuda = cuda;
        this.noCuda = noCuda;
        this.faults = faults;
    }

    /** Whether CUDA regions can be registered here (while registration is on): a CUDA device is. */
    public boolean cudaServed() {
        return cuda != null;
    }

    /** Whether clients may register regions ({@code etserve.shared-memory.enabled}). */
    public boolean registrationEnabled() {
        return registrationEnabled;
    }

    /**
     * Registers {@code byteSize} bytes at {@code offset} of the object {@code key} as
     * {@code name}. The object must exist (the client creates it), be a regular file under the
     * shared-memory directory (not a link) that the service may read and write, and hold the
     * whole region.
     *
     * @throws RegistrationOffException while registration is off
     * @throws InvalidInputException for a name or key that cannot be, a name in use, too many
     *     regions, or an object that cannot hold the region
     */
    public void register(String name, String key, long offset, long byteSize) {
        if (!registrationEnabled) {
            throw new RegistrationOffException();
        }
        requireName(name);
        Path file = file(key);
        if (offset < 0 || byteSize <= 0) {
            throw refused(name, "its offset must be 0 or more and its byte_size more than 0 (got " + offset + " and "
                    + byteSize + ")");
        }
        long end;
        try {
            end = Math.addExact(offset, byteSize);
        } catch (ArithmeticException e) {
            throw refused(name, "its offset + byte_size overflows 64 bits");
        }
        synchronized (changes) {
            requireRoom(name);
            regions.put(name, new SystemRegion(name, key, file, offset, byteSize,
                    SystemRegion.open(name, key, file, end)));
        }
    }

    /**
     * Registers the first {@code byteSize} bytes of the device memory another process exported
     * as {@code handle} (a CUDA IPC handle, {@code cudaIpcGetMemHandle}) on device
     * {@code deviceId} as {@code name}. The allocation must hold them.
     *
     * @throws RegistrationOffException while registration is off
     * @throws NoCudaException on a host without a CUDA device
     * @throws InvalidInputException for a name that cannot be or is in use, too many regions, or
     *     a handle, device or size that cannot be a region
     */
    public void registerCuda(String name, byte[] handle, long deviceId, long byteSize) {
        requireCudaRegistration();
        requireName(name);
        if (handle == null || handle.length != ImportedDeviceMemory.HANDLE_BYTES) {
            throw refused(name, "its raw_handle must be a CUDA IPC handle of " + ImportedDeviceMemory.HANDLE_BYTES
                    + " bytes (got " + (handle == null ? "none" : handle.length + " bytes") + ")");
        }
        if (deviceId < 0 || deviceId > Integer.MAX_VALUE) {
            throw refused(name, "its device_id must be a device's ordinal, 0 or more (got " + deviceId + ")");
        }
        if (byteSize == 0) {
            throw refused(name, "its byte_size must be more than 0");
        }
        if (byteSize < 0) {
            // Only gRPC's uint64 can be 2^63 or more.
            throw refused(name, "its byte_size " + Long.toUnsignedString(byteSize) + " is more than any allocation holds");
        }
        synchronized (changes) {
            requireRoom(name);
            ImportedDeviceMemory memory;
            try {
                memory = cuda.open(handle, (int) deviceId);
            } catch (IllegalArgumentException e) {
                throw refused(name, e.getMessage());
            }
            if (byteSize > memory.allocationBytes()) {
                memory.close();
                throw refused(name, "its byte_size " + byteSize + " is more than the " + memory.allocationBytes()
                        + " bytes the handle's allocation holds");
            }
            regions.put(name, new CudaRegion(name, byteSize, memory, faults));
        }
    }

    /**
     * Whether a CUDA region may be registered at all, before its request is read.
     *
     * @throws RegistrationOffException while registration is off
     * @throws NoCudaException on a host without a CUDA device
     */
    public void requireCudaRegistration() {
        if (!registrationEnabled) {
            throw new RegistrationOffException();
        }
        if (cuda == null) {
            throw new NoCudaException(noCuda);
        }
    }

    /** A name not yet in use, and room for one more region; callers hold {@link #changes}. */
    private void requireRoom(String name) {
        if (regions.containsKey(name)) {
            throw refused(name, "a region of that name is registered already; unregister it first");
        }
        if (regions.size() >= maxRegions) {
            throw refused(name, maxRegions + " regions are registered, the most allowed"
                    + " (etserve.shared-memory.max-regions)");
        }
    }

    /**
     * Unregisters the system region {@code name}; a name not registered as one is no error (as
     * Triton's: a CUDA region of that name stays).
     */
    public void unregister(String name) {
        unregister(name, false);
    }

    /** Unregisters the CUDA region {@code name}, as {@link #unregister(String)} a system one. */
    public void unregisterCuda(String name) {
        unregister(name, true);
    }

    private void unregister(String name, boolean cudaKind) {
        Region region;
        synchronized (changes) {
            region = regions.get(name);
            if (region == null || region.cuda() != cudaKind) {
                return;
            }
            regions.remove(name);
        }
        region.unregister();
    }

    /** Unregisters every system region. */
    public void unregisterAll() {
        unregisterAll(r -> !r.cuda());
    }

    /** Unregisters every CUDA region. */
    public void unregisterAllCuda() {
        unregisterAll(Region::cuda);
    }

    private void unregisterAll(Predicate<Region> which) {
        List<Region> all = new ArrayList<>();
        synchronized (changes) {
            for (Region r : regions.values()) {
                if (which.test(r)) {
                    all.add(r);
                }
            }
            all.forEach(r -> regions.remove(r.name));
        }
        all.forEach(Region::unregister);
    }

    /** Every registered system region, by name. */
    public List<Status> status() {
        return regions.values().stream().filter(r -> !r.cuda()).map(r -> status((SystemRegion) r))
                .sorted(Comparator.comparing(Status::name)).toList();
    }

    /**
     * The system region registered as {@code name}.
     *
     * @throws UnknownRegionException when none is
     */
    public Status status(String name) {
        return status((SystemRegion) registered(name, false));
    }

    /** Every registered CUDA region, by name. */
    public List<CudaStatus> cudaStatus() {
        return regions.values().stream().filter(Region::cuda).map(r -> status((CudaRegion) r))
                .sorted(Comparator.comparing(CudaStatus::name)).toList();
    }

    /**
     * The CUDA region registered as {@code name}.
     *
     * @throws UnknownRegionException when none is
     */
    public CudaStatus cudaStatus(String name) {
        return status((CudaRegion) registered(name, true));
    }

    private static Status status(SystemRegion r) {
        return new Status(r.name, r.key, r.offset, r.byteSize);
    }

    private static CudaStatus status(CudaRegion r) {
        return new CudaStatus(r.name, r.device(), r.byteSize);
    }

    /** The region of that kind named {@code name}; Triton's messages for none, or one of the other kind. */
    private Region registered(String name, boolean cudaKind) {
        Region region = regions.get(name);
        String kind = cudaKind ? "cuda" : "system";
        if (region == null) {
            throw new UnknownRegionException("Unable to find " + kind + " shared memory region: '"
                    + UntrustedText.abbreviate(name) + "'");
        }
        if (region.cuda() != cudaKind) {
            throw new UnknownRegionException("The region named '" + UntrustedText.abbreviate(name)
                    + "' is registered as " + (cudaKind ? "system shared memory, not CUDA shared memory"
                    : "CUDA shared memory, not system shared memory"));
        }
        return region;
    }

    @Override
    public long maxBytesPerRequest() {
        return maxBytesPerRequest;
    }

    @Override
    public ByteBuffer read(String label, SharedMemoryReference reference, IntFunction<ByteBuffer> buffers) {
        Region region = use(label, reference);
        try {
            ByteBuffer data = buffers.apply(Math.toIntExact(reference.byteSize()));
            region.read(label, data, reference.offset());
            return data.flip();
        } finally {
            region.done();
        }
    }

    /**
     * Writes the outputs {@code request} asks for in shared memory into their regions, and returns
     * {@code response} with them marked so (its encoders then send their name, datatype and shape
     * only). An output larger than the room its request gave is refused, and so is the request.
     */
    @Override
    public InferenceResponse deliver(InferenceRequest request, InferenceResponse response) {
        if (!request.anyOutputInSharedMemory()) {
            return response;  // the usual request
        }
        Set<String> written = new HashSet<>();
        for (InferenceRequest.RequestedOutput asked : request.outputs()) {
            SharedMemoryReference at = asked.sharedMemory();
            if (at == null) {
                continue;
            }
            String label = "Requested output '" + UntrustedText.abbreviate(asked.name()) + "'";
            Tensor output = output(response, asked.name());
            if (output.byteSize() > at.byteSize()) {
                throw new InvalidInputException(label + " holds " + output.byteSize() + " bytes, more than the "
                        + at.byteSize() + " of its shared_memory_byte_size.");
            }
            Region region = use(label, at);
            try {
                region.write(label, output.data(), at.offset());
            } finally {
                region.done();
            }
            written.add(asked.name());
        }
        return response.withSharedMemoryOutputs(written);
    }

    private static Tensor output(InferenceResponse response, String name) {
        for (Tensor t : response.outputs()) {
            if (t.name().equals(name)) {
                return t;
            }
        }
        throw new IllegalStateException("output '" + name + "' was asked for but is not in the response");
    }

    /** Unregisters every region of both kinds (the service is stopping), then closes the CUDA opener. */
    @Override
    public void close() {
        unregisterAll(r -> true);
        if (cuda != null) {
            cuda.close();
        }
    }

    /** The region {@code reference} names, in use until {@link Region#done}; refused when it does not fit there. */
    private Region use(String label, SharedMemoryReference reference) {
        Region region = regions.get(reference.region());
        if (region == null || !region.use()) {
            throw new InvalidInputException(label + " names shared memory region '"
                    + UntrustedText.abbreviate(reference.region()) + "', which is not registered.");
        }
        if (reference.offset() > region.byteSize || reference.byteSize() > region.byteSize - reference.offset()) {
            region.done();
            throw new InvalidInputException(label + " reaches past shared memory region '" + region.shownName
                    + "': shared_memory_offset " + reference.offset() + " + shared_memory_byte_size "
                    + reference.byteSize() + " > the region's " + region.byteSize + " bytes.");
        }
        return region;
    }

    private static void requireName(String name) {
        if (name == null || name.isEmpty() || name.length() > MAX_NAME_LENGTH) {
            throw new InvalidInputException("A shared memory region's name must be 1 to " + MAX_NAME_LENGTH
                    + " characters.");
        }
    }

    /**
     * The file of the object {@code key}, as {@code shm_open} finds it: leading slashes dropped,
     * and no other slash, {@code .}, {@code ..} or NUL (which would leave the directory).
     */
    Path file(String key) {
        if (key == null) {
            throw new InvalidInputException("A shared memory region needs a 'key'.");
        }
        int start = 0;
        while (start < key.length() && key.charAt(start) == '/') {
            start++;
        }
        String object = key.substring(start);
        if (object.isEmpty() || object.length() > MAX_NAME_LENGTH || object.equals(".") || object.equals("..")
                || object.indexOf('/') >= 0 || object.indexOf('\0') >= 0) {
            throw new InvalidInputException("Shared memory key '" + UntrustedText.abbreviate(key) + "' is not the"
                    + " name of a POSIX shared-memory object: '/' then 1 to " + MAX_NAME_LENGTH
                    + " characters, none of them '/' (not '.' or '..').");
        }
        return directory.resolve(object);
    }

    static InvalidInputException refused(String name, String why) {
        return new InvalidInputException("Shared memory region '" + UntrustedText.abbreviate(name)
                + "' was not registered: " + why + ".");
    }

    /** A status call named a region that is not registered (REST 404, gRPC NOT_FOUND, as Triton's). */
    public static final class UnknownRegionException extends RuntimeException {
        UnknownRegionException(String message) {
            super(message);
        }
    }

    /** A CUDA registration on a host without a CUDA device (REST 501, gRPC UNIMPLEMENTED). */
    public static final class NoCudaException extends RuntimeException {
        NoCudaException(String why) {
            super("CUDA shared memory is not served here: " + why + ". Pass the tensors in the request (the binary"
                    + " tensor extension) or through system shared memory.");
        }
    }

    /** A registration while {@code etserve.shared-memory.enabled} is false (REST 501, gRPC UNIMPLEMENTED, as Triton's). */
    public static final class RegistrationOffException extends RuntimeException {
        RegistrationOffException() {
            super(REGISTRATION_OFF);
        }
    }
}
