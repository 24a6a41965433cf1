package io.etserve.sharedmemory;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.etserve.cuda.CudaException;
import io.etserve.cuda.ImportedDeviceMemory;
import io.etserve.execution.FaultListener;
import io.etserve.inference.DataType;
import io.etserve.inference.InferenceRequest;
import io.etserve.inference.InferenceRequest.RequestedOutput;
import io.etserve.inference.InferenceResponse;
import io.etserve.inference.InvalidInputException;
import io.etserve.inference.SharedMemoryReference;
import io.etserve.inference.Tensor;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.OptionalInt;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * CUDA regions in the registry: their checks, reads and writes at their offsets, one name for one
 * region of either kind, status and unregistration by kind, release once unused. The device's
 * allocations stand here as host arrays behind handles ({@link HostAllocations}); the real opener,
 * {@code CudaIpc}, runs on the GPU host (scripts/gpu/cuda-shm.sh, Triton's own client).
 */
class CudaRegionsTest {

    @TempDir
    Path shm;

    private final HostAllocations device = new HostAllocations();

    private SharedMemoryRegions regions() {
        return new SharedMemoryRegions(shm, true, 4, 1 << 20, device, null, FaultListener.NONE);
    }

    @Test
    void readsAndWritesTheAllocationAtTheReferencesOffsetAndListsTheRegionByKind() {
        byte[] handle = device.allocate(1024, 2);
        SharedMemoryRegions regions = regions();
        regions.registerCuda("c", handle, 2, 512);

        ByteBuffer input = regions.read("Input 'x'", new SharedMemoryReference("c", 100, 64), ByteBuffer::allocateDirect);
        byte[] read = new byte[input.remaining()];
        input.get(read);
        assertThat(read).isEqualTo(Arrays.copyOfRange(device.bytes(handle), 100, 164));

        byte[] y = new byte[64];
        Arrays.fill(y, (byte) 7);
        Tensor output = new Tensor("y", DataType.FP32, new long[] {16}, ByteBuffer.wrap(y));
        InferenceRequest request = new InferenceRequest(null, Map.of(), List.of(),
                List.of(new RequestedOutput("y", null, new SharedMemoryReference("c", 200, 64))), false);
        InferenceResponse delivered = regions.deliver(request, new InferenceResponse("m", "1", null, List.of(output), Set.of()));
        assertThat(delivered.sharedMemoryOutputs()).containsExactly("y");
        assertThat(Arrays.copyOfRange(device.bytes(handle), 200, 264)).isEqualTo(y);
        assertThat(device.bytes(handle)[199]).isEqualTo((byte) (199 % 251));

        assertThat(regions.cudaStatus()).containsExactly(new SharedMemoryRegions.CudaStatus("c", 2, 512));
        assertThat(regions.cudaStatus("c").deviceId()).isEqualTo(2);
        assertThat(regions.status()).isEmpty();
        // Past the registered 512 bytes, though the allocation holds 1024.
        assertThatThrownBy(() -> regions.read("Input 'x'", new SharedMemoryReference("c", 500, 64), ByteBuffer::allocateDirect))
                .isInstanceOf(InvalidInputException.class)
                .hasMessageContaining("reaches past shared memory region 'c'");
    }

    @Test
    void aNameIsOneRegionOfOneKindAndEachKindsCallsSeeOnlyItsOwn() throws IOException {
        Files.write(shm.resolve("obj"), new byte[64]);
        byte[] handle = device.allocate(64, 0);
        SharedMemoryRegions regions = regions();
        regions.register("s", "/obj", 0, 64);
        regions.registerCuda("c", handle, 0, 64);

        assertThatThrownBy(() -> regions.registerCuda("s", device.allocate(64, 0), 0, 64))
                .hasMessageContaining("a region of that name is registered already");
        assertThatThrownBy(() -> regions.register("c", "/obj", 0, 64))
                .hasMessageContaining("a region of that name is registered already");
        assertThatThrownBy(() -> regions.status("c"))
                .isInstanceOf(SharedMemoryRegions.UnknownRegionException.class)
                .hasMessage("The region named 'c' is registered as CUDA shared memory, not system shared memory");
        assertThatThrownBy(() -> regions.cudaStatus("s"))
                .hasMessage("The region named 's' is registered as system shared memory, not CUDA shared memory");
        assertThatThrownBy(() -> regions.cudaStatus("none"))
                .hasMessage("Unable to find cuda shared memory region: 'none'");

        // Unregistering by the other kind's calls leaves a region as it is (as Triton's).
        regions.unregister("c");
        regions.unregisterAll();
        assertThat(regions.cudaStatus()).extracting(SharedMemoryRegions.CudaStatus::name).containsExactly("c");
        assertThat(device.closed(handle)).isZero();
        regions.unregisterCuda("s");
        regions.register("s", "/obj", 0, 64);
        regions.unregisterAllCuda();
        assertThat(regions.cudaStatus()).isEmpty();
        assertThat(regions.status()).extracting(SharedMemoryRegions.Status::name).containsExactly("s");
        assertThat(device.closed(handle)).isEqualTo(1);
    }

    @Test
    void registrationRefusesWhatCannotBeARegionAndClosesWhatItOpened() {
        SharedMemoryRegions regions = regions();
        byte[] handle = device.allocate(256, 0);
        assertThatThrownBy(() -> regions.registerCuda("c", handle, 0, 257))
                .isInstanceOf(InvalidInputException.class)
                .hasMessage("Shared memory region 'c' was not registered: its byte_size 257 is more than the 256 bytes"
                        + " the handle's allocation holds.");
        assertThat(device.closed(handle)).isEqualTo(1);
        assertThatThrownBy(() -> regions.registerCuda("c", new byte[63], 0, 8))
                .hasMessageContaining("its raw_handle must be a CUDA IPC handle of 64 bytes (got 63 bytes)");
        assertThatThrownBy(() -> regions.registerCuda("c", handle, -1, 8))
                .hasMessageContaining("its device_id must be a device's ordinal, 0 or more (got -1)");
        assertThatThrownBy(() -> regions.registerCuda("c", handle, 0, 0))
                .hasMessageContaining("its byte_size must be more than 0");
        assertThatThrownBy(() -> regions.registerCuda("c", handle, 0, -1))
                .hasMessageContaining("its byte_size 18446744073709551615 is more than any allocation holds");
        // The opener's refusal (a handle of nothing live), in the client's words.
        assertThatThrownBy(() -> regions.registerCuda("c", new byte[64], 0, 8))
                .hasMessage("Shared memory region 'c' was not registered: no allocation has that handle.");
        assertThat(regions.cudaStatus()).isEmpty();
    }

    @Test
    void registrationIsRefusedWhileOffAndWithoutACudaDevice() {
        byte[] handle = device.allocate(64, 0);
        SharedMemoryRegions off = new SharedMemoryRegions(shm, false, 4, 1 << 20, device, null, FaultListener.NONE);
        assertThatThrownBy(() -> off.registerCuda("c", handle, 0, 64))
                .isInstanceOf(SharedMemoryRegions.RegistrationOffException.class);
        SharedMemoryRegions cpu = new SharedMemoryRegions(shm, true, 4, 1 << 20, null, "no CUDA device visible",
                FaultListener.NONE);
        assertThat(cpu.cudaServed()).isFalse();
        assertThatThrownBy(() -> cpu.registerCuda("c", handle, 0, 64))
                .isInstanceOf(SharedMemoryRegions.NoCudaException.class)
                .hasMessageStartingWith("CUDA shared memory is not served here: no CUDA device visible.");
        assertThat(device.opened()).isZero();
    }

    @Test
    void aRegionUnregisteredWhileARequestUsesItIsReleasedWhenTheRequestIsDone() {
        byte[] handle = device.allocate(64, 0);
        SharedMemoryRegions regions = regions();
        regions.registerCuda("c", handle, 0, 64);
        // The buffer supplier runs while the region is in use: unregister there.
        ByteBuffer data = regions.read("Input 'x'", new SharedMemoryReference("c", 0, 8), n -> {
            regions.unregisterCuda("c");
            assertThat(device.closed(handle)).isZero();
            return ByteBuffer.allocateDirect(n);
        });
        assertThat(data.remaining()).isEqualTo(8);
        assertThat(device.closed(handle)).isEqualTo(1);
        assertThatThrownBy(() -> regions.read("Input 'x'", new SharedMemoryReference("c", 0, 8), ByteBuffer::allocateDirect))
                .hasMessageContaining("which is not registered");
        regions.registerCuda("again", handle, 0, 64);
        assertThat(device.openerClosed()).isFalse();
        regions.close();
        assertThat(device.closed(handle)).isEqualTo(2);
        assertThat(device.openerClosed()).as("the opener, after its regions").isTrue();
    }

    @Test
    void aCopysCudaFailureIsToldToTheFaultListenerWithTheRegionsDeviceAndThrown() {
        List<Map.Entry<OptionalInt, Throwable>> told = new ArrayList<>();
        SharedMemoryRegions regions = new SharedMemoryRegions(shm, true, 4, 1 << 20, device, null,
                (onDevice, error) -> told.add(Map.entry(onDevice, error)));
        regions.registerCuda("c", device.allocate(256, 3), 3, 256);
        CudaException lost = new CudaException("cudaMemcpyAsync", 700, "cudaErrorIllegalAddress",
                "an illegal memory access was encountered");
        device.failCopies(lost);

        assertThatThrownBy(() -> regions.read("Input 'x'", new SharedMemoryReference("c", 0, 8),
                ByteBuffer::allocateDirect)).isSameAs(lost);
        Tensor output = new Tensor("y", DataType.FP32, new long[] {2}, ByteBuffer.wrap(new byte[8]));
        InferenceRequest request = new InferenceRequest(null, Map.of(), List.of(),
                List.of(new RequestedOutput("y", null, new SharedMemoryReference("c", 8, 8))), false);
        assertThatThrownBy(() -> regions.deliver(request, new InferenceResponse("m", "1", null, List.of(output),
                Set.of()))).isSameAs(lost);
        assertThat(told).containsExactly(Map.entry(OptionalInt.of(3), lost), Map.entry(OptionalInt.of(3), lost));

        // A failure that is no CUDA call's (here the client's: past the region) is not the device's.
        device.failCopies(null);
        assertThatThrownBy(() -> regions.read("Input 'x'", new SharedMemoryReference("c", 250, 8),
                ByteBuffer::allocateDirect)).isInstanceOf(InvalidInputException.class);
        assertThat(told).hasSize(2);
    }
}
