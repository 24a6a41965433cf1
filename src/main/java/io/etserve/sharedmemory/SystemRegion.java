package io.etserve.sharedmemory;

import io.etserve.inference.InvalidInputException;
import io.etserve.inference.UntrustedText;
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

/**
 * A system shared-memory region: {@code byteSize} bytes at {@code offset} of a POSIX
 * shared-memory object, its file open. Reads and writes are positional, so many run at once on
 * the one channel.
 */
final class SystemRegion extends Region {

    final String key;
    private final Path file;
    final long offset;
    private FileChannel channel;  // guarded by this

    SystemRegion(String name, String key, Path file, long offset, long byteSize, FileChannel channel) {
        super(name, byteSize);
        this.key = key;
        this.file = file;
        this.offset = offset;
        this.channel = channel;
    }

    /** The object's file opened for reads and writes, once it proves a regular file that holds {@code end} bytes. */
    static FileChannel open(String name, String key, Path file, long end) {
        String object = "shared memory object '" + UntrustedText.abbreviate(key) + "'";
        try {
            BasicFileAttributes attributes = Files.readAttributes(file, BasicFileAttributes.class,
                    LinkOption.NOFOLLOW_LINKS);
            if (!attributes.isRegularFile()) {
                throw SharedMemoryRegions.refused(name, object + " is not a regular file"
                        + (attributes.isSymbolicLink() ? " (a symbolic link)" : ""));
            }
            FileChannel channel = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE,
                    LinkOption.NOFOLLOW_LINKS);
            long size = channel.size();
            if (size < end) {
                channel.close();
                throw SharedMemoryRegions.refused(name, object + " holds " + size
                        + " bytes, fewer than offset + byte_size (" + end + ")");
            }
            return channel;
        } catch (NoSuchFileException e) {
            throw SharedMemoryRegions.refused(name, "there is no " + object
                    + " (the client creates it with shm_open first)");
        } catch (AccessDeniedException e) {
            throw SharedMemoryRegions.refused(name, "the service may not read and write " + object);
        } catch (IOException e) {
            throw SharedMemoryRegions.refused(name, object + " could not be opened: " + e.getMessage());
        }
    }

    @Override
    boolean cuda() {
        return false;
    }

    @Override
    void release() {
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

    @Override
    void read(String label, ByteBuffer into, long at) {
        transfer(label, into, offset + at, false);
    }

    @Override
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
