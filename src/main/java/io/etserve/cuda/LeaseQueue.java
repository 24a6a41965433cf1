package io.etserve.cuda;

import java.util.ArrayDeque;
import java.util.Arrays;
import java.util.Iterator;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The free slots of a resource (the streams of a device, the instances of a model), handed to
 * waiting callers in the order of a {@link QueuePolicy}: first come, first served, or newest
 * first while callers give up on the line.
 *
 * <p>A released slot goes straight to the next waiter: the releasing thread cannot take it
 * back on its next call, and the waiter need not win a lock after it wakes, since the slot is
 * its own before it is unparked. What idles the GPU between two calls is then only the waiter's
 * wake-up. A thread parked for milliseconds wakes late on a host that lets idle cores sleep or
 * gives them back to a hypervisor, and that lateness is GPU time lost between two calls (see
 * bench/results/2026-12-04-h200-completion-wait.md for the line against a fair blocking queue).
 * With a sleep slice (the adaptive wait's, {@code etserve.cuda.sleep-slice}),
 * a waiter parks until shortly before its turn is expected, then in slices, so its core is awake
 * for the hand-off. The turn is estimated from when the held slots were taken and how long
 * slots are held on average.
 */
public final class LeaseQueue {

    /** {@link #takenAt} of a free slot. */
    static final long FREE = Long.MIN_VALUE;

    /** How many slices before its expected turn a waiter starts slicing (estimates are rough). */
    static final int LEAD_SLICES = 3;

    private final ReentrantLock lock = new ReentrantLock();
    private final ArrayDeque<Integer> free;
    private final ArrayDeque<Waiter> waiters = new ArrayDeque<>();
    /** Which waiter a released slot goes to; under the lock. */
    private final QueuePolicy.Line order;
    /** When each slot was taken (System.nanoTime), {@link #FREE} while free. */
    private final long[] takenAt;
    private final long sliceNanos;
    /** A moving average of how long a slot is held; 0 until one came back. */
    private long holdNanos;
    /** Scratch for {@link #expectedTurn}, used under the lock. */
    private final long[] returns;
    private volatile int freeCount;
    private volatile int waitingCount;

    private static final class Waiter {
        final Thread thread = Thread.currentThread();
        final long since;
        volatile int slot = -1;

        Waiter(long since) {
            this.since = since;
        }
    }

    /** A line served first come, first served. */
    public LeaseQueue(int slots, long sliceNanos) {
        this(slots, sliceNanos, QueuePolicy.FIFO);
    }

    /**
     * @param slots how many slots, numbered from 0, all free
     * @param sliceNanos the longest park near a waiter's expected turn; 0: park until served
     * @param policy which waiter a released slot goes to
     */
    public LeaseQueue(int slots, long sliceNanos, QueuePolicy policy) {
        if (slots < 1) {
            throw new IllegalArgumentException("a lease queue needs at least one slot");
        }
        if (sliceNanos < 0) {
            throw new IllegalArgumentException("slice must not be negative: " + sliceNanos);
        }
        this.sliceNanos = sliceNanos;
        this.order = policy.newLine();
        this.free = new ArrayDeque<>(slots);
        this.takenAt = new long[slots];
        this.returns = new long[slots];
        Arrays.fill(takenAt, FREE);
        for (int i = 0; i < slots; i++) {
            free.addLast(i);
        }
        this.freeCount = slots;
    }

    public int size() {
        return takenAt.length;
    }

    public int freeCount() {
        return freeCount;
    }

    public int waitingCount() {
        return waitingCount;
    }

    /**
     * Lets a waiter leave the line before its timeout: its caller no longer wants the slot (the
     * client that asked went away). Watching the caller may cost something (a registration with
     * the connection's selector), so it starts only once the waiter has waited
     * {@link #watchAfterNanos()}: a short wait is never watched.
     */
    public interface Abandon {
        /** Never abandons: the wait ends with a slot or the timeout. */
        Abandon NEVER = new Abandon() {
            @Override
            public void watching(Thread waiter) {}

            @Override
            public boolean abandoned() {
                return false;
            }
        };

        /** How long a waiter waits before {@link #watching}; 0: before its first park. */
        default long watchAfterNanos() {
            return 0;
        }

        /**
         * Called once, on the waiting thread, when it has waited {@link #watchAfterNanos()}; from
         * then on whoever makes {@link #abandoned()} true must unpark {@code waiter}.
         */
        void watching(Thread waiter);

        /** True once the waiter should leave the line; asked before every park. */
        boolean abandoned();

        /**
         * Whether the caller's own deadline has passed at {@code now}: a waiter that leaves at
         * its timeout then gave up on the line, rather than ran out of the server's patience.
         */
        default boolean expired(long now) {
            return false;
        }
    }

    /** As {@link #take(long, Abandon)}, never abandoned. */
    public int take(long timeoutNanos) throws InterruptedException {
        return take(timeoutNanos, Abandon.NEVER);
    }

    /**
     * Takes a free slot, waiting at most {@code timeoutNanos} (0: not at all) behind earlier
     * callers, or until {@code abandon} says the caller gave up.
     *
     * @return the slot, or -1 when none came in time or the caller gave up (a slot handed over
     *     at the same moment goes on to the next waiter)
     * @throws InterruptedException when interrupted before or while waiting; a slot handed over
     *     at the same moment goes on to the next waiter
     */
    public int take(long timeoutNanos, Abandon abandon) throws InterruptedException {
        if (Thread.interrupted()) {
            throw new InterruptedException();
        }
        long start = System.nanoTime();
        Waiter me;
        lock.lock();
        try {
            // Free slots and waiters never coexist: a released slot goes to a waiter if there is one.
            Integer slot = free.pollFirst();
            if (slot != null) {
                takenAt[slot] = start;
                freeCount = free.size();
                return slot;
            }
            if (timeoutNanos <= 0) {
                return -1;
            }
            me = new Waiter(start);
            waiters.addLast(me);
            waitingCount = waiters.size();
        } finally {
            lock.unlock();
        }
        long deadline = start + timeoutNanos;
        long watchAt = start + abandon.watchAfterNanos();
        boolean watching = false;
        try {
            while (me.slot < 0) {
                long now = System.nanoTime();
                if (now - deadline >= 0) {
                    return leave(me, abandon.expired(now), now);
                }
                if (!watching && now - watchAt >= 0) {
                    watching = true;
                    abandon.watching(me.thread);
                }
                if (abandon.abandoned()) {
                    int slot = leave(me, true, now);
                    if (slot >= 0) {
                        release(slot, false);
                    }
                    return -1;
                }
                long park = Math.min(deadline - now, parkNanos(me, now));
                LockSupport.parkNanos(this, watching ? park : Math.min(park, watchAt - now));
                if (Thread.interrupted()) {
                    throw new InterruptedException();
                }
            }
            return me.slot;
        } catch (InterruptedException | RuntimeException | Error e) {
            // Out of the line, and whatever was handed over meanwhile goes on: no slot is lost.
            int slot = leave(me, false, System.nanoTime());
            if (slot >= 0) {
                release(slot, false);
            }
            throw e;
        }
    }

    /** Gives a taken slot back after its use: to the next waiter in the policy's order if there is one, else to the free slots. */
    public void give(int slot) {
        release(slot, true);
    }

    /**
     * Gives back a slot that served no call (the caller failed to get its other resource, or
     * the pool closed meanwhile): as {@link #give}, without counting the time as a hold.
     */
    public void giveBack(int slot) {
        release(slot, false);
    }

    private void release(int slot, boolean held) {
        long now = System.nanoTime();
        Waiter next;
        lock.lock();
        try {
            if (takenAt[slot] == FREE) {
                throw new IllegalStateException("slot " + slot + " is not taken");
            }
            if (held) {
                long h = Math.max(0, now - takenAt[slot]);
                holdNanos = holdNanos == 0 ? h : holdNanos + (h - holdNanos) / 8;
            }
            next = nextWaiter(now);
            if (next == null) {
                takenAt[slot] = FREE;
                free.addLast(slot);
                freeCount = free.size();
                return;
            }
            takenAt[slot] = now;
            next.slot = slot;
            waitingCount = waiters.size();
        } finally {
            lock.unlock();
        }
        LockSupport.unpark(next.thread);
    }

    /** The waiter a released slot goes to, out of the line; null when none waits. Under the lock. */
    private Waiter nextWaiter(long now) {
        Waiter oldest = waiters.peekFirst();
        if (oldest == null) {
            return null;
        }
        return order.newestFirst(now, oldest.since) ? waiters.pollLast() : waiters.pollFirst();
    }

    /**
     * Stops waiting: the slot if one was handed over meanwhile, else -1.
     *
     * @param gaveUp the caller gave up on the line (it went, or its deadline passed)
     */
    private int leave(Waiter me, boolean gaveUp, long now) {
        lock.lock();
        try {
            if (me.slot < 0) {
                waiters.remove(me);
                waitingCount = waiters.size();
                if (gaveUp) {
                    order.callerGaveUp(now);
                }
            }
            return me.slot;
        } finally {
            lock.unlock();
        }
    }

    /**
     * How long a waiter parks now: until served without a slice, or before any hold was seen
     * (every waiter would slice through a first burst, a core each); else until its turn nears.
     */
    private long parkNanos(Waiter me, long now) {
        if (sliceNanos == 0) {
            return Long.MAX_VALUE;
        }
        long turn;
        lock.lock();
        try {
            if (holdNanos == 0) {
                return Long.MAX_VALUE;
            }
            // Newest first, the waiters behind it go before it (until someone newer comes).
            boolean newestFirst = order.newestFirst(now, waiters.isEmpty() ? now : waiters.peekFirst().since);
            int position = 0;
            for (Iterator<Waiter> it = newestFirst ? waiters.descendingIterator() : waiters.iterator();
                    it.hasNext() && it.next() != me; ) {
                position++;
            }
            turn = expectedTurn(takenAt, holdNanos, position, now, returns);
        } finally {
            lock.unlock();
        }
        long untilLead = turn - now - LEAD_SLICES * sliceNanos;
        return Math.max(sliceNanos, untilLead);
    }

    /**
     * When the waiter at {@code position} (0: next in line) can expect a slot: the slots come
     * back in the order they were taken, each after the average hold; once every held slot has
     * come back, another round of holds. {@code now} when nothing was learned yet.
     */
    static long expectedTurn(long[] takenAt, long holdNanos, int position, long now, long[] returns) {
        if (holdNanos <= 0) {
            return now;
        }
        int held = 0;
        for (long t : takenAt) {
            if (t != FREE) {
                // Compared as differences from now: nanoTime may be negative.
                returns[held++] = (t + holdNanos) - now > 0 ? t + holdNanos : now;
            }
        }
        if (held == 0) {
            return now;
        }
        Arrays.sort(returns, 0, held);
        return returns[position % held] + (position / held) * holdNanos;
    }

    /** The average hold, for tests and diagnostics. */
    long holdNanos() {
        lock.lock();
        try {
            return holdNanos;
        } finally {
            lock.unlock();
        }
    }

    @Override
    public String toString() {
        return "LeaseQueue[" + freeCount + " of " + size() + " free, " + waitingCount + " waiting, slice "
                + TimeUnit.NANOSECONDS.toMicros(sliceNanos) + " us]";
    }
}
