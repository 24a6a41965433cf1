package io.etserve.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import org.junit.jupiter.api.Test;

/** The order decision alone, on times the test gives (nanoTime values, some negative as it may return). */
class QueuePolicyTest {

    private static final long MS = 1_000_000;

    private static QueuePolicy adaptive(Duration window, Duration maxFifoWait) {
        return new QueuePolicy(QueuePolicy.Order.ADAPTIVE_LIFO, window, maxFifoWait);
    }

    @Test
    void arrivalOrderUntilACallerGivesUp() {
        QueuePolicy.Line line = QueuePolicy.DEFAULT.newLine();
        long t = -5_000 * MS;
        assertThat(line.newestFirst(t, t - 10_000 * MS)).as("a long standing line of patient callers").isFalse();
        assertThat(line.newestFirst(t + 1, t)).isFalse();
    }

    @Test
    void newestFirstForTheWindowAfterACallerGaveUpThenArrivalOrderAgain() {
        QueuePolicy.Line line = adaptive(Duration.ofMillis(1000), Duration.ZERO).newLine();
        long t = Long.MAX_VALUE - 500 * MS;  // the window runs across nanoTime's wrap
        line.callerGaveUp(t);
        assertThat(line.newestFirst(t, t)).isTrue();
        assertThat(line.newestFirst(t + 999 * MS, t)).isTrue();
        assertThat(line.newestFirst(t + 1000 * MS, t)).as("the window is over").isFalse();
        line.callerGaveUp(t + 1500 * MS);
        assertThat(line.newestFirst(t + 2000 * MS, t)).as("each give-up opens it again").isTrue();
        assertThat(line.newestFirst(t + 2500 * MS, t)).isFalse();
    }

    @Test
    void theOldestWaitPastMaxFifoWaitTurnsTheLineNewestFirstWithoutAnyGiveUp() {
        QueuePolicy.Line line = adaptive(Duration.ofSeconds(1), Duration.ofMillis(50)).newLine();
        long now = -100 * MS;
        assertThat(line.newestFirst(now, now - 50 * MS)).as("at it").isFalse();
        assertThat(line.newestFirst(now, now - 51 * MS)).as("past it").isTrue();
        QueuePolicy.Line never = adaptive(Duration.ofSeconds(1), Duration.ZERO).newLine();
        assertThat(never.newestFirst(now, now - 3_600_000 * MS)).as("0: never").isFalse();
    }

    @Test
    void fifoIsArrivalOrderWhateverHappens() {
        QueuePolicy.Line line = new QueuePolicy(QueuePolicy.Order.FIFO, Duration.ofHours(1), Duration.ofMillis(1))
                .newLine();
        line.callerGaveUp(0);
        assertThat(line.newestFirst(1, -3_600_000 * MS)).isFalse();
        QueuePolicy.Line streams = QueuePolicy.FIFO.newLine();
        streams.callerGaveUp(0);
        assertThat(streams.newestFirst(0, -1)).isFalse();
    }

    @Test
    void aZeroWindowIgnoresGiveUps() {
        QueuePolicy.Line line = adaptive(Duration.ZERO, Duration.ZERO).newLine();
        line.callerGaveUp(7);
        assertThat(line.newestFirst(7, 0)).isFalse();
    }

    @Test
    void refusesNegativeTimesAndNoOrder() {
        assertThatThrownBy(() -> adaptive(Duration.ofMillis(-1), Duration.ZERO))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("give-up-window");
        assertThatThrownBy(() -> adaptive(Duration.ZERO, Duration.ofMillis(-1)))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("max-fifo-wait");
        assertThatThrownBy(() -> new QueuePolicy(null, Duration.ZERO, Duration.ZERO))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("fifo or adaptive-lifo");
    }
}
