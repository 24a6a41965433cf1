package io.etserve.sharedmemory;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.etserve.inference.DataType;
import io.etserve.inference.InferenceRequest;
import io.etserve.inference.InferenceRequest.RequestedOutput;
import io.etserve.inference.InferenceResponse;
import io.etserve.inference.InvalidInputException;
import io.etserve.inference.SharedMemoryReference;
import io.etserve.inference.Tensor;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Regions of files in a directory standing for /dev/shm: registration's checks, reads, writes, their bounds. */
class SharedMemoryRegionsTest {

    @TempDir
    Path shm;

    private SharedMemoryRegions regions(int maxRegions) {
        return new SharedMemoryRegions(shm, true, maxRegions, 1 << 20);
    }

    /** An object of {@code size} bytes whose byte i is (i % 251). */
    private Path object(String name, int size) throws IOException {
        byte[] bytes = new byte[size];
        for (int i = 0; i < size; i++) {
            bytes[i] = (byte) (i % 251);
        }
        return Files.write(shm.resolve(name), bytes);
    }

    private static byte[] read(SharedMemoryRegions regions, String region, long offset, int size) {
        ByteBuffer data = regions.read("Input 'x'", new SharedMemoryReference(region, offset, size),
                ByteBuffer::allocateDirect);
        byte[] out = new byte[data.remaining()];
        data.get(out);
        return out;
    }

    private static byte[] pattern(int from, int size) {
        byte[] bytes = new byte[size];
        for (int i = 0; i < size; i++) {
            bytes[i] = (byte) ((from + i) % 251);
        }
        return bytes;
    }

    @Test
    void readsTheBytesAtTheRegionsOffsetPlusTheReferencesAndListsWhatIsRegistered() throws IOException {
        object("in", 4096);
        SharedMemoryRegions regions = regions(4);
        // Leading slashes are shm_open's: "/in" and "in" name the same object.
        regions.register("a", "/in", 1000, 2000);
        regions.register("b", "in", 0, 4096);

        assertThat(read(regions, "a", 24, 100)).isEqualTo(pattern(1024, 100));
        assertThat(read(regions, "b", 0, 4096)).isEqualTo(pattern(0, 4096));
        assertThat(regions.status()).containsExactly(new SharedMemoryRegions.Status("a", "/in", 1000, 2000),
                new SharedMemoryRegions.Status("b", "in", 0, 4096));
        assertThat(regions.status("a")).isEqualTo(new SharedMemoryRegions.Status("a", "/in", 1000, 2000));
    }

    @Test
    void aReferenceMustFitInsideItsRegion() throws IOException {
        object("in", 4096);
        SharedMemoryRegions regions = regions(4);
        regions.register("a", "/in", 1000, 2000);
        assertThat(read(regions, "a", 1900, 100)).isEqualTo(pattern(2900, 100));
        assertThatThrownBy(() -> read(regions, "a", 1901, 100)).isInstanceOf(InvalidInputException.class)
                .hasMessage("Input 'x' reaches past shared memory region 'a': shared_memory_offset 1901"
                        + " + shared_memory_byte_size 100 > the region's 2000 bytes.");
        assertThatThrownBy(() -> read(regions, "a", Long.MAX_VALUE, 1)).isInstanceOf(InvalidInputException.class);
        assertThatThrownBy(() -> read(regions, "nope", 0, 1)).isInstanceOf(InvalidInputException.class)
                .hasMessage("Input 'x' names shared memory region 'nope', which is not registered.");
    }

    @Test
    void registrationRefusesWhatCannotBeARegion() throws IOException {
        object("in", 100);
        Files.createDirectory(shm.resolve("dir"));
        Files.createSymbolicLink(shm.resolve("link"), shm.resolve("in"));
        SharedMemoryRegions regions = regions(2);

        for (String key : new String[] {"", "/", "///", "/a/b", "/..", "/.", "a\0b", "/" + "k".repeat(256)}) {
            assertThatThrownBy(() -> regions.register("r", key, 0, 1)).as(key).isInstanceOf(InvalidInputException.class)
                    .hasMessageContaining("is not the name of a POSIX shared-memory object");
        }
        assertThatThrownBy(() -> regions.register("r", "/missing", 0, 1))
                .hasMessage("Shared memory region 'r' was not registered: there is no shared memory object '/missing'"
                        + " (the client creates it with shm_open first).");
        assertThatThrownBy(() -> regions.register("r", "/link", 0, 1))
                .hasMessage("Shared memory region 'r' was not registered: shared memory object '/link' is not a"
                        + " regular file (a symbolic link).");
        assertThatThrownBy(() -> regions.register("r", "/dir", 0, 1)).hasMessageContaining("is not a regular file");
        assertThatThrownBy(() -> regions.register("r", "/in", 50, 51))
                .hasMessage("Shared memory region 'r' was not registered: shared memory object '/in' holds 100 bytes,"
                        + " fewer than offset + byte_size (101).");
        assertThatThrownBy(() -> regions.register("r", "/in", 0, 0)).hasMessageContaining("byte_size more than 0");
        assertThatThrownBy(() -> regions.register("r", "/in", Long.MAX_VALUE, 2)).hasMessageContaining("overflows");
        assertThatThrownBy(() -> regions.register("", "/in", 0, 1)).hasMessageContaining("1 to 255 characters");

        regions.register("r", "/in", 0, 100);
        assertThatThrownBy(() -> regions.register("r", "/in", 0, 10))
                .hasMessageContaining("a region of that name is registered already");
        regions.register("s", "/in", 0, 10);
        assertThatThrownBy(() -> regions.register("t", "/in", 0, 10))
                .hasMessageContaining("2 regions are registered, the most allowed");
        assertThat(regions.status()).extracting(SharedMemoryRegions.Status::name).containsExactly("r", "s");
    }

    @Test
    void registrationIsRefusedWhileOffButStatusAnswers() throws IOException {
        object("in", 100);
        SharedMemoryRegions off = new SharedMemoryRegions(shm, false, 4, 1 << 20);
        assertThatThrownBy(() -> off.register("r", "/in", 0, 10))
                .isInstanceOf(SharedMemoryRegions.RegistrationOffException.class)
                .hasMessageContaining("etserve.shared-memory.enabled=true");
        assertThat(off.status()).isEmpty();
        assertThatThrownBy(() -> off.status("r")).isInstanceOf(SharedMemoryRegions.UnknownRegionException.class)
                .hasMessage("Unable to find system shared memory region: 'r'");
    }

    @Test
    void anUnregisteredRegionIsGoneForNewRequestsButNotForOneUsingIt() throws IOException {
        object("in", 100);
        SharedMemoryRegions regions = regions(4);
        regions.register("r", "/in", 0, 100);
        // Unregistered while this read holds it (between the lookup and the copy): the read still completes.
        ByteBuffer data = regions.read("Input 'x'", new SharedMemoryReference("r", 0, 100), bytes -> {
            regions.unregister("r");
            return ByteBuffer.allocateDirect(bytes);
        });
        assertThat(data.remaining()).isEqualTo(100);
        assertThat(data.get(99)).isEqualTo((byte) 99);
        assertThatThrownBy(() -> read(regions, "r", 0, 1)).hasMessageContaining("which is not registered");
        regions.unregister("r");  // again, and a name never registered: no error
        regions.unregister("never");
        regions.register("r", "/in", 0, 50);  // the name is free again
        regions.unregisterAll();
        assertThat(regions.status()).isEmpty();
    }

    @Test
    void anObjectMadeSmallerAfterRegistrationIsTheClientsErrorAndTheRegionStaysUsable() throws IOException {
        Path file = object("in", 4096);
        SharedMemoryRegions regions = regions(4);
        regions.register("r", "/in", 0, 4096);
        try (RandomAccessFile f = new RandomAccessFile(file.toFile(), "rw")) {
            f.setLength(1000);
        }
        assertThatThrownBy(() -> read(regions, "r", 900, 200)).isInstanceOf(InvalidInputException.class)
                .hasMessage("Input 'x' reads shared memory region 'r' past the end of its object, which was made smaller"
                        + " after the region was registered.");
        assertThat(read(regions, "r", 0, 1000)).isEqualTo(pattern(0, 1000));
        InferenceResponse response = response(new Tensor("y", DataType.UINT8, new long[] {200}, ByteBuffer.allocate(200)));
        assertThatThrownBy(() -> regions.deliver(request(new SharedMemoryReference("r", 900, 200)), response))
                .isInstanceOf(InvalidInputException.class).hasMessageContaining("writes shared memory region 'r' past");
        assertThat(Files.size(file)).as("a refused write does not grow the object").isEqualTo(1000);
    }

    @Test
    void aChannelClosedByAnInterruptedReadIsOpenedAgainForTheNext() throws IOException {
        object("in", 100);
        SharedMemoryRegions regions = regions(4);
        regions.register("r", "/in", 0, 100);
        Thread.currentThread().interrupt();
        try {
            assertThatThrownBy(() -> read(regions, "r", 0, 10)).isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("an interrupted thread");
        } finally {
            assertThat(Thread.interrupted()).isTrue();
        }
        assertThat(read(regions, "r", 10, 10)).isEqualTo(pattern(10, 10));
    }

    @Test
    void deliverWritesTheOutputsAskedForInSharedMemoryAndMarksThem() throws IOException {
        Path file = object("out", 1024);
        SharedMemoryRegions regions = regions(4);
        regions.register("o", "/out", 512, 512);
        byte[] y = pattern(7, 64);
        Tensor output = new Tensor("y", DataType.FP32, new long[] {16}, ByteBuffer.wrap(y));
        Tensor other = new Tensor("z", DataType.FP32, new long[] {1}, ByteBuffer.allocate(4));
        InferenceRequest request = new InferenceRequest(null, Map.of(), List.of(),
                List.of(new RequestedOutput("y", null, new SharedMemoryReference("o", 100, 64)),
                        new RequestedOutput("z", null)), false);

        InferenceResponse delivered = regions.deliver(request, response(output, other));

        assertThat(delivered.sharedMemoryOutputs()).containsExactly("y");
        byte[] written = new byte[64];
        System.arraycopy(Files.readAllBytes(file), 612, written, 0, 64);
        assertThat(written).isEqualTo(y);
        // No region asked for: the response as it was.
        InferenceResponse plain = response(output);
        assertThat(regions.deliver(new InferenceRequest(null, Map.of(), List.of(), List.of(), false), plain))
                .isSameAs(plain);
    }

    @Test
    void anOutputLargerThanTheRoomGivenIsRefused() throws IOException {
        object("out", 1024);
        SharedMemoryRegions regions = regions(4);
        regions.register("o", "/out", 0, 1024);
        Tensor output = new Tensor("y", DataType.FP32, new long[] {16}, ByteBuffer.allocate(64));
        assertThatThrownBy(() -> regions.deliver(request(new SharedMemoryReference("o", 0, 63)), response(output)))
                .isInstanceOf(InvalidInputException.class)
                .hasMessage("Requested output 'y' holds 64 bytes, more than the 63 of its shared_memory_byte_size.");
        assertThatThrownBy(() -> regions.deliver(request(new SharedMemoryReference("o", 1000, 64)), response(output)))
                .hasMessageContaining("reaches past shared memory region 'o'");
    }

    private static InferenceRequest request(SharedMemoryReference y) {
        return new InferenceRequest(null, Map.of(), List.of(), List.of(new RequestedOutput("y", null, y)), false);
    }

    private static InferenceResponse response(Tensor... outputs) {
        return new InferenceResponse("m", "1", null, List.of(outputs), Set.of());
    }
}
