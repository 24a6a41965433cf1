package io.etserve.execution;

import io.etserve.cuda.QueuePolicy;
import io.etserve.inference.ModelUnavailableException;
import io.etserve.inference.OverloadedException;
import io.etserve.inference.RequestCancelledException;
import io.etserve.modelconfig.DynamicBatching;
import io.etserve.runtime.ExecutionInput;
import io.etserve.runtime.ExecutionOutput;
import io.etserve.runtime.OutputBuffers;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Forms batches for one model version: requests queue, and one scheduler thread joins those that
 * can share a forward call (same dimensions after the first) until the batch is full, a preferred
 * size is reached, or the first request has waited {@code max-queue-delay}. It then waits for a
 * free instance (the queue keeps growing meanwhile, so batches grow under load) and hands the
 * batch, with that instance, to the batch's first request (its oldest; its newest while the queue
 * policy serves newest first, {@link #take}): that request's own thread runs the
 * batch ({@link Batch#run}: join the inputs, one forward call, cut the outputs back) for
 * everyone, so no thread sits between the HTTP threads and the runtime and a lone request costs
 * one hand-off.
 *
 * <p>Every queued request ends in exactly one of: leading a batch, its share of a batch's outputs
 * ({@link Handover}), or an error. A request that finds no instance by its deadline gets 503;
 * closing stops new requests and runs everything already queued (without waiting for company)
 * before it returns.
 * A request whose caller goes, or whose own deadline passes, while it is queued is withdrawn
 * ({@link #withdraw}): it never joins a batch, and a batch that has not been cut yet simply
 * forms without it. A failure to find an instance for the queue is reported once, through the
 * head request's hook, as an unbatched request's would be.
 *
 * <p>A batch is cut from the oldest requests, or from the newest while callers give up on the
 * queue ({@link QueuePolicy}, the same order as the instance line's).
 */
public final class DynamicBatcher implements AutoCloseable {

    private static final Logger log = LoggerFactory.getLogger(DynamicBatcher.class);

    private final String model;
    private final InstancePool instances;
    private final DynamicBatching policy;
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition arrived = lock.newCondition();
    private final Condition idle = lock.newCondition();
    private final ArrayDeque<Member> queue = new ArrayDeque<>();
    /** Which end a batch is cut from; under the lock. */
    private final QueuePolicy.Line order;
    private final Thread scheduler;
    /**
     * The most input bytes one batch joins: each joined input is one direct buffer, which holds at
     * most 2 GiB. Requests each within their limits can add up past it at a large max batch size;
     * a batch stops before it would, and a request that alone is larger runs alone.
     */
    static final long MAX_BATCH_BYTES = Integer.MAX_VALUE;

    private final long maxBatchBytes;
    private int running;  // batches handed out and not yet finished
    private boolean closing;
    /** Set when the model is being unloaded: queued requests go at once, without waiting for company. */
    private boolean flushing;

    public DynamicBatcher(String model, String version, InstancePool instances, DynamicBatching policy) {
        this(model, version, instances, policy, QueuePolicy.DEFAULT);
    }

    public DynamicBatcher(String model, String version, InstancePool instances, DynamicBatching policy,
            QueuePolicy order) {
        this(model, version, instances, policy, order, MAX_BATCH_BYTES);
    }

    /** @param maxBatchBytes the most input bytes one batch joins (tests make it small) */
    DynamicBatcher(String model, String version, InstancePool instances, DynamicBatching policy, QueuePolicy order,
            long maxBatchBytes) {
        this.maxBatchBytes = maxBatchBytes;
        this.order = order.newLine();
        this.model = model;
        this.instances = instances;
        this.policy = policy;
        this.scheduler = new Thread(this::schedule, "etserve-batcher-" + model + "-" + version);
        scheduler.setDaemon(true);
        scheduler.start();
    }

    public DynamicBatching policy() {
        return policy;
    }

    /** Requests waiting for a batch now. */
    public int queued() {
        lock.lock();
        try {
            return queue.size();
        } finally {
            lock.unlock();
        }
    }

    /**
     * Queues {@code me} and returns its share of the batch it ran in: when it leads, its own
     * thread runs the batch for everyone ({@link Batch#run}). Its queue span ends when its batch
     * is cut, and names the batch's forward span.
     *
     * @param model the model version this batcher serves, whose calls {@code forward} admits
     * @throws RuntimeException what failed it: the batch's error, or why it never joined one
     */
    Share run(Member me, LoadedModel model, Forward forward) {
        Handover given;
        try {
            submit(me);
            given = me.await();
        } catch (RuntimeException e) {
            me.queue.failed(e);
            me.queue.close();
            throw e;
        }
        return given.claim(me, model, forward);
    }

    /**
     * Queues {@code member}; it then waits in {@link Member#await()}.
     *
     * @throws ModelUnavailableException once closing has begun
     */
    void submit(Member member) {
        lock.lock();
        try {
            if (closing) {
                throw new ModelUnavailableException("model '" + model + "' is unloading", Duration.ofSeconds(1));
            }
            member.batcher = this;
            queue.addLast(member);
            arrived.signal();
        } finally {
            lock.unlock();
        }
    }

    /**
     * Takes {@code member} out of the queue and fails it with {@code why}, unless it has left the
     * queue already (it leads or joined a batch, or has its answer): then nothing changes.
     *
     * @return whether it was withdrawn
     */
    boolean withdraw(Member member, RuntimeException why) {
        boolean removed;
        lock.lock();
        try {
            removed = queue.remove(member);
            if (removed) {
                order.callerGaveUp(System.nanoTime());  // its caller went or its deadline passed
                arrived.signal();  // it may have been the head the scheduler waits on
            }
        } finally {
            lock.unlock();
        }
        if (removed) {
            member.future.completeExceptionally(why);
        }
        return removed;
    }

    String model() {
        return model;
    }

    /** The leader reports its batch done (outputs handed out or failed), so closing can finish. */
    void finished(Batch batch) {
        lock.lock();
        try {
            running--;
            idle.signalAll();
        } finally {
            lock.unlock();
        }
    }

    private void schedule() {
        while (true) {
            Member first;
            lock.lock();
            try {
                while (queue.isEmpty()) {
                    if (closing) {
                        return;
                    }
                    arrived.awaitUninterruptibly();
                }
                first = queue.peekFirst();
                long left;
                while (!closing && !flushing && queue.peekFirst() == first && compatibleRows(first) < policy.dispatchRows()
                        && (left = cutBy(first) - System.nanoTime()) > 0) {
                    arrived.awaitNanos(left);
                }
                if (queue.peekFirst() != first) {
                    continue;  // the head was withdrawn: the next one's delay decides
                }
            } catch (InterruptedException e) {
                // awaitNanos only; the scheduler is never interrupted by the service
                continue;
            } finally {
                lock.unlock();
            }
            ExecutionSlot slot;
            try {
                slot = instances.acquire(Duration.ofNanos(Math.max(0, first.deadlineNanos - System.nanoTime())));
            } catch (OverloadedException e) {
                failWaitingPast(System.nanoTime(), new OverloadedException("model '" + model
                        + "' is at capacity: no instance became free for its batch in time (" + e.getMessage() + ")",
                        e.retryAfter()));
                continue;
            } catch (InterruptedException | RuntimeException e) {
                // The pool is closing or broken (a faulted device's): nothing queued can run.
                log.warn("model '{}': no instance for queued requests: {}", model, e.toString());
                RuntimeException failure = e instanceof RuntimeException r ? r
                        : new ModelUnavailableException("interrupted");
                first.noInstance.accept(failure);  // once, as one unbatched call's failure would be
                failAll(failure);
                continue;
            }
            Batch batch = take(slot);
            if (batch == null) {
                slot.close();
                continue;
            }
            batch.members().get(0).future.complete(batch);
        }
    }

    /**
     * When the batch {@code head} leads goes at the latest: at the end of its queue delay, or
     * before a queued member that would join it reaches its own timeout (less a quarter of that
     * timeout, at most {@link #TIMEOUT_SLACK_NANOS}): a request whose timeout is shorter than the
     * delay runs in a smaller batch instead of failing while an instance may be free.
     */
    private long cutBy(Member head) {
        long by = head.enqueuedNanos + policy.maxQueueDelay().toNanos();
        for (Member m : queue) {
            if (m.key.equals(head.key) && m.cancellation.bounded()) {
                long own = m.cancellation.deadlineNanos();
                by = Math.min(by, own - Math.min(TIMEOUT_SLACK_NANOS, (own - m.enqueuedNanos) / 4));
            }
        }
        return by;
    }

    /** How long before a member's own timeout its batch goes at the latest (see {@link #cutBy}). */
    static final long TIMEOUT_SLACK_NANOS = 50_000_000;

    /** Rows queued that could join {@code head}'s batch. Under the lock. */
    private int compatibleRows(Member head) {
        int rows = 0;
        for (Member m : queue) {
            if (m.key.equals(head.key)) {
                rows += m.rows;
            }
        }
        return rows;
    }

    /**
     * The batch at the head of the queue (its newest end while the queue is congested), on
     * {@code slot}; null when the queue emptied meanwhile.
     */
    private Batch take(ExecutionSlot slot) {
        lock.lock();
        try {
            Member oldest = queue.peekFirst();
            if (oldest == null) {
                return null;
            }
            boolean newestFirst = order.newestFirst(System.nanoTime(), oldest.enqueuedNanos);
            Member head = newestFirst ? queue.peekLast() : oldest;
            List<Member> members = new ArrayList<>();
            // A request larger than a batch runs alone; the head always fits its own batch.
            int limit = Math.max(head.rows, policy.cut(compatibleRows(head)));
            int rows = 0;
            long bytes = 0;
            for (Iterator<Member> it = newestFirst ? queue.descendingIterator() : queue.iterator(); it.hasNext(); ) {
                Member m = it.next();
                if (!m.key.equals(head.key)) {
                    continue;  // waits for a batch of its own shape
                }
                if (rows + m.rows > limit || (!members.isEmpty() && bytes + m.bytes > maxBatchBytes)) {
                    break;  // in the queue's order: nobody overtakes it
                }
                it.remove();
                members.add(m);
                rows += m.rows;
                bytes += m.bytes;
            }
            running++;
            return new Batch(members, rows, slot, System.nanoTime());
        } finally {
            lock.unlock();
        }
    }

    private void failWaitingPast(long now, RuntimeException e) {
        List<Member> expired = new ArrayList<>();
        lock.lock();
        try {
            queue.removeIf(m -> m.deadlineNanos - now <= 0 && expired.add(m));
        } finally {
            lock.unlock();
        }
        expired.forEach(m -> m.future.completeExceptionally(e));
    }

    private void failAll(RuntimeException e) {
        List<Member> all;
        lock.lock();
        try {
            all = new ArrayList<>(queue);
            queue.clear();
        } finally {
            lock.unlock();
        }
        all.forEach(m -> m.future.completeExceptionally(e));
    }

    /**
     * From now on, queued requests run at once, without waiting for company (the model is being
     * unloaded: its requests must end so it can be freed, not wait out the queue delay). New
     * requests are still taken: they had their use of the model before it began to go.
     */
    public void flush() {
        lock.lock();
        try {
            flushing = true;
            arrived.signalAll();
        } finally {
            lock.unlock();
        }
    }

    /**
     * Refuses new requests, runs the queued ones at once and waits (bounded) for every batch to
     * finish, so the instances can be closed after.
     */
    @Override
    public void close() {
        lock.lock();
        try {
            closing = true;
            arrived.signalAll();
        } finally {
            lock.unlock();
        }
        try {
            scheduler.join(TimeUnit.SECONDS.toMillis(30));
            lock.lock();
            try {
                long left = TimeUnit.SECONDS.toNanos(30);
                while (running > 0 && left > 0) {
                    left = idle.awaitNanos(left);
                }
            } finally {
                lock.unlock();
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        failAll(new ModelUnavailableException("model '" + model + "' is unloading", Duration.ofSeconds(1)));
    }

    /** What identifies requests that may share a forward call: every input's dimensions after the first. */
    record ShapeKey(long[] dims) {
        static ShapeKey of(List<ExecutionInput> inputs) {
            int n = 0;
            for (ExecutionInput in : inputs) {
                n += in.shape().length;
            }
            long[] dims = new long[n];
            int i = 0;
            for (ExecutionInput in : inputs) {
                long[] shape = in.shape();
                dims[i++] = shape.length;  // the rank, so [a][b,c] and [a,b][c] differ
                for (int d = 1; d < shape.length; d++) {
                    dims[i++] = shape[d];
                }
            }
            return new ShapeKey(dims);
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof ShapeKey k && Arrays.equals(dims, k.dims);
        }

        @Override
        public int hashCode() {
            return Arrays.hashCode(dims);
        }
    }

    /**
     * One request waiting in the queue: its checked inputs, its rows, and where its outputs go.
     * Its future completes with its {@link Handover} or with an error.
     */
    static final class Member {
        final List<ExecutionInput> inputs;
        final int rows;
        /** Its inputs' bytes, all together. */
        final long bytes;
        final ShapeKey key;
        final OutputBuffers outputs;
        final long enqueuedNanos;
        final long deadlineNanos;
        /** Its caller going and its own deadline: it is withdrawn from the queue, or dropped from its batch. */
        final Cancellation cancellation;
        /** Told once when no instance could be found for the queue it heads (a broken or faulted pool). */
        final Consumer<RuntimeException> noInstance;
        /** Its queue span: its batch's forward span links to it; ended on its own thread. */
        final InferenceSpans.Phase queue;
        final CompletableFuture<Handover> future = new CompletableFuture<>();
        /** Set when it is queued. */
        volatile DynamicBatcher batcher;
        /** Its thread was interrupted while it waited (it keeps waiting; the flag is restored after). */
        private boolean interrupted;

        /** A member whose caller stays, with no deadline of its own and nobody to tell of a pool failure. */
        Member(List<ExecutionInput> inputs, int rows, OutputBuffers outputs, Duration delay, Duration patience) {
            this(inputs, rows, outputs, delay, patience, Cancellation.none(), InferenceSpans.NONE, e -> {});
        }

        /**
         * @param inputs checked against the method, all with the same first dimension ({@code rows})
         * @param patience how long it may wait for an instance once its batching delay is over
         * @param queue its queue span ({@link InferenceSpans#NONE} untraced)
         */
        Member(List<ExecutionInput> inputs, int rows, OutputBuffers outputs, Duration delay, Duration patience,
                Cancellation cancellation, InferenceSpans.Phase queue, Consumer<RuntimeException> noInstance) {
            this.inputs = inputs;
            this.rows = rows;
            long sum = 0;
            for (ExecutionInput x : inputs) {
                sum += x.data().remaining();
            }
            this.bytes = sum;
            this.key = ShapeKey.of(inputs);
            this.outputs = outputs;
            this.enqueuedNanos = System.nanoTime();
            this.deadlineNanos = enqueuedNanos + delay.toNanos() + patience.toNanos();
            this.cancellation = cancellation;
            this.queue = queue;
            this.noInstance = noInstance;
        }

        /**
         * Blocks until this request leads a batch, has its outputs, or failed (thrown as is).
         * Once it has waited {@link Cancellation#WATCH_AFTER_NANOS} its caller is watched: a caller
         * that goes withdraws it from the queue, and so does its own deadline; once in a batch it
         * waits for the batch, whatever happens.
         */
        Handover await() {
            try {
                long now = System.nanoTime();
                Handover given = awaitUntil(now + cancellation.waitNanos(now, Cancellation.WATCH_AFTER_NANOS));
                if (given != null) {
                    return given;
                }
                cancellation.whileWaiting(() -> batcher.withdraw(this,
                        cancellation.dropped(RequestCancelledException.Stage.BATCH, batcher.model())));
                if (cancellation.bounded()) {
                    given = awaitUntil(cancellation.deadlineNanos());
                    if (given != null) {
                        return given;
                    }
                    batcher.withdraw(this, cancellation.dropped(RequestCancelledException.Stage.BATCH,
                            batcher.model()));
                }
                // Not interruptible: once queued, the scheduler always completes it (bounded by
                // the deadline), and a leader must never walk away from others' outputs.
                return future.join();
            } catch (CompletionException e) {
                throw e.getCause() instanceof RuntimeException r ? r : e;
            } finally {
                cancellation.stopWaiting();
                if (interrupted) {
                    Thread.currentThread().interrupt();
                }
            }
        }

        /** Its outcome, or null if it has none at {@code deadline}; an interrupt is kept for later. */
        private Handover awaitUntil(long deadline) {
            while (true) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    return future.isDone() ? future.join() : null;
                }
                try {
                    return future.get(left, TimeUnit.NANOSECONDS);
                } catch (TimeoutException e) {
                    return null;
                } catch (InterruptedException e) {
                    interrupted = true;
                } catch (ExecutionException e) {
                    throw e.getCause() instanceof RuntimeException r ? r : new CompletionException(e.getCause());
                }
            }
        }

        void complete(Share share) {
            future.complete(share);
        }

        void fail(RuntimeException e) {
            future.completeExceptionally(e);
        }
    }

    /** What a queued request is handed: the batch it leads, or its share of another's. */
    sealed interface Handover permits Batch, Share {

        /** The share {@code me} ends with, on its own thread; its queue span ends where it stopped waiting. */
        Share claim(Member me, LoadedModel model, Forward forward);
    }

    /**
     * A member's outputs cut from its batch's, with the batch's timings (Triton's meanings).
     *
     * @param joined the batch's forward span, which its queue span names; null untraced
     */
    record Share(List<ExecutionOutput> outputs, int batchRows, long queueNanos, long inputNanos, long inferNanos,
            long outputNanos, InferenceSpans.BatchJoined joined) implements Handover {

        /** Given by its batch's leader. */
        @Override
        public Share claim(Member me, LoadedModel model, Forward forward) {
            me.queue.joined(joined);
            me.queue.endAt(me.enqueuedNanos + queueNanos);
            return this;
        }
    }

    /** Requests that run as one forward call on {@code slot}; the first of them leads. */
    final class Batch implements Handover {
        private final List<Member> members;
        private final int rows;
        private final ExecutionSlot slot;
        private final long startedNanos;

        Batch(List<Member> members, int rows, ExecutionSlot slot, long startedNanos) {
            this.members = members;
            this.rows = rows;
            this.slot = slot;
            this.startedNanos = startedNanos;
        }

        List<Member> members() {
            return members;
        }

        int rows() {
            return rows;
        }

        /** Led by {@code me}: it runs the batch, and its wait ended when the batch was cut. */
        @Override
        public Share claim(Member me, LoadedModel model, Forward forward) {
            me.queue.endAt(startedNanos);  // the forward span follows it
            return run(model, forward);
        }

        /**
         * Runs it on the leader's thread, on the instance found for it: joins the inputs
         * ({@link BatchTensors}), makes one forward call, cuts the outputs back, gives every
         * other member its share (or the batch's error) and returns the leader's own. A batch
         * of one runs on its request's own buffers, exactly as alone. Members whose callers went
         * since it was cut are dropped before it runs; the leader runs it for the others even
         * when its own caller went.
         */
        Share run(LoadedModel model, Forward forward) {
            Member leader = members.get(0);
            List<Member> running = new ArrayList<>(members.size());
            int joinedRows = 0;
            for (Member m : members) {
                if (!m.cancellation.hasLeft()) {
                    running.add(m);
                    joinedRows += m.rows;
                } else if (m != leader) {
                    m.fail(m.cancellation.dropped(RequestCancelledException.Stage.BATCH, model.name()));
                }
            }
            Forward.Call call = null;
            try (BatchTensors tensors = new BatchTensors(forward.buffers())) {
                if (running.isEmpty()) {
                    throw leader.cancellation.dropped(RequestCancelledException.Stage.BATCH, model.name());
                }
                call = forward.admit(model, slot);
                long joining = System.nanoTime();
                boolean alone = running.size() == 1;
                List<ExecutionInput> inputs = alone ? running.get(0).inputs : tensors.concatenate(running, joinedRows);
                long executing = System.nanoTime();
                List<ExecutionOutput> outs = call.run(inputs, alone ? running.get(0).outputs : tensors, joinedRows,
                        running);
                long executed = System.nanoTime();
                List<List<ExecutionOutput>> shares = new ArrayList<>(running.size());
                int row = 0;
                for (Member m : running) {
                    shares.add(alone ? outs : BatchTensors.share(outs, joinedRows, row, m.rows, m.outputs));
                    row += m.rows;
                }
                long cut = System.nanoTime();
                call.times(executing - joining, executed - executing, cut - executed);
                Share mine = null;
                for (int i = 0; i < running.size(); i++) {
                    Member m = running.get(i);
                    Share share = new Share(shares.get(i), joinedRows, startedNanos - m.enqueuedNanos,
                            executing - joining, executed - executing, cut - executed, call.joined());
                    if (m == leader) {
                        mine = share;
                    } else {
                        m.complete(share);
                    }
                }
                if (mine == null) {
                    // The leader's caller went before the batch ran: its rows were left out.
                    throw leader.cancellation.dropped(RequestCancelledException.Stage.BATCH, model.name());
                }
                return mine;
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                ModelUnavailableException failure = new ModelUnavailableException("interrupted while running a batch");
                running.forEach(m -> m.fail(failure));
                throw failure;
            } catch (RuntimeException e) {
                if (call == null || !call.ran()) {
                    forward.notRun(e);
                }
                running.forEach(m -> m.fail(e));  // those already given their share keep it
                throw e;
            } finally {
                // Each step whatever the one before did: giving a stream back synchronizes it,
                // which throws on a faulted device, and the admission and the count must end anyway.
                try {
                    slot.close();  // idempotent: the call gave it back unless it never ran
                } finally {
                    try {
                        if (call != null) {
                            call.close();
                        }
                    } finally {
                        finished(this);
                    }
                }
            }
        }
    }
}
