package io.etserve.inference;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** The dtype table the codecs derive their per-type code from. */
class DataTypeTest {

    @ParameterizedTest(name = "{0} holds {1}..{2}")
    @CsvSource({
        "BOOL,   0,                    1",
        "INT8,   -128,                 127",
        "UINT8,  0,                    255",
        "INT16,  -32768,               32767",
        "UINT16, 0,                    65535",
        "INT32,  -2147483648,          2147483647",
        "UINT32, 0,                    4294967295",
        "INT64,  -9223372036854775808, 9223372036854775807",
        "UINT64, 0,                    9223372036854775807",
    })
    void integerRanges(DataType type, long min, long max) {
        assertThat(type.holds(min)).isTrue();
        assertThat(type.holds(max)).isTrue();
        if (min > Long.MIN_VALUE) {
            assertThat(type.holds(min - 1)).as("below").isFalse();
        }
        if (max < Long.MAX_VALUE) {
            assertThat(type.holds(max + 1)).as("above").isFalse();
        }
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource({
        // type,  bytes written (little-endian),  value read back
        "INT8,    ff,               -1",
        "UINT8,   ff,               255",
        "INT16,   00 80,            -32768",
        "UINT16,  00 80,            32768",
        "INT32,   ff ff ff ff,      -1",
        "UINT32,  ff ff ff ff,      4294967295",
        "BOOL,    01,               1",
    })
    void elementsReadSignExtendedOnlyWhenSigned(DataType type, String hex, long value) {
        byte[] expected = hexBytes(hex);
        ByteBuffer b = ByteBuffer.allocate(type.byteSize()).order(ByteOrder.LITTLE_ENDIAN);
        type.putBits(b, value);
        assertThat(b.array()).containsExactly(expected);
        assertThat(type.getBits(b.flip())).isEqualTo(value);
    }

    @Test
    void floatsTravelAsTheirBits() {
        ByteBuffer b = ByteBuffer.allocate(12).order(ByteOrder.LITTLE_ENDIAN);
        DataType.FP32.putBits(b, Float.floatToRawIntBits(-1.5f));
        DataType.FP64.putBits(b, Double.doubleToRawLongBits(0.1));
        b.flip();
        assertThat(Float.intBitsToFloat((int) DataType.FP32.getBits(b))).isEqualTo(-1.5f);
        assertThat(Double.longBitsToDouble(DataType.FP64.getBits(b))).isEqualTo(0.1);
        assertThat(b.array()).startsWith(0x00, 0x00, 0xC0, 0xBF);  // -1.5f, IEEE 754, little-endian
    }

    @Test
    void theTableMatchesExecuTorchAndTheProtocol() {
        // ExecuTorch's ScalarType codes (runtime/core/portable_type/scalar_type.h) and the
        // protocol's element sizes.
        assertThat(DataType.FP32.executorchCode()).isEqualTo(6);
        assertThat(DataType.BF16.executorchCode()).isEqualTo(15);
        assertThat(DataType.UINT16.executorchCode()).isEqualTo(27);
        assertThat(DataType.fromExecutorch(4)).contains(DataType.INT64);
        assertThat(DataType.fromExecutorch(-1)).isEmpty();
        assertThat(DataType.fromProtocol("FP16")).contains(DataType.FP16);
        assertThat(DataType.fromProtocol("FLOAT32")).isEmpty();
        assertThat(Arrays.stream(DataType.values()).filter(t -> !t.jsonRepresentable()))
                .containsExactlyInAnyOrder(DataType.FP16, DataType.BF16);
        assertThat(Arrays.stream(DataType.values()).mapToInt(DataType::executorchCode).filter(c -> c >= 0).distinct().count())
                .as("one dtype per ExecuTorch code").isEqualTo(DataType.values().length - 1);
        for (DataType t : DataType.values()) {
            assertThat(t.protocolName()).isEqualTo(t.name());
            assertThat(t.byteSize()).as(t.name()).isEqualTo(switch (t) {
                case BOOL, UINT8, INT8 -> 1;
                case UINT16, INT16, FP16, BF16 -> 2;
                case UINT32, INT32, FP32 -> 4;
                case UINT64, INT64, FP64 -> 8;
                case BYTES -> 0;
            });
        }
    }

    private static byte[] hexBytes(String hex) {
        String[] parts = hex.trim().split(" ");
        byte[] out = new byte[parts.length];
        for (int i = 0; i < parts.length; i++) {
            out[i] = (byte) Integer.parseInt(parts[i], 16);
        }
        return out;
    }
}
