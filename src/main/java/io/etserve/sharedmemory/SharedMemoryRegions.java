package io.etserve.sharedmemory;

import io.etserve.inference.InferenceRequest;
import io.etserve.inference.InferenceResponse;
import io.etserve.inference.InvalidInputException;
import io.etserve.inference.SharedMemoryReference;
import io.etserve.inference.Tensor;
import io.etserve.inference.UntrustedText;
import io.etserve.protocol.SharedMemoryInputs;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.FileChannel;
import java.nio.file.AccessDeniedException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.IntFunction;

/**
 * Triton's system shared-memory extension: regions of POSIX shared-memory objects a client on
 * the same host registers by name, so that large inputs and outputs skip the socket. An input
 * that names a region is read from it ({@link #read}); an output asked for in a region is
 * written there ({@link #deliver}) and the answer carries only its name, datatype and shape.
 *
 * <p>A region is read and written with positional reads and writes on its object's file
 * ({@code pread}/{@code pwrite} under {@code /dev/shm}), never mapped: a client that truncates
 * its object under a mapping would fault the reading thread (SIGBUS; in native code, the
 * process), where a read past the end is a short read, answered as the client's error. Inputs are
 * copied into the request's own buffers, so a client that writes the region again while its
 * request runs cannot change the tensor under the model.
 *
 * <p>A region unregistered while requests use it stays open until the last of them is done.
 * Registration is off unless {@code etserve.shared-memory.enabled} (as Triton's
 * {@code --allow-client-shm}): any client that reaches the port could otherwise read and write
 * every shared-memory object the service's user may open. Thread-safe.
 */
public final class SharedMemoryRegions implements SharedMemoryInputs, AutoCloseable {

    /** Where glibc's {@code shm_open(3)} keeps POSIX shared-memory objects. */
    public static final Path POSIX_SHARED_MEMORY = Path.of("/dev/shm");

    /** Longest region name and key: a file name's limit. */
    static final int MAX_NAME_LENGTH = 255;

    /** Why a registration is refused while {@code etserve.shared-memory.enabled} is false. */
    public static final String REGISTRATION_OFF = "Client shared memory is off: start the server with"
            + " etserve.shared-memory.enabled=true to register regions.";

    /** A registered region as the status calls list it. */
    public record Status(String name, String key, long offset, long byteSize) {}

    private final Path directory;
    private final boolean registrationEnabled;
    private final int maxRegions;
    private final long maxBytesPerRequest;
    private final ConcurrentHashMap<String, Region> regions = new ConcurrentHashMap<>();
    /** Registrations and unregistrations one at a time: the count and the names stay consistent. */
    private final Object changes = new Object();

    /**
     * @param directory where the objects' files are ({@link #POSIX_SHARED_MEMORY} but in tests)
     * @param registrationEnabled whether clients may register regions
     * @param maxRegions most regions registered at once
     * @param maxBytesPerRequest most bytes one request's inputs may read from regions
     */
    public SharedMemoryRegions(Path directory, boolean registrationEnabled, int maxRegions, long maxBytesPerRequest) {
        if (maxRegions < 0 || maxBytesPerRequest < 0) {
            throw new IllegalArgumentException("maxRegions and maxBytesPerRequest must be >= 0");
        }
        this.directory = directory;
        this.registrationEnabled = registrationEnabled;
        this.maxRegions = maxRegions;
        this.maxBytesPerRequest = maxBytesPerRequest;
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
            if (regions.containsKey(name)) {
                throw refused(name, "a region of that name is registered already; unregister it first");
            }
            if (regions.size() >= maxRegions) {
                throw refused(name, maxRegions + " regions are registered, the most allowed"
                        + " (etserve.shared-memory.max-regions)");
            }
            regions.put(name, new Region(name, key, file, offset, byteSize, open(name, key, file, end)));
        }
    }

    /** Unregisters {@code name}; a name not registered is no error (as Triton's). */
    public void unregister(String name) {
        Region region;
        synchronized (changes) {
            region = regions.remove(name);
        }
        if (region != null) {
            region.unregister();
        }
    }

    /** Unregisters every region. */
    public void unregisterAll() {
        List<Region> all;
        synchronized (changes) {
            all = new ArrayList<>(regions.values());
            regions.clear();
        }
        all.forEach(Region::unregister);
    }

    /** Every registered region, by name. */
    public List<Status> status() {
        return regions.values().stream().map(Region::status).sorted(Comparator.comparing(Status::name)).toList();
    }

    /**
     * The region registered as {@code name}.
     *
     * @throws UnknownRegionException when none is
     */
    public Status status(String name) {
        Region region = regions.get(name);
        if (region == null) {
            throw new UnknownRegionException(name);
        }
        return region.status();
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

    /** Unregisters every region (the service is stopping). */
    @Override
    public void close() {
        unregisterAll();
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

    /** The object's file opened for reads and writes, once it proves a regular file that holds {@code end} bytes. */
    private static FileChannel open(String name, String key, Path file, long end) {
        String object = "shared memory object '" + UntrustedText.abbreviate(key) + "'";
        try {
            BasicFileAttributes attributes = Files.readAttributes(file, BasicFileAttributes.class,
                    LinkOption.NOFOLLOW_LINKS);
            if (!attributes.isRegularFile()) {
                throw refused(name, object + " is not a regular file" + (attributes.isSymbolicLink()
                        ? " (a symbolic link)" : ""));
            }
            FileChannel channel = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE,
                    LinkOption.NOFOLLOW_LINKS);
            long size = channel.size();
            if (size < end) {
                channel.close();
                throw refused(name, object + " holds " + size + " bytes, fewer than offset + byte_size (" + end + ")");
            }
            return channel;
        } catch (NoSuchFileException e) {
            throw refused(name, "there is no " + object + " (the client creates it with shm_open first)");
        } catch (AccessDeniedException e) {
            throw refused(name, "the service may not read and write " + object);
        } catch (IOException e) {
            throw refused(name, object + " could not be opened: " + e.getMessage());
        }
    }

    private static InvalidInputException refused(String name, String why) {
        return new InvalidInputException("Shared memory region '" + UntrustedText.abbreviate(name)
                + "' was not registered: " + why + ".");
    }

    /** A status call named a region that is not registered (REST 404, gRPC NOT_FOUND, as Triton's). */
    public static final class UnknownRegionException extends RuntimeException {
        UnknownRegionException(String name) {
            super("Unable to find system shared memory region: '" + UntrustedText.abbreviate(name) + "'");
        }
    }

    /** A registration while {@code etserve.shared-memory.enabled} is false (REST 501, gRPC UNIMPLEMENTED, as Triton's). */
    public static final class RegistrationOffException extends RuntimeException {
        RegistrationOffException() {
            super(REGISTRATION_OFF);
        }
    }

    /**
     * One registered region: its object's file, open, and the requests using it. Reads and writes
     * are positional, so many run at once on the one channel.
     */
    private static final class Region {
        private final String name;
        private final String shownName;
        private final String key;
        private final Path file;
        private final long offset;
        private final long byteSize;
        private FileChannel channel;  // guarded by this
        private int users;  // guarded by this
        private boolean unregistered;  // guarded by this

        Region(String name, String key, Path file, long offset, long byteSize, FileChannel channel) {
            this.name = name;
            this.shownName = UntrustedText.abbreviate(name);
            this.key = key;
            this.file = file;
            this.offset = offset;
            this.byteSize = byteSize;
            this.channel = channel;
        }

        Status status() {
            return new Status(name, key, offset, byteSize);
        }

        /** False once unregistered: the region is gone for new requests. */
        synchronized boolean use() {
            if (unregistered) {
                return false;
            }
            users++;
            return true;
        }

        synchronized void done() {
            if (--users == 0 && unregistered) {
                closeChannel();
            }
        }

        synchronized void unregister() {
            unregistered = true;
            if (users == 0) {
                closeChannel();
            }
        }

        private void closeChannel() {
            try {
                channel.close();
            } catch (IOException e) {
                // closing a file opened for reads and writes of shared memory: nothing was buffered
            }
        }

        /**
         * The open channel. An interrupted thread's read or write closes a FileChannel for every
         * user: the next one opens the object again, as registered.
         */
        private synchronized FileChannel channel() throws IOException {
            if (!channel.isOpen()) {
                channel = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE,
                        LinkOption.NOFOLLOW_LINKS);
            }
            return channel;
        }

        /** Fills {@code into} from {@code at} bytes into the region. */
        void read(String label, ByteBuffer into, long at) {
            transfer(label, into, offset + at, false);
        }

        /** Writes {@code from} at {@code at} bytes into the region. */
        void write(String label, ByteBuffer from, long at) {
            transfer(label, from, offset + at, true);
        }

        /**
         * Moves {@code buffer}'s remaining bytes to or from the object at {@code position}. Its
         * file must still hold them: an object made smaller since it was registered is the
         * client's error (a write would grow it again). A channel another thread's interrupt
         * closed meanwhile is opened again once.
         */
        private void transfer(String label, ByteBuffer buffer, long position, boolean write) {
            int start = buffer.position();
            for (int attempt = 1; ; attempt++) {
                try {
                    FileChannel c = channel();
                    if (c.size() < position + buffer.remaining()) {
                        throw new InvalidInputException(label + (write ? " writes" : " reads") + " shared memory region '"
                                + shownName + "' past the end of its object, which was made smaller after the region"
                                + " was registered.");
                    }
                    long at = position;
                    while (buffer.hasRemaining()) {
                        int n = write ? c.write(buffer, at) : c.read(buffer, at);
                        if (n < 0) {
                            throw new InvalidInputException(label + " reads shared memory region '" + shownName
                                    + "' past the end of its object, which was made smaller while it was read.");
                        }
                        at += n;
                    }
                    return;
                } catch (ClosedChannelException e) {
                    if (attempt == 2 || Thread.currentThread().isInterrupted()) {
                        throw new IllegalStateException("shared memory region '" + shownName + "' was closed under"
                                + (write ? " a write" : " a read") + " (an interrupted thread)", e);
                    }
                    buffer.position(start);
                } catch (IOException e) {
                    throw new IllegalStateException("shared memory region '" + shownName + "' could not be "
                            + (write ? "written" : "read") + ": " + e.getMessage(), e);
                }
            }
        }
    }
}
