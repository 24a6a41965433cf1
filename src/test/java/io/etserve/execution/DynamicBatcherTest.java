package io.etserve.execution;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.etserve.cuda.CudaException;
import io.etserve.cuda.QueuePolicy;
import io.etserve.inference.Caller;
import io.etserve.inference.OverloadedException;
import io.etserve.inference.RequestCancelledException;
import io.etserve.modelconfig.DynamicBatching;
import io.etserve.runtime.ExecutionInput;
import io.etserve.runtime.StreamSelection;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The batcher's scheduling alone, over an instance pool whose capacity the test hands out: which
 * requests join, in what order, and what a request that finds no instance in time gets.
 */
class DynamicBatcherTest {

    /** Capacity the test releases one instance at a time; acquire waits like the real pools. */
    static final class GatedPool implements InstancePool {
        final Semaphore free = new Semaphore(0);

        @Override
        public ExecutionSlot acquire(Duration timeout) throws InterruptedException {
            if (!free.tryAcquire(timeout.toNanos(), TimeUnit.NANOSECONDS)) {
                throw new OverloadedException("all 1 instances are busy", timeout);
            }
            return new ExecutionSlot(null, StreamSelection.none(), () -> {});
        }

        @Override
        public int capacity() {
            return 1;
        }

        @Override
        public String placement() {
            return "cpu";
        }

        @Override
        public void close() {}
    }

    final GatedPool pool = new GatedPool();
    final ExecutorService waiters = Executors.newCachedThreadPool();
    DynamicBatcher batcher;

    @AfterEach
    void stop() {
        pool.free.release(100);
        batcher.close();
        waiters.shutdownNow();
    }

    static DynamicBatcher.Member member(int rows, int width) {
        ExecutionInput x = new ExecutionInput(ByteBuffer.allocateDirect(4 * rows * width), 6, new long[] {rows, width});
        return new DynamicBatcher.Member(List.of(x), rows, null, Duration.ZERO, Duration.ofSeconds(10));
    }

    Future<DynamicBatcher.Handover> queue(DynamicBatcher.Member m) {
        batcher.submit(m);
        return waiters.submit(m::await);
    }

    /** Queues each member in turn; their handovers, in the same order. */
    List<Future<DynamicBatcher.Handover>> queueAll(DynamicBatcher.Member... members) {
        List<Future<DynamicBatcher.Handover>> given = new ArrayList<>();
        for (DynamicBatcher.Member m : members) {
            given.add(queue(m));
        }
        return given;
    }

    /** Frees one instance: the batch it goes to, led by {@code leader}'s request (the test finishes it). */
    DynamicBatcher.Batch nextBatch(Future<DynamicBatcher.Handover> leader) throws Exception {
        pool.free.release();
        return (DynamicBatcher.Batch) leader.get(10, TimeUnit.SECONDS);
    }

    /** Queues three one-row requests, then frees an instance twice: the first two share a batch, the third goes alone. */
    void threeRequestsGoAsTwoThenOne() throws Exception {
        DynamicBatcher.Member a = member(1, 16);
        DynamicBatcher.Member b = member(1, 16);
        DynamicBatcher.Member c = member(1, 16);
        List<Future<DynamicBatcher.Handover>> given = queueAll(a, b, c);
        awaitQueued(3);
        DynamicBatcher.Batch first = nextBatch(given.get(0));
        assertThat(first.members()).containsExactly(a, b);
        batcher.finished(first);
        DynamicBatcher.Batch second = nextBatch(given.get(2));
        assertThat(second.members()).containsExactly(c);
        batcher.finished(second);
    }

    void awaitQueued(int n) throws InterruptedException {
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (batcher.queued() != n && System.nanoTime() < until) {
            Thread.sleep(2);
        }
        assertThat(batcher.queued()).isEqualTo(n);
    }

    @Test
    void requestsOfOtherShapesWaitForABatchOfTheirOwnAndNobodyOvertakes() throws Exception {
        batcher = new DynamicBatcher("m", "1", pool, new DynamicBatching(4, Duration.ZERO, List.of()));
        DynamicBatcher.Member a = member(1, 16);
        DynamicBatcher.Member b = member(1, 8);
        DynamicBatcher.Member c = member(2, 16);
        DynamicBatcher.Member d = member(2, 16);  // would overflow the first batch (1 + 2 + 2 > 4)
        List<Future<DynamicBatcher.Handover>> given = queueAll(a, b, c, d);
        awaitQueued(4);
        DynamicBatcher.Batch first = nextBatch(given.get(0));  // one instance: the head's batch
        assertThat(first.members()).containsExactly(a, c);
        assertThat(first.rows()).isEqualTo(3);
        batcher.finished(first);
        DynamicBatcher.Batch second = nextBatch(given.get(1));
        assertThat(second.members()).containsExactly(b);
        batcher.finished(second);
        DynamicBatcher.Batch third = nextBatch(given.get(3));
        assertThat(third.members()).containsExactly(d);
        batcher.finished(third);
    }

    @Test
    void aFlushedQueueGoesAtOnceInsteadOfWaitingForCompany() throws Exception {
        // Unloading: what is queued must end so the model can be freed, not wait out the delay.
        batcher = new DynamicBatcher("m", "1", pool, new DynamicBatching(8, Duration.ofSeconds(10), List.of()));
        pool.free.release();
        List<Future<DynamicBatcher.Handover>> given = queueAll(member(1, 16), member(1, 16));
        awaitQueued(2);
        Thread.sleep(50);
        assertThat(given.get(0)).as("two of eight rows: waiting for company").isNotDone();
        long t0 = System.nanoTime();
        batcher.flush();
        DynamicBatcher.Batch batch = (DynamicBatcher.Batch) given.get(0).get(10, TimeUnit.SECONDS);
        assertThat(Duration.ofNanos(System.nanoTime() - t0)).isLessThan(Duration.ofSeconds(5));
        assertThat(batch.rows()).isEqualTo(2);
        batcher.finished(batch);
        Future<DynamicBatcher.Handover> later = queue(member(1, 16));
        pool.free.release();
        DynamicBatcher.Batch alone = (DynamicBatcher.Batch) later.get(10, TimeUnit.SECONDS);
        assertThat(alone.rows()).as("still taken, and not kept waiting").isEqualTo(1);
        batcher.finished(alone);
    }

    @Test
    void aBatchStopsBeforeItsJoinedInputsWouldOutgrowOneBufferAndALargerRequestRunsAlone() throws Exception {
        // Three rows of 16 floats (64 bytes) fit a 150-byte batch two at a time; a 4-row request
        // (256 bytes) fits none with others and runs alone.
        batcher = new DynamicBatcher("m", "1", pool, new DynamicBatching(8, Duration.ZERO, List.of()),
                QueuePolicy.FIFO, 150);
        threeRequestsGoAsTwoThenOne();

        DynamicBatcher.Member large = member(4, 16);
        DynamicBatcher.Member small = member(1, 16);
        Future<DynamicBatcher.Handover> alone = queue(large);
        Future<DynamicBatcher.Handover> after = queue(small);
        awaitQueued(2);
        DynamicBatcher.Batch third = nextBatch(alone);
        assertThat(third.members()).containsExactly(large);
        batcher.finished(third);
        DynamicBatcher.Batch fourth = nextBatch(after);
        assertThat(fourth.members()).containsExactly(small);
        batcher.finished(fourth);
    }

    @Test
    void preferredSizesCutTheBatchWhereARequestEnds() throws Exception {
        batcher = new DynamicBatcher("m", "1", pool, new DynamicBatching(8, Duration.ZERO, List.of(2, 4)));
        List<DynamicBatcher.Member> ms = new ArrayList<>();
        List<Future<DynamicBatcher.Handover>> given = new ArrayList<>();
        for (int i = 0; i < 5; i++) {
            ms.add(member(1, 16));
            given.add(queue(ms.get(i)));
        }
        awaitQueued(5);
        DynamicBatcher.Batch first = nextBatch(given.get(0));
        assertThat(first.rows()).as("5 rows queued: cut at the preferred 4").isEqualTo(4);
        batcher.finished(first);
        DynamicBatcher.Batch second = nextBatch(given.get(4));
        assertThat(second.rows()).isEqualTo(1);
        batcher.finished(second);
    }

    @Test
    void aRequestThatFindsNoInstanceByItsDeadlineIsRejectedWithRetryAdvice() {
        batcher = new DynamicBatcher("m", "1", pool, new DynamicBatching(4, Duration.ofMillis(20), List.of()));
        ExecutionInput x = new ExecutionInput(ByteBuffer.allocateDirect(64), 6, new long[] {1, 16});
        DynamicBatcher.Member m = new DynamicBatcher.Member(List.of(x), 1, null, Duration.ofMillis(20),
                Duration.ofMillis(100));
        batcher.submit(m);
        assertThatThrownBy(m::await).isInstanceOf(OverloadedException.class)
                .hasMessageContaining("model 'm' is at capacity")
                .satisfies(e -> assertThat(((OverloadedException) e).retryAfter()).isNotNull());
        assertThat(batcher.queued()).isZero();
    }

    /** A caller the test sends away, as a closed connection or a cancelled call would. */
    static final class TestCaller implements Caller {
        volatile Runnable gone;
        volatile boolean left;

        @Override
        public Watch watch(Runnable gone) {
            this.gone = gone;
            if (left) {
                gone.run();
            }
            return () -> this.gone = null;
        }

        void leave() {
            left = true;
            Runnable g = gone;
            if (g != null) {
                g.run();
            }
        }
    }

    static DynamicBatcher.Member member(Cancellation cancellation, Consumer<RuntimeException> noInstance) {
        ExecutionInput x = new ExecutionInput(ByteBuffer.allocateDirect(64), 6, new long[] {1, 16});
        return new DynamicBatcher.Member(List.of(x), 1, null, Duration.ZERO, Duration.ofSeconds(10), cancellation,
                InferenceSpans.NONE, noInstance);
    }

    @Test
    void aRequestWhoseCallerGoesLeavesTheQueueAndTheBatchFormsWithoutIt() throws Exception {
        batcher = new DynamicBatcher("m", "1", pool, new DynamicBatching(4, Duration.ZERO, List.of()));
        TestCaller caller = new TestCaller();
        DynamicBatcher.Member a = member(1, 16);
        DynamicBatcher.Member b = member(Cancellation.of(caller, Map.of(), System.nanoTime()), e -> {});
        DynamicBatcher.Member c = member(1, 16);
        List<Future<DynamicBatcher.Handover>> given = queueAll(a, b, c);
        awaitQueued(3);
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (caller.gone == null && System.nanoTime() < until) {
            Thread.sleep(1);
        }
        assertThat(caller.gone).as("watched once it has waited a little").isNotNull();
        caller.leave();
        assertThatThrownBy(() -> given.get(1).get(10, TimeUnit.SECONDS)).cause()
                .isInstanceOf(RequestCancelledException.class).hasMessageContaining("the client went away")
                .satisfies(e -> {
                    assertThat(((RequestCancelledException) e).reason()).isEqualTo(RequestCancelledException.Reason.CLIENT);
                    assertThat(((RequestCancelledException) e).stage()).isEqualTo(RequestCancelledException.Stage.BATCH);
                });
        awaitQueued(2);
        // A caller gave up on the queue: the batch is cut from its newest end (QueuePolicy.DEFAULT).
        DynamicBatcher.Batch batch = nextBatch(given.get(2));
        assertThat(batch.members()).containsExactly(c, a);
        assertThat(batch.rows()).isEqualTo(2);
        batcher.finished(batch);
        // Once in a batch, a request is not withdrawn: its batch's leader decides.
        assertThat(batcher.withdraw(a, new IllegalStateException("too late"))).isFalse();
    }

    @Test
    void aRequestWhoseTimeoutPassesInTheQueueLeavesItWithTritonsError() {
        batcher = new DynamicBatcher("m", "1", pool, new DynamicBatching(4, Duration.ZERO, List.of()));
        // The queue's own timeout is ten minutes: only the request's 100 ms can end the wait
        // within the test's guard.
        ExecutionInput x = new ExecutionInput(ByteBuffer.allocateDirect(64), 6, new long[] {1, 16});
        DynamicBatcher.Member m = new DynamicBatcher.Member(List.of(x), 1, null, Duration.ZERO, Duration.ofMinutes(10),
                Cancellation.of(Caller.STAYS, Map.of("timeout", 100_000L), System.nanoTime()), InferenceSpans.NONE,
                e -> {});
        batcher.submit(m);
        Future<DynamicBatcher.Handover> waiting = waiters.submit(m::await);
        assertThatThrownBy(() -> waiting.get(60, TimeUnit.SECONDS)).cause().isInstanceOf(RequestCancelledException.class)
                .hasMessageContaining("request timeout expired").hasMessageContaining("100000 us")
                .satisfies(e -> assertThat(((RequestCancelledException) e).reason())
                        .isEqualTo(RequestCancelledException.Reason.TIMEOUT));
        assertThat(batcher.queued()).isZero();
    }

    @Test
    void aRequestWhoseTimeoutIsShorterThanTheDelayRunsInASmallerBatchInsteadOfFailing() throws Exception {
        batcher = new DynamicBatcher("m", "1", pool, new DynamicBatching(8, Duration.ofSeconds(5), List.of()));
        pool.free.release();
        ExecutionInput x = new ExecutionInput(ByteBuffer.allocateDirect(64), 6, new long[] {1, 16});
        DynamicBatcher.Member hurried = new DynamicBatcher.Member(List.of(x), 1, null, Duration.ofSeconds(5),
                Duration.ofSeconds(10), Cancellation.of(Caller.STAYS, Map.of("timeout", 400_000L), System.nanoTime()),
                InferenceSpans.NONE, e -> {});
        long t0 = System.nanoTime();
        List<Future<DynamicBatcher.Handover>> given = queueAll(member(1, 16), hurried);
        DynamicBatcher.Batch batch = (DynamicBatcher.Batch) given.get(0).get(10, TimeUnit.SECONDS);
        assertThat(Duration.ofNanos(System.nanoTime() - t0)).as("not after the 5 s delay").isLessThan(Duration.ofSeconds(2));
        assertThat(batch.members()).as("cut before its 400 ms passed: it runs").hasSize(2).contains(hurried);
        batcher.finished(batch);
    }

    @Test
    void aPoolThatFailsAsAFaultedDevicesDoesIsReportedOnceAndFailsEveryQueuedRequest() throws Exception {
        CudaException sticky = new CudaException("cudaStreamQuery", 700, "cudaErrorIllegalAddress",
                "an illegal memory access was encountered");
        InstancePool faulted = new InstancePool() {
            @Override
            public ExecutionSlot acquire(Duration timeout) {
                throw sticky;
            }

            @Override
            public int capacity() {
                return 1;
            }

            @Override
            public String placement() {
                return "cuda:0";
            }

            @Override
            public void close() {}
        };
        // Four one-row requests fill the batch (max 4): the scheduler asks the pool once.
        batcher = new DynamicBatcher("m", "1", faulted, new DynamicBatching(4, Duration.ofSeconds(10), List.of()));
        List<RuntimeException> heard = new CopyOnWriteArrayList<>();
        List<Future<DynamicBatcher.Handover>> given = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            given.add(queue(member(Cancellation.none(), heard::add)));
        }
        for (Future<DynamicBatcher.Handover> f : given) {
            assertThatThrownBy(() -> f.get(10, TimeUnit.SECONDS)).cause().isSameAs(sticky);
        }
        assertThat(heard).as("the fault listener hears it once, as from one unbatched call").containsExactly(sticky);
    }

    @Test
    void afterACallerGaveUpOnTheQueueBatchesAreCutFromItsNewestEnd() throws Exception {
        batcher = new DynamicBatcher("m", "1", pool, new DynamicBatching(2, Duration.ZERO, List.of()),
                new QueuePolicy(QueuePolicy.Order.ADAPTIVE_LIFO, Duration.ofHours(1),
                        Duration.ZERO));
        DynamicBatcher.Member impatient = member(1, 16);
        batcher.submit(impatient);
        assertThat(batcher.withdraw(impatient, new RequestCancelledException(RequestCancelledException.Reason.CLIENT,
                RequestCancelledException.Stage.BATCH, "gone"))).isTrue();
        DynamicBatcher.Member a = member(1, 16);
        DynamicBatcher.Member b = member(1, 16);
        DynamicBatcher.Member c = member(1, 16);
        DynamicBatcher.Member d = member(1, 16);
        List<Future<DynamicBatcher.Handover>> given = queueAll(a, b, c, d);
        awaitQueued(4);
        DynamicBatcher.Batch first = nextBatch(given.get(3));
        assertThat(first.members()).as("the newest two, the newest leading").containsExactly(d, c);
        batcher.finished(first);
        DynamicBatcher.Batch second = nextBatch(given.get(1));
        assertThat(second.members()).containsExactly(b, a);
        batcher.finished(second);
    }

    @Test
    void withNobodyGivingUpAnAdaptiveQueueIsCutInArrivalOrder() throws Exception {
        batcher = new DynamicBatcher("m", "1", pool, new DynamicBatching(2, Duration.ZERO, List.of()),
                QueuePolicy.DEFAULT);
        threeRequestsGoAsTwoThenOne();
    }
}
