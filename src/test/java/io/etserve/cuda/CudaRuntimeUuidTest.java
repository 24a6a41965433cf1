package io.etserve.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

/** The device UUID as the gpu_uuid label carries it (Triton's and nvidia-smi's spelling). */
class CudaRuntimeUuidTest {

    @Test
    void writesSixteenBytesAsNvidiaSmiDoes() {
        byte[] b = {0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, (byte) 0xe0,
            (byte) 0xff};
        assertThat(CudaRuntime.gpuUuid(b)).isEqualTo("GPU-00010203-0405-0607-0809-0a0b0c0de0ff");
    }

    @Test
    void refusesAnythingButSixteenBytes() {
        assertThatThrownBy(() -> CudaRuntime.gpuUuid(new byte[15])).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("16 bytes");
    }
}
