package io.etserve.runtime;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

class StreamSelectionTest {

    @Test
    void aSliceOutsideZeroToMaxIsRefused() {
        assertThatThrownBy(() -> StreamSelection.cuda(7, 0, StreamSelection.CompletionWait.ADAPTIVE,
                StreamSelection.MAX_SLEEP_SLICE_MICROS + 1)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> StreamSelection.cuda(7, 0, StreamSelection.CompletionWait.ADAPTIVE, -1))
                .isInstanceOf(IllegalArgumentException.class);
    }
}
