package io.etserve.execution;

import io.etserve.cuda.LeaseQueue;
import io.etserve.inference.Caller;
import io.etserve.inference.InvalidInputException;
import io.etserve.inference.RequestCancelledException;
import io.etserve.inference.ReservedParameters;
import io.etserve.inference.UntrustedText;
import java.math.BigInteger;
import java.util.Map;
import java.util.OptionalLong;
import java.util.concurrent.locks.LockSupport;

/**
 * One request's reasons to stop before it runs: its caller going away, and its deadline (the
 * protocol's {@code timeout} parameter, in microseconds as Triton reads it, or the caller's own
 * deadline, whichever comes first). The request thread bounds every wait by the deadline and,
 * once it has waited {@link #WATCH_AFTER_NANOS}, watches the caller; whatever ends the wait early
 * (an unpark, a withdrawal from the batcher's queue) is the action given to {@link #whileWaiting}.
 * The watch stays until {@link #close()}, so a caller that goes during the forward call is seen
 * too (its outputs are discarded). A request that never waits that long is never watched, though
 * a caller the protocol knows is gone without watching (a cancelled gRPC call) is seen anyway.
 */
final class Cancellation implements LeaseQueue.Abandon {

    /** The request-level parameter Triton's clients send: how long the request may wait to start, in microseconds (0: no limit). */
    static final String TIMEOUT_PARAMETER = "timeout";

    /**
     * How long a request waits before its caller is watched. Watching an HTTP client costs a
     * registration with a selector; a request served within this time (most, below overload) is
     * never watched, and one whose client goes within it is dropped at most this much later.
     */
    static final long WATCH_AFTER_NANOS = 5_000_000;

    /** How early a caller's cancel may come and still be its deadline passing (see {@link #dropped}). */
    private static final long DEADLINE_SKEW_NANOS = 20_000_000;

    private final Caller caller;
    private final boolean bounded;
    private final long deadlineNanos;
    /** What the deadline is: the request's timeout parameter or the caller's deadline. */
    private final RequestCancelledException.Reason expiry;
    private final long timeoutMicros;
    private volatile boolean left;
    private volatile Runnable onLeft;
    /** Touched by the request's thread only. */
    private Caller.Watch watch;

    private Cancellation(Caller caller, boolean bounded, long deadlineNanos, RequestCancelledException.Reason expiry,
            long timeoutMicros) {
        this.caller = caller;
        this.bounded = bounded;
        this.deadlineNanos = deadlineNanos;
        this.expiry = expiry;
        this.timeoutMicros = timeoutMicros;
    }

    /** A caller that stays and no deadline (in-process callers, tests). */
    static Cancellation none() {
        return new Cancellation(Caller.STAYS, false, 0, null, 0);
    }

    /**
     * @param parameters the request's parameters; {@code timeout} counts from {@code startNanos}
     * @throws InvalidInputException when {@code timeout} is not a whole number of microseconds
     */
    static Cancellation of(Caller caller, Map<String, Object> parameters, long startNanos) {
        long micros = timeoutMicros(parameters.get(TIMEOUT_PARAMETER));
        boolean bounded = false;
        long deadline = 0;
        RequestCancelledException.Reason expiry = null;
        // Past about 146 years the timeout bounds nothing (and would overflow nanoTime arithmetic).
        if (micros > 0 && micros < Long.MAX_VALUE / 2000) {
            bounded = true;
            deadline = startNanos + micros * 1000;
            expiry = RequestCancelledException.Reason.TIMEOUT;
        }
        OptionalLong own = caller.deadlineNanos();
        if (own.isPresent() && (!bounded || own.getAsLong() - deadline < 0)) {
            bounded = true;
            deadline = own.getAsLong();
            expiry = RequestCancelledException.Reason.DEADLINE;
        }
        return new Cancellation(caller, bounded, deadline, expiry, micros);
    }

    private static long timeoutMicros(Object value) {
        if (value == null) {
            return 0;
        }
        if (value instanceof Long l && l >= 0) {
            return l;
        }
        if (value instanceof BigInteger b && b.signum() >= 0) {
            return Long.MAX_VALUE;  // beyond any wait
        }
        if (value instanceof String s && ReservedParameters.isDecimalDigits(s)) {
            // gRPC's uint64_param arrives as its decimal string.
            return s.length() > 18 ? Long.MAX_VALUE : Long.parseLong(s);
        }
        throw new InvalidInputException("the request parameter 'timeout' must be a whole number of microseconds"
                + " (0 or more), got " + UntrustedText.abbreviate(String.valueOf(value)));
    }

    /** Whether the request may wait for an instance ({@link Caller#mayWait}). */
    boolean mayWait() {
        return caller.mayWait();
    }

    /** True once the caller is known to be gone. */
    boolean hasLeft() {
        return left || caller.hasLeft();
    }

    /** Whether the deadline has passed at {@code now}. */
    @Override
    public boolean expired(long now) {
        return bounded && now - deadlineNanos >= 0;
    }

    /** {@code patienceNanos}, or less when the deadline comes sooner (never negative). */
    long waitNanos(long now, long patienceNanos) {
        if (!bounded) {
            return patienceNanos;
        }
        return Math.max(0, Math.min(patienceNanos, deadlineNanos - now));
    }

    boolean bounded() {
        return bounded;
    }

    long deadlineNanos() {
        return deadlineNanos;
    }

    /**
     * Until {@link #stopWaiting()}, runs {@code action} as soon as the caller goes (at once if it
     * has gone); starts watching the caller on first use. The action may run more than once and
     * on any thread: it must be idempotent.
     */
    void whileWaiting(Runnable action) {
        onLeft = action;
        if (watch == null) {
            watch = caller.watch(this::leave);
        }
        // Either this sees the flag or leave() sees the action (both are volatile).
        if (hasLeft()) {
            action.run();
        }
    }

    void stopWaiting() {
        onLeft = null;
    }

    private void leave() {
        left = true;
        Runnable action = onLeft;
        if (action != null) {
            action.run();
        }
    }

    @Override
    public long watchAfterNanos() {
        return WATCH_AFTER_NANOS;
    }

    /** The instance line: the caller going unparks the waiter. */
    @Override
    public void watching(Thread waiter) {
        whileWaiting(() -> LockSupport.unpark(waiter));
    }

    @Override
    public boolean abandoned() {
        return hasLeft();
    }

    /** Stops watching the caller; the request is over. */
    void close() {
        if (watch != null) {
            watch.close();
        }
    }

    /** What a request dropped at {@code stage} is told (nobody may read it) and counted as. */
    RequestCancelledException dropped(RequestCancelledException.Stage stage, String model) {
        long now = System.nanoTime();
        boolean expired = expired(now);
        RequestCancelledException.Reason reason;
        if (hasLeft()) {
            // A gRPC call past its deadline is cancelled too: say which. The client's timer
            // started before ours (the deadline travels as a remaining time), so its cancel can
            // arrive a little before the deadline we hold.
            reason = expiry == RequestCancelledException.Reason.DEADLINE && expired(now + DEADLINE_SKEW_NANOS)
                    ? RequestCancelledException.Reason.DEADLINE : RequestCancelledException.Reason.CLIENT;
        } else {
            reason = expired ? expiry : RequestCancelledException.Reason.CLIENT;
        }
        String where = switch (stage) {
            case QUEUE -> "while it waited for an instance of model '" + model + "'";
            case BATCH -> "while it waited for a batch of model '" + model + "'";
            case EXECUTION -> "while model '" + model + "' ran it; its outputs were discarded";
        };
        String message = switch (reason) {
            case CLIENT -> "the client went away " + where;
            case DEADLINE -> "the call's deadline passed " + where;
            case TIMEOUT -> "request timeout expired: it did not start within its timeout of " + timeoutMicros
                    + " us " + where;
        };
        return new RequestCancelledException(reason, stage, message);
    }
}
