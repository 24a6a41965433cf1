package io.etserve.grpc;

import io.etserve.execution.OncePerMinute;
import io.etserve.execution.SlowInlineCalls;
import io.grpc.Attributes;
import io.grpc.Context;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.ServerTransportFilter;
import io.grpc.Status;
import java.util.ArrayDeque;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Consumer;
import java.util.function.Predicate;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Runs each call's handler on one worker thread, from the half-close (the unary request is
 * complete) to the answer, while the transport's other callbacks (the call's start, its message,
 * cancellation, completion) run on Netty's event loop, where they arrive: the server itself runs
 * with a direct executor. grpc-java's default of an application executor hands a unary call
 * between threads about six times (start, message, half-close, request(n), the answer's flush,
 * completion); here it crosses twice: to the worker, and back to the event loop for the write.
 * A handler may block (a busy instance pool, a GPU completion, a model load), so it runs on the
 * event loop only when {@link EventLoopCalls} says, for the request, that it starts at once and
 * ends soon, or that it ends soon and its connection is the only one the loop serves (nobody else
 * waits for that loop, and its thread would idle until the answer anyway), and no other call of
 * its connection is in flight (calls multiplexed on one connection share its event loop: run
 * there, they would run one after another): then it crosses no thread at all. The connections'
 * call counts, and each loop's count of connections, need {@link #connections()} on the server.
 *
 * <p>A handler running on the event loop finds {@link #EVENT_LOOP} in its context: one that would
 * have to wait after all (another call took the instance it was to run on) gives the rest of its
 * work to {@link HandOver#toWorker}, which runs it on a worker once the handler returns, as if
 * the call had gone there from the start.
 *
 * <p>The listener's callbacks still run one at a time and in their order, as grpc-java promises a
 * listener: one arriving while the worker runs (a cancellation) waits and runs after it, on the
 * worker. Outermost of the interceptors but {@link UnreadableMessages} (which must see a message on
 * the thread that parsed it), so the inner ones see every callback on one thread.
 */
final class CallOnWorker implements ServerInterceptor {

    private static final Logger log = LoggerFactory.getLogger(CallOnWorker.class);

    /** Calls of a connection started and not yet completed or cancelled. */
    private static final Attributes.Key<AtomicInteger> CALLS = Attributes.Key.create("etserve.calls-in-flight");
    /** The count of connections of the event loop that serves this connection. */
    private static final Attributes.Key<AtomicInteger> LOOP_CONNECTIONS = Attributes.Key.create("etserve.loop-connections");

    /** In a handler's context only while it runs on the event loop: where it may not wait. */
    static final Context.Key<HandOver> EVENT_LOOP = Context.key("etserve.grpc.event-loop");

    /** How a handler on the event loop that would wait moves the rest of its work to a worker. */
    @FunctionalInterface
    interface HandOver {
        /**
         * Runs {@code rest} on a worker, in the call's context, after the handler returns; at most
         * once per call. Should the workers refuse it (a pool shut down, no thread to be had),
         * {@code refused} runs instead, on the event loop, given the status the call is closed
         * with; or, should the handler throw after handing over, with the status that says so.
         */
        void toWorker(Runnable rest, Consumer<Status> refused);
    }

    private final Executor workers;
    private final Predicate<Object> runsHere;
    private final SlowInlineCalls slowCalls;
    /** When threads cannot be started, every refused call would say so. */
    private final OncePerMinute threadWarnings = new OncePerMinute();
    /**
     * Ready connections per event loop, each loop's count found through its own thread: a
     * transport is made ready on its loop, and a call's handler is placed there too. (Netty 4.2's
     * loops no longer say how many channels they serve.)
     */
    private final ThreadLocal<AtomicInteger> loopConnections = ThreadLocal.withInitial(AtomicInteger::new);
    private final LongAdder handledOnEventLoop = new LongAdder();

    /** @param onEventLoop which calls may run on the event loop (never block long) */
    CallOnWorker(Executor workers, EventLoopCalls onEventLoop) {
        this.workers = workers;
        Predicate<Object> endsSoon = onEventLoop.endsSoon();
        this.runsHere = onEventLoop.quick().or(request -> aloneOnItsLoop() && endsSoon.test(request));
        this.slowCalls = new SlowInlineCalls(onEventLoop.bound().toNanos());
    }

    /**
     * Calls whose handler ran on the event loop that read them without handing its work to a
     * worker (no instance was free at once), since start: as REST counts its calls on a selector.
     */
    long handledOnEventLoop() {
        return handledOnEventLoop.sum();
    }

    /**
     * On an event loop: whether it serves one connection of this server (the one whose call it
     * runs). The server's loops are its own (GrpcServer), so no client channel shares them.
     */
    private boolean aloneOnItsLoop() {
        return loopConnections.get().get() == 1;
    }

    /** Gives each connection its count of calls in flight, and counts each event loop's connections. */
    ServerTransportFilter connections() {
        return new ServerTransportFilter() {
            @Override
            public Attributes transportReady(Attributes transport) {
                // grpc-java calls this once per connection, on its event loop, at the client's first
                // SETTINGS, and hands what it returns back to transportTerminated (null for a
                // connection that never got here). A later filter that threw would leave the count
                // up: the server has no other.
                AtomicInteger loop = loopConnections.get();
                loop.incrementAndGet();
                return transport.toBuilder().set(CALLS, new AtomicInteger()).set(LOOP_CONNECTIONS, loop).build();
            }

            @Override
            public void transportTerminated(Attributes transport) {
                AtomicInteger loop = transport == null ? null : transport.get(LOOP_CONNECTIONS);
                if (loop != null) {
                    loop.decrementAndGet();
                }
            }
        };
    }

    @Override
    public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers,
            ServerCallHandler<Q, R> next) {
        AtomicInteger calls = call.getAttributes().get(CALLS);
        Sequenced<Q> listener = new Sequenced<>(next.startCall(call, headers), call, workers, runsHere, calls,
                slowCalls, threadWarnings, handledOnEventLoop);
        if (calls != null) {
            calls.incrementAndGet();
        }
        return listener;
    }

    /** The delegate's callbacks in order, the half-close handed to a worker. */
    private static final class Sequenced<Q> extends ServerCall.Listener<Q> {

        private record Step(Runnable action, boolean handler, Context context) {}

        private final ServerCall.Listener<Q> delegate;
        private final ServerCall<Q, ?> call;
        private final Executor workers;
        private final Predicate<Object> runsHere;
        private final AtomicInteger connectionCalls;  // null: not counted (no transport filter)
        private final SlowInlineCalls slowCalls;
        private final OncePerMinute threadWarnings;
        private final LongAdder handledOnEventLoop;
        private final AtomicBoolean ended = new AtomicBoolean();
        private Object request;  // written and read by the steps, which run in order
        private Runnable rest;  // what the handler on the event loop handed over; read after it returns
        private Consumer<Status> restRefused;  // what to run instead should the workers refuse it
        private final ArrayDeque<Step> pending = new ArrayDeque<>(2);  // guarded by this
        private boolean draining;  // guarded by this: a thread runs the steps, or a worker was asked to
        /**
         * A client-streaming call (ModelStreamInfer): its handler runs at each message, which may
         * block as a unary call's half-close may, so each message is the handler's step, and it
         * never runs on the event loop (a stream of calls would hold the loop's other connections).
         */
        private final boolean streaming;

        Sequenced(ServerCall.Listener<Q> delegate, ServerCall<Q, ?> call, Executor workers,
                Predicate<Object> runsHere, AtomicInteger connectionCalls, SlowInlineCalls slowCalls,
                OncePerMinute threadWarnings, LongAdder handledOnEventLoop) {
            this.delegate = delegate;
            this.call = call;
            this.workers = workers;
            this.runsHere = runsHere;
            this.connectionCalls = connectionCalls;
            this.slowCalls = slowCalls;
            this.threadWarnings = threadWarnings;
            this.handledOnEventLoop = handledOnEventLoop;
            this.streaming = !call.getMethodDescriptor().getType().clientSendsOneMessage();
        }

        @Override
        public void onMessage(Q message) {
            submit(() -> {
                request = message;
                delegate.onMessage(message);
            }, streaming);
        }

        @Override
        public void onHalfClose() {
            submit(delegate::onHalfClose, !streaming);
        }

        @Override
        public void onCancel() {
            ended();
            submit(delegate::onCancel, false);
        }

        @Override
        public void onComplete() {
            ended();
            submit(delegate::onComplete, false);
        }

        /** At once, not in turn: the connection's other calls may run here from now on. */
        private void ended() {
            if (connectionCalls != null && ended.compareAndSet(false, true)) {
                connectionCalls.decrementAndGet();
            }
        }

        @Override
        public void onReady() {
            submit(delegate::onReady, false);
        }

        /** Called by the transport, one callback at a time. */
        private void submit(Runnable action, boolean handler) {
            synchronized (this) {
                pending.add(new Step(action, handler, Context.current()));
                if (draining) {
                    return;  // the thread that drains runs it after the step before
                }
                draining = true;
            }
            drain(false);
        }

        private void drain(boolean onWorker) {
            while (true) {
                Step step;
                synchronized (this) {
                    step = pending.peek();
                    if (step == null) {
                        draining = false;
                        return;
                    }
                    if (step.handler() && !onWorker && !runsHere(request)) {
                        step = null;  // the half-close: from here on a worker drains
                    } else {
                        pending.poll();
                    }
                }
                if (step == null) {
                    if (handOff()) {
                        return;
                    }
                    continue;
                }
                if (step.handler() && !onWorker) {
                    runOnEventLoop(step);
                    Runnable moved = rest;
                    if (moved != null) {
                        Consumer<Status> refused = restRefused;
                        rest = null;
                        restRefused = null;
                        handOff(new Step(moved, true, step.context()), refused);
                        return;  // the worker drains what arrives meanwhile, after the rest
                    }
                } else {
                    run(step, onWorker);
                }
            }
        }

        /** The handler of a quick call, here; one that was not quick is told to the operator. */
        private void runOnEventLoop(Step step) {
            long start = System.nanoTime();
            HandOver handOver = (moved, refused) -> {
                if (rest != null) {
                    throw new IllegalStateException("the handler already handed its work to a worker");
                }
                rest = moved;
                restRefused = refused;
            };
            try {
                run(new Step(step.action(), true, step.context().withValue(EVENT_LOOP, handOver)), false);
            } catch (RuntimeException | Error e) {
                Consumer<Status> refused = restRefused;
                rest = null;  // the transport closes the call: nothing left to run but what it held
                restRefused = null;
                if (refused != null) {
                    refused.accept(Status.UNKNOWN.withDescription("the call's handler failed"));
                }
                throw e;
            }
            if (rest == null) {
                handledOnEventLoop.increment();
            }
            long nanos = System.nanoTime() - start;
            if (slowCalls.report(nanos)) {
                log.warn("a gRPC call ({}) ran {} ms on Netty's event loop, holding the connections that share it,"
                        + " though its model's recent calls were quick; if a model's time follows its input's"
                        + " values, set etserve.grpc.inline-below and etserve.grpc.inline-alone-below to 0",
                        call.getMethodDescriptor().getBareMethodName(), nanos / 1_000_000);
            }
        }

        private boolean runsHere(Object message) {
            if (message == null || streaming || connectionCalls != null && connectionCalls.get() > 1) {
                return false;
            }
            try {
                return runsHere.test(message);
            } catch (RuntimeException e) {
                return false;  // a question that fails is answered on a worker, as any call
            }
        }

        /**
         * Asks a worker to run what a handler on the event loop handed over, then drain; when
         * refused, the call closes as unavailable and the steps left drain here.
         */
        private void handOff(Step first, Consumer<Status> refused) {
            try {
                workers.execute(() -> {
                    run(first, true);
                    drain(true);
                });
            } catch (RejectedExecutionException | OutOfMemoryError e) {
                // Refused (a pool shut down), or no thread could be started for it: either way the
                // call must still end and its later callbacks run, here.
                Status status = refusal(e);
                Context previous = first.context().attach();
                try {
                    refused.accept(status);
                } catch (RuntimeException failed) {
                    log.warn("a refused gRPC hand-over failed to clean up", failed);
                } finally {
                    first.context().detach(previous);
                }
                try {
                    call.close(status, new Metadata());
                } catch (IllegalStateException alreadyClosed) {
                    // refused closed it, with the same status
                }
                drain(false);
            }
        }

        /** Asks a worker to drain from the half-close on; false (the handler will not run) when refused. */
        private boolean handOff() {
            try {
                workers.execute(() -> drain(true));
                return true;
            } catch (RejectedExecutionException | OutOfMemoryError e) {  // as in handOff(Step, Runnable)
                synchronized (this) {
                    pending.poll();
                }
                call.close(refusal(e), new Metadata());
                return false;
            }
        }

        /** Why no worker took the call: the pool shut down, or no thread could be started for it. */
        private Status refusal(Throwable e) {
            if (e instanceof OutOfMemoryError) {
                if (threadWarnings.now()) {
                    log.warn("gRPC calls are refused: no worker thread could be started ({}); at most one such"
                            + " warning a minute", e.getMessage());
                }
                return Status.UNAVAILABLE.withDescription("the server could not start a thread for the call");
            }
            return Status.UNAVAILABLE.withDescription("the server is shutting down");
        }

        private void run(Step step, boolean onWorker) {
            Context previous = step.context().attach();
            try {
                step.action().run();
            } catch (RuntimeException | Error e) {
                if (!onWorker) {
                    synchronized (this) {
                        draining = false;  // the transport closes the call and still calls back
                    }
                    throw e;  // grpc-java closes the call, as for any listener that throws
                }
                closeAfter(e);
            } finally {
                step.context().detach(previous);
            }
        }

        /** What grpc-java does for a listener that throws on its own executor. */
        private void closeAfter(Throwable failure) {
            log.warn("gRPC call {} failed in its handler", call.getMethodDescriptor().getFullMethodName(), failure);
            try {
                call.close(Status.UNKNOWN.withDescription("Application error processing RPC").withCause(failure),
                        new Metadata());
            } catch (IllegalStateException alreadyClosed) {
                // the handler answered before it threw: nothing left to tell the caller
            }
        }
    }
}
