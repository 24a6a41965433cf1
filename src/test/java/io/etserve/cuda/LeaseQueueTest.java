package io.etserve.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class LeaseQueueTest {

    private static final long SECOND = TimeUnit.SECONDS.toNanos(1);
    private static final long FREE = LeaseQueue.FREE;

    private final ExecutorService exec = Executors.newCachedThreadPool();

    @AfterEach
    void stop() {
        exec.shutdownNow();
    }

    private static void awaitWaiting(LeaseQueue q, int n) throws InterruptedException {
        long deadline = System.nanoTime() + 5 * SECOND;
        while (q.waitingCount() != n && System.nanoTime() < deadline) {
            Thread.sleep(1);
        }
        assertThat(q.waitingCount()).isEqualTo(n);
    }

    @Test
    void freeSlotsGoOutInTurnWithoutWaiting() throws Exception {
        LeaseQueue q = new LeaseQueue(3, 0);
        assertThat(q.take(0)).isZero();
        assertThat(q.take(0)).isEqualTo(1);
        q.give(0);
        assertThat(q.take(0)).isEqualTo(2);
        assertThat(q.take(0)).isZero();
        assertThat(q.take(0)).isEqualTo(-1);
        assertThat(q.freeCount()).isZero();
        assertThatThrownBy(() -> new LeaseQueue(2, 0).give(1)).isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("not taken");
    }

    @ParameterizedTest(name = "slice {0} ns")
    @ValueSource(longs = {0, 50_000})
    void aReleasedSlotGoesToTheLongestWaiterNotBackToTheReleaser(long slice) throws Exception {
        LeaseQueue q = new LeaseQueue(1, slice);
        int held = q.take(0);
        List<Integer> served = new CopyOnWriteArrayList<>();
        List<Future<?>> waiters = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            int id = i;
            waiters.add(exec.submit(() -> {
                int slot = q.take(10 * SECOND);
                served.add(id);
                q.give(slot);
                return null;
            }));
            awaitWaiting(q, i + 1); // joined the line in this order
        }
        q.give(held);
        // The releaser asks again at once: the slot is already the first waiter's.
        int again = q.take(0);
        if (again >= 0) {
            assertThat(served).isNotEmpty(); // only after the first waiter was served and gave it back
            q.give(again);
        }
        for (Future<?> w : waiters) {
            w.get(10, TimeUnit.SECONDS);
        }
        assertThat(served).containsExactly(0, 1, 2);
        assertThat(q.freeCount()).isEqualTo(1);
        assertThat(q.waitingCount()).isZero();
    }

    @Test
    void aWaiterThatTimesOutLeavesTheLine() throws Exception {
        LeaseQueue q = new LeaseQueue(1, 0);
        int held = q.take(0);
        long start = System.nanoTime();
        assertThat(q.take(TimeUnit.MILLISECONDS.toNanos(50))).isEqualTo(-1);
        assertThat(System.nanoTime() - start).isGreaterThanOrEqualTo(TimeUnit.MILLISECONDS.toNanos(45));
        assertThat(q.waitingCount()).isZero();
        q.give(held);
        assertThat(q.freeCount()).isEqualTo(1); // not handed to the waiter that left
    }

    @Test
    void anInterruptedWaiterLeavesTheLineAndKeepsNothing() throws Exception {
        LeaseQueue q = new LeaseQueue(1, 0);
        int held = q.take(0);
        Future<Integer> waiter = exec.submit(() -> q.take(10 * SECOND));
        awaitWaiting(q, 1);
        waiter.cancel(true);
        awaitWaiting(q, 0);
        q.give(held);
        assertThat(q.freeCount()).isEqualTo(1);
        Thread.currentThread().interrupt();
        assertThatThrownBy(() -> q.take(0)).isInstanceOf(InterruptedException.class);
        assertThat(q.freeCount()).isEqualTo(1);
    }

    private static long turn(long[] takenAt, long hold, int position, long now) {
        return LeaseQueue.expectedTurn(takenAt, hold, position, now, new long[takenAt.length]);
    }

    @Test
    void aWaitersTurnIsWhenTheHeldSlotsComeBackInOrder() {
        long hold = 1_000;
        long[] takenAt = {0, 100, FREE, 400};
        // Slots return at 1000, 1100 and 1400; then a second round of holds.
        assertThat(turn(takenAt, hold, 0, 500)).isEqualTo(1_000);
        assertThat(turn(takenAt, hold, 1, 500)).isEqualTo(1_100);
        assertThat(turn(takenAt, hold, 2, 500)).isEqualTo(1_400);
        assertThat(turn(takenAt, hold, 3, 500)).isEqualTo(2_000);
        // A slot held past the average is due now, not in the past.
        assertThat(turn(takenAt, hold, 0, 1_050)).isEqualTo(1_050);
        // Nothing learned yet, or nothing held: now.
        assertThat(turn(takenAt, 0, 2, 500)).isEqualTo(500);
        assertThat(turn(new long[] {FREE}, hold, 0, 500)).isEqualTo(500);
    }

    @ParameterizedTest(name = "slice {0} ns")
    @ValueSource(longs = {0, 20_000})
    void timeoutsAndInterruptsRacingHandOversLoseNoSlot(long slice) throws Exception {
        // A waiter that times out or is interrupted just as a slot is handed to it must pass
        // the slot on: if it kept or dropped it, slots would go missing or be held twice.
        LeaseQueue q = new LeaseQueue(2, slice);
        AtomicIntegerArray holders = new AtomicIntegerArray(2);
        AtomicInteger overlaps = new AtomicInteger();
        List<Thread> callers = new ArrayList<>();
        long end = System.nanoTime() + SECOND;
        for (int t = 0; t < 12; t++) {
            Thread caller = new Thread(() -> {
                while (System.nanoTime() < end) {
                    int slot;
                    try {
                        slot = q.take(ThreadLocalRandom.current().nextInt(1_000, 200_000));
                    } catch (InterruptedException e) {
                        continue;
                    }
                    if (slot < 0) {
                        continue;
                    }
                    if (holders.incrementAndGet(slot) != 1) {
                        overlaps.incrementAndGet();
                    }
                    for (int i = ThreadLocalRandom.current().nextInt(50); i > 0; i--) {
                        Thread.onSpinWait();
                    }
                    holders.decrementAndGet(slot);
                    Thread.interrupted(); // an interrupt meant for the wait
                    q.give(slot);
                }
            });
            callers.add(caller);
            caller.start();
        }
        while (System.nanoTime() < end) {
            callers.get(ThreadLocalRandom.current().nextInt(callers.size())).interrupt();
            Thread.onSpinWait();
        }
        for (Thread caller : callers) {
            caller.join(20_000);
            assertThat(caller.isAlive()).isFalse();
        }
        assertThat(overlaps.get()).isZero();
        assertThat(q.freeCount()).isEqualTo(2);
        assertThat(q.waitingCount()).isZero();
    }

    @Test
    void aSlotGivenBackUnusedIsNotCountedAsAHold() throws Exception {
        LeaseQueue q = new LeaseQueue(1, 50_000);
        q.giveBack(q.take(0));
        assertThat(q.holdNanos()).isZero();
        int slot = q.take(0);
        Thread.sleep(20);
        q.give(slot);
        assertThat(q.holdNanos()).isGreaterThanOrEqualTo(TimeUnit.MILLISECONDS.toNanos(19));
        assertThat(q.freeCount()).isEqualTo(1);
    }

    /** An abandon the test triggers, as a client that goes would: set, then unpark the waiter. */
    static final class TestAbandon implements LeaseQueue.Abandon {
        final AtomicInteger parked = new AtomicInteger();
        volatile Thread waiter;
        volatile boolean gone;

        @Override
        public long watchAfterNanos() {
            return TimeUnit.MILLISECONDS.toNanos(20);
        }

        @Override
        public void watching(Thread waiter) {
            parked.incrementAndGet();
            this.waiter = waiter;
        }

        @Override
        public boolean abandoned() {
            return gone;
        }

        void go() {
            gone = true;
            LockSupport.unpark(waiter);
        }
    }

    @ParameterizedTest(name = "slice {0} ns")
    @ValueSource(longs = {0, 50_000})
    void aWaiterWhoseCallerGoesLeavesTheLineAtOnceAndTheSlotGoesToTheNext(long slice) throws Exception {
        LeaseQueue q = new LeaseQueue(1, slice);
        TestAbandon free = new TestAbandon();
        int held = q.take(10 * SECOND, free);
        assertThat(free.parked).as("a caller served at once is never watched").hasValue(0);
        TestAbandon brief = new TestAbandon();
        assertThat(q.take(TimeUnit.MILLISECONDS.toNanos(5), brief)).as("none free").isEqualTo(-1);
        assertThat(brief.parked).as("a wait shorter than its grace is never watched").hasValue(0);
        TestAbandon first = new TestAbandon();
        // A ten-minute timeout: only its caller's going can end the wait within the guard below.
        Future<Integer> abandoned = exec.submit(() -> q.take(600 * SECOND, first));
        awaitWaiting(q, 1);
        Future<Integer> second = exec.submit(() -> q.take(10 * SECOND));
        awaitWaiting(q, 2);
        long until = System.nanoTime() + 5 * SECOND;
        while (first.parked.get() == 0 && System.nanoTime() < until) {
            Thread.sleep(1);
        }
        assertThat(first.parked).as("watched once, after its first 20 ms").hasValue(1);
        first.go();
        assertThat(abandoned.get(60, TimeUnit.SECONDS)).as("left when its caller went").isEqualTo(-1);
        awaitWaiting(q, 1);
        q.give(held);
        assertThat(second.get(5, TimeUnit.SECONDS)).isEqualTo(held);
        q.give(held);
        assertThat(q.freeCount()).isEqualTo(1);
    }

    /** Newest first for an hour after a give-up: long past any test's run. */
    private static final QueuePolicy ADAPTIVE = new QueuePolicy(QueuePolicy.Order.ADAPTIVE_LIFO,
            Duration.ofHours(1), Duration.ZERO);

    /** Waiters that joined {@code q} in the order given, each recording its id once served. */
    private List<Future<?>> line(LeaseQueue q, List<Integer> served, int... ids) throws InterruptedException {
        List<Future<?>> waiters = new ArrayList<>();
        for (int id : ids) {
            int waiting = q.waitingCount();
            waiters.add(exec.submit(() -> {
                int slot = q.take(10 * SECOND);
                served.add(id);
                q.give(slot);
                return null;
            }));
            awaitWaiting(q, waiting + 1);
        }
        return waiters;
    }

    @ParameterizedTest(name = "slice {0} ns")
    @ValueSource(longs = {0, 50_000})
    void anAdaptiveLineServesInArrivalOrderWhileNobodyGivesUp(long slice) throws Exception {
        LeaseQueue q = new LeaseQueue(1, slice, ADAPTIVE);
        int held = q.take(0);
        List<Integer> served = new CopyOnWriteArrayList<>();
        List<Future<?>> waiters = line(q, served, 0, 1, 2);
        q.give(held);
        for (Future<?> w : waiters) {
            w.get(10, TimeUnit.SECONDS);
        }
        assertThat(served).containsExactly(0, 1, 2);
    }

    @ParameterizedTest(name = "slice {0} ns")
    @ValueSource(longs = {0, 50_000})
    void afterACallerGaveUpTheNewestWaiterIsServedFirst(long slice) throws Exception {
        LeaseQueue q = new LeaseQueue(1, slice, ADAPTIVE);
        int held = q.take(0);
        TestAbandon impatient = new TestAbandon();
        impatient.gone = true;  // its caller went while it waited
        assertThat(q.take(10 * SECOND, impatient)).isEqualTo(-1);
        List<Integer> served = new CopyOnWriteArrayList<>();
        List<Future<?>> waiters = line(q, served, 0, 1, 2);
        q.give(held);
        for (Future<?> w : waiters) {
            w.get(10, TimeUnit.SECONDS);
        }
        // Each waiter gives the slot back while the older ones still wait: the newest of them next.
        assertThat(served).containsExactly(2, 1, 0);
    }

    @Test
    void aWaiterWhoseDeadlinePassedGaveUpButOneThatRanOutOfTheQueueTimeoutDidNot() throws Exception {
        LeaseQueue q = new LeaseQueue(1, 0, ADAPTIVE);
        int held = q.take(0);
        assertThat(q.take(TimeUnit.MILLISECONDS.toNanos(5))).as("the server's own bound").isEqualTo(-1);
        List<Integer> served = new CopyOnWriteArrayList<>();
        List<Future<?>> waiters = line(q, served, 0, 1);
        q.give(held);
        for (Future<?> w : waiters) {
            w.get(10, TimeUnit.SECONDS);
        }
        assertThat(served).as("still arrival order").containsExactly(0, 1);

        held = q.take(0);
        LeaseQueue.Abandon pastDeadline = new LeaseQueue.Abandon() {
            @Override
            public void watching(Thread waiter) {}

            @Override
            public boolean abandoned() {
                return false;
            }

            @Override
            public boolean expired(long now) {
                return true;
            }
        };
        assertThat(q.take(TimeUnit.MILLISECONDS.toNanos(5), pastDeadline)).isEqualTo(-1);
        served.clear();
        waiters = line(q, served, 0, 1);
        q.give(held);
        for (Future<?> w : waiters) {
            w.get(10, TimeUnit.SECONDS);
        }
        assertThat(served).as("its caller's deadline: newest first").containsExactly(1, 0);
    }

    @Test
    void aFifoLineIgnoresGiveUps() throws Exception {
        LeaseQueue q = new LeaseQueue(1, 0, QueuePolicy.FIFO);
        int held = q.take(0);
        TestAbandon impatient = new TestAbandon();
        impatient.gone = true;
        assertThat(q.take(10 * SECOND, impatient)).isEqualTo(-1);
        List<Integer> served = new CopyOnWriteArrayList<>();
        List<Future<?>> waiters = line(q, served, 0, 1, 2);
        q.give(held);
        for (Future<?> w : waiters) {
            w.get(10, TimeUnit.SECONDS);
        }
        assertThat(served).containsExactly(0, 1, 2);
    }
}
