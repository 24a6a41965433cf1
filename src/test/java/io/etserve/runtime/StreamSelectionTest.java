package io.etserve.runtime;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

/** What travels to the bridge in one int (native/src/jni_bridge.cpp decodes it). */
class StreamSelectionTest {

    @Test
    void modeWaitAndSleepSliceTravelInTheirOwnBits() {
        assertThat(StreamSelection.none().nativeMode()).isZero();
        assertThat(StreamSelection.selectOnly(7).nativeMode()).isEqualTo(1);
        assertThat(StreamSelection.cuda(7, 0, StreamSelection.CompletionWait.BLOCKING).nativeMode())
                .isEqualTo(2 | 2 << 8);
        assertThat(StreamSelection.cuda(7, 0, StreamSelection.CompletionWait.ADAPTIVE, 50).nativeMode())
                .isEqualTo(2 | 50 << 16);
        // The largest slice sets the sign bit: the bridge reads the int as unsigned.
        assertThat(StreamSelection.cuda(7, 0, StreamSelection.CompletionWait.ADAPTIVE, 0xffff).nativeMode() >>> 16)
                .isEqualTo(0xffff);
    }

    @Test
    void aSliceOutsideSixteenBitsIsRefused() {
        assertThatThrownBy(() -> StreamSelection.cuda(7, 0, StreamSelection.CompletionWait.ADAPTIVE, 0x10000))
                .isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> StreamSelection.cuda(7, 0, StreamSelection.CompletionWait.ADAPTIVE, -1))
                .isInstanceOf(IllegalArgumentException.class);
    }
}
