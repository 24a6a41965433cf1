package io.etserve.runtime;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;

import org.junit.jupiter.api.Test;

class StreamSelectionTest {

    @Test
    void aSliceOutsideZeroToMaxIsRefused() {
        assertThatThrownBy(() -> StreamSelection.cuda(7, 0, StreamSelection.CompletionWait.ADAPTIVE,
                StreamSelection.MAX_SLEEP_SLICE_MICROS + 1)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> StreamSelection.cuda(7, 0, StreamSelection.CompletionWait.ADAPTIVE, -1))
                .isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void aCompletionTimeoutTravelsInWholeMillisecondsRoundedUp() {
        assertThat(StreamSelection.waitTimeoutMillis(Duration.ZERO)).as("no limit").isZero();
        assertThat(StreamSelection.waitTimeoutMillis(Duration.ofSeconds(60))).isEqualTo(60_000);
        assertThat(StreamSelection.waitTimeoutMillis(Duration.ofNanos(1))).as("never 0, which means none").isEqualTo(1);
        assertThat(StreamSelection.waitTimeoutMillis(Duration.ofMillis(Integer.MAX_VALUE))).isEqualTo(Integer.MAX_VALUE);
        assertThatThrownBy(() -> StreamSelection.waitTimeoutMillis(Duration.ofMillis(Integer.MAX_VALUE + 1L)))
                .isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> StreamSelection.waitTimeoutMillis(Duration.ofMillis(-1)))
                .isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> StreamSelection.cuda(7, 0, StreamSelection.CompletionWait.ADAPTIVE, 0, -1))
                .isInstanceOf(IllegalArgumentException.class);
    }
}
