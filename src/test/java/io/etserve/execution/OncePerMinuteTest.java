package io.etserve.execution;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

class OncePerMinuteTest {

    @Test
    void theFirstAskIsAnsweredAndTheNextOnesWithinTheMinuteAreNot() {
        OncePerMinute once = new OncePerMinute();
        assertThat(once.now()).isTrue();
        assertThat(once.now()).isFalse();
        assertThat(once.now()).isFalse();
    }

    @Test
    void amongThreadsAskingAtOnceOnlyOneIsAnswered() throws Exception {
        OncePerMinute once = new OncePerMinute();
        AtomicInteger said = new AtomicInteger();
        CountDownLatch start = new CountDownLatch(1);
        ExecutorService pool = Executors.newFixedThreadPool(8);
        try {
            List<Future<?>> asks = new ArrayList<>();
            for (int i = 0; i < 8; i++) {
                asks.add(pool.submit(() -> {
                    start.await();
                    for (int j = 0; j < 1_000; j++) {
                        if (once.now()) {
                            said.incrementAndGet();
                        }
                    }
                    return null;
                }));
            }
            start.countDown();
            for (Future<?> ask : asks) {
                ask.get(10, TimeUnit.SECONDS);
            }
        } finally {
            pool.shutdownNow();
        }
        assertThat(said).hasValue(1);
    }

    @Test
    void slowInlineCallsReportOnlySlowCallsAndAtMostOnceAMinute() {
        SlowInlineCalls slow = new SlowInlineCalls(0);
        assertThat(slow.report(100_000_000L)).isFalse();  // 100 ms is not over the floor
        assertThat(slow.report(100_000_001L)).isTrue();
        assertThat(slow.report(500_000_000L)).isFalse();  // within the minute
    }
}
