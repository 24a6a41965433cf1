package io.etserve.grpc;

import static org.assertj.core.api.Assertions.assertThat;

import io.grpc.Context;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.ServerCall;
import io.grpc.Status;
import java.io.ByteArrayInputStream;
import java.io.InputStream;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;

/** The listener's callbacks in order, one at a time, the half-close (the handler) on a worker. */
@ExtendWith(OutputCaptureExtension.class)
class CallOnWorkerTest {

    private static final Context.Key<String> CALL = Context.key("call");

    private final ExecutorService worker = Executors.newSingleThreadExecutor(r -> new Thread(r, "worker"));
    private final FakeCall call = new FakeCall();
    private final List<String> seen = new CopyOnWriteArrayList<>();

    @AfterEach
    void stop() {
        worker.shutdownNow();
    }

    @Test
    void theHandlerRunsOnAWorkerAndTheTransportsCallbacksWhereTheyArrive() throws Exception {
        CountDownLatch answered = new CountDownLatch(1);
        ServerCall.Listener<String> listener = start(new Recording(answered::countDown, null));

        listener.onReady();
        listener.onMessage("request");
        listener.onHalfClose();
        assertThat(answered.await(10, TimeUnit.SECONDS)).isTrue();
        awaitSeen(3);
        listener.onComplete();

        String here = Thread.currentThread().getName();
        assertThat(seen).containsExactly("ready@" + here, "message@" + here, "halfClose@worker", "complete@" + here);
    }

    @Test
    void aStreamsMessagesAreItsHandlerAndRunOnAWorkerInOrderEvenWhenQuick() throws Exception {
        // ModelStreamInfer: its handler runs at each message (which may block), never on the loop.
        call.type = MethodDescriptor.MethodType.BIDI_STREAMING;
        CallOnWorker interceptor = new CallOnWorker(worker, quickOnly(request -> true));
        ServerCall.Listener<String> stream = interceptor.interceptCall(call, new Metadata(),
                (c, h) -> new Recording(() -> {}, null));
        stream.onMessage("first");
        stream.onMessage("second");
        stream.onHalfClose();
        awaitSeen(3);
        assertThat(seen.subList(0, 2)).containsExactly("message@worker", "message@worker");
        assertThat(seen.get(2)).as("in order, wherever the steps are drained then").startsWith("halfClose@");
    }

    @Test
    void aCallThatRunsAtOnceRunsItsHandlerWhereItArrivedAndOthersStillGoToAWorker() throws Exception {
        CallOnWorker interceptor = new CallOnWorker(worker, quickOnly("quick"::equals));
        ServerCall.Listener<String> quick = interceptor.interceptCall(call, new Metadata(),
                (c, h) -> new Recording(() -> {}, null));
        quick.onMessage("quick");
        quick.onHalfClose();
        String here = Thread.currentThread().getName();
        assertThat(seen).containsExactly("message@" + here, "halfClose@" + here);

        ServerCall.Listener<String> slow = interceptor.interceptCall(call, new Metadata(),
                (c, h) -> new Recording(() -> {}, null));
        slow.onMessage("slow");
        slow.onHalfClose();
        awaitSeen(4);
        assertThat(seen.subList(2, 4)).containsExactly("message@" + here, "halfClose@worker");
    }

    @Test
    void aQuickCallThatTurnsOutLongIsReportedOnce(CapturedOutput output) {
        CallOnWorker interceptor = new CallOnWorker(worker, quickOnly("quick"::equals));
        for (int i = 0; i < 2; i++) {
            ServerCall.Listener<String> listener = interceptor.interceptCall(call, new Metadata(),
                    (c, h) -> new Recording(() -> sleep(120), null));
            listener.onMessage("quick");
            listener.onHalfClose();
        }
        assertThat(output.getOut().split("ran \\d+ ms on Netty's event loop", -1)).as("one warning a minute").hasSize(2);
        assertThat(output.getOut()).contains("set etserve.grpc.inline-below and etserve.grpc.inline-alone-below to 0");
    }

    @Test
    void aQuickCallGoesToAWorkerWhileAnotherCallOfItsConnectionIsInFlight() throws Exception {
        CallOnWorker interceptor = new CallOnWorker(worker, quickOnly("quick"::equals));
        call.attributes = interceptor.connections().transportReady(io.grpc.Attributes.EMPTY);
        String here = Thread.currentThread().getName();

        ServerCall.Listener<String> first = interceptor.interceptCall(call, new Metadata(),
                (c, h) -> new Recording(() -> {}, null));
        ServerCall.Listener<String> second = interceptor.interceptCall(call, new Metadata(),
                (c, h) -> new Recording(() -> {}, null));
        second.onMessage("quick");
        second.onHalfClose();  // the first is still in flight on the connection
        awaitSeen(2);
        assertThat(seen).containsExactly("message@" + here, "halfClose@worker");

        first.onCancel();
        second.onComplete();
        awaitSeen(4);
        ServerCall.Listener<String> third = interceptor.interceptCall(call, new Metadata(),
                (c, h) -> new Recording(() -> {}, null));
        third.onMessage("quick");
        third.onHalfClose();  // alone on its connection now
        assertThat(seen.subList(4, 6)).containsExactly("message@" + here, "halfClose@" + here);
    }

    @Test
    void aCallThatEndsSoonRunsOnItsEventLoopOnlyWhileItsConnectionIsTheOnlyOneThere() throws Exception {
        CallOnWorker interceptor = new CallOnWorker(worker,
                new EventLoopCalls("quick"::equals, "soon"::equals, java.time.Duration.ofSeconds(1)));
        io.grpc.ServerTransportFilter connections = interceptor.connections();
        // This thread plays one event loop: a transport is made ready on the loop that serves it.
        call.attributes = connections.transportReady(io.grpc.Attributes.EMPTY);
        String here = Thread.currentThread().getName();

        assertThat(handlerThread(interceptor, "soon")).isEqualTo(here);
        assertThat(handlerThread(interceptor, "other")).as("neither quick nor ending soon").isEqualTo("worker");

        // Another loop's connection changes nothing here.
        ExecutorService otherLoop = Executors.newSingleThreadExecutor();
        otherLoop.submit(() -> connections.transportReady(io.grpc.Attributes.EMPTY)).get(10, TimeUnit.SECONDS);
        otherLoop.shutdown();
        assertThat(handlerThread(interceptor, "soon")).isEqualTo(here);

        // A second connection on this loop: the call would hold it up, so it goes to a worker.
        io.grpc.Attributes second = connections.transportReady(io.grpc.Attributes.EMPTY);
        assertThat(handlerThread(interceptor, "soon")).isEqualTo("worker");
        assertThat(handlerThread(interceptor, "quick")).as("quick calls run here, shared loop or not").isEqualTo(here);

        // Alone again once it is gone.
        connections.transportTerminated(second);
        connections.transportTerminated(null);  // a transport that never became ready
        assertThat(handlerThread(interceptor, "soon")).isEqualTo(here);
    }

    /** Runs one unary call with this request to its end: the thread its handler ran on. */
    private String handlerThread(CallOnWorker interceptor, String request) throws InterruptedException {
        java.util.concurrent.atomic.AtomicReference<String> thread = new java.util.concurrent.atomic.AtomicReference<>();
        CountDownLatch handled = new CountDownLatch(1);
        ServerCall.Listener<String> listener = interceptor.interceptCall(call, new Metadata(),
                (c, h) -> new Recording(() -> {
                    thread.set(Thread.currentThread().getName());
                    handled.countDown();
                }, null));
        listener.onMessage(request);
        listener.onHalfClose();
        assertThat(handled.await(10, TimeUnit.SECONDS)).isTrue();
        listener.onComplete();
        return thread.get();
    }

    @Test
    void aHandlerOnTheEventLoopThatWouldWaitHandsTheRestToAWorkerAndLaterCallbacksRunAfterIt() throws Exception {
        CountDownLatch restRunning = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        List<String> rest = new CopyOnWriteArrayList<>();
        CallOnWorker interceptor = new CallOnWorker(worker, quickOnly("quick"::equals));
        ServerCall.Listener<String> listener = interceptor.interceptCall(call, new Metadata(),
                (c, h) -> new Recording(() -> CallOnWorker.EVENT_LOOP.get().toWorker(() -> {
                    rest.add(Thread.currentThread().getName() + " " + CALL.get() + " "
                            + (CallOnWorker.EVENT_LOOP.get() == null ? "may wait" : "on the event loop"));
                    restRunning.countDown();
                    await(release);
                }, status -> rest.add("refused")), null));

        Context.current().withValue(CALL, "call 9").run(() -> {
            listener.onMessage("quick");
            listener.onHalfClose();
        });
        assertThat(restRunning.await(10, TimeUnit.SECONDS)).isTrue();
        listener.onCancel();  // arrives while the rest runs: waits for it
        String here = Thread.currentThread().getName();
        assertThat(seen).containsExactly("message@" + here, "halfClose@" + here);

        release.countDown();
        awaitSeen(3);
        assertThat(seen.get(2)).isEqualTo("cancel@worker");
        assertThat(rest).containsExactly("worker call 9 may wait");
    }

    @Test
    void aHandOverTheWorkersRefuseClosesTheCallAsUnavailableAndLaterCallbacksRunHere() {
        List<String> refusals = handOverRefusedBy(r -> {
            throw new RejectedExecutionException("shut down");
        });

        assertThat(call.status.getCode()).isEqualTo(Status.Code.UNAVAILABLE);
        String here = Thread.currentThread().getName();
        assertThat(refusals).containsExactly("UNAVAILABLE on " + here + ": the server is shutting down");
        assertThat(seen).containsExactly("message@" + here, "halfClose@" + here, "cancel@" + here);
    }

    @Test
    void aHandOverNoThreadCanBeStartedForIsRefusedSayingSo() {
        List<String> refusals = handOverRefusedBy(r -> {
            throw new OutOfMemoryError("unable to create native thread");
        });

        String here = Thread.currentThread().getName();
        assertThat(refusals).containsExactly(
                "UNAVAILABLE on " + here + ": the server could not start a thread for the call");
        assertThat(call.status.getDescription()).isEqualTo("the server could not start a thread for the call");
    }

    /**
     * A quick call whose handler, on the event loop, hands the rest of its work to a pool that
     * refuses it: what the refusal was given (status and description) and on which thread.
     */
    private List<String> handOverRefusedBy(java.util.concurrent.Executor refusingPool) {
        List<String> refusals = new CopyOnWriteArrayList<>();
        ServerCall.Listener<String> listener = new CallOnWorker(refusingPool, quickOnly("quick"::equals))
                .interceptCall(call, new Metadata(), (c, h) -> new Recording(() -> CallOnWorker.EVENT_LOOP.get()
                        .toWorker(() -> refusals.add("ran"), status -> refusals.add(status.getCode() + " on "
                                + Thread.currentThread().getName() + ": " + status.getDescription())), null));
        listener.onMessage("quick");
        listener.onHalfClose();
        listener.onCancel();
        return refusals;
    }

    @Test
    void aHandlerThatThrowsAfterHandingOverRunsTheRefusalAndLaterCallbacksStillRunHere() {
        List<String> rest = new CopyOnWriteArrayList<>();
        ServerCall.Listener<String> listener = new CallOnWorker(worker, quickOnly("quick"::equals)).interceptCall(call,
                new Metadata(), (c, h) -> new Recording(() -> {
                    CallOnWorker.EVENT_LOOP.get().toWorker(() -> rest.add("ran"),
                            status -> rest.add("refused: " + status.getCode()));
                    throw new IllegalArgumentException("bug");
                }, null));

        listener.onMessage("quick");
        try {
            listener.onHalfClose();
        } catch (IllegalArgumentException expected) {
            // grpc-java closes the call for a listener that throws
        }
        listener.onCancel();

        assertThat(rest).containsExactly("refused: UNKNOWN");
        String here = Thread.currentThread().getName();
        assertThat(seen).containsExactly("message@" + here, "halfClose@" + here, "cancel@" + here);
    }

    @Test
    void aWorkerPoolThatCannotStartAThreadIsTreatedAsARefusal() {
        assertRefusedWithoutRunningTheHandler(r -> {
            throw new OutOfMemoryError("unable to create native thread");
        }, "the server could not start a thread for the call");
    }

    @Test
    void aHandlerOnAWorkerFindsNoHandOver() throws Exception {
        List<Boolean> handOver = new CopyOnWriteArrayList<>();
        ServerCall.Listener<String> listener = start(new Recording(
                () -> handOver.add(CallOnWorker.EVENT_LOOP.get() != null), null));
        listener.onMessage("request");
        listener.onHalfClose();
        awaitSeen(2);
        assertThat(handOver).containsExactly(false);
    }

    @Test
    void aCancellationArrivingWhileTheHandlerRunsWaitsForItAndRunsAfterItOnTheWorker() throws Exception {
        CountDownLatch running = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        ServerCall.Listener<String> listener = start(new Recording(() -> {
            running.countDown();
            await(release);
        }, null));

        listener.onMessage("request");
        listener.onHalfClose();
        assertThat(running.await(10, TimeUnit.SECONDS)).isTrue();
        listener.onCancel();  // returns at once: the transport's thread never waits for the handler
        assertThat(seen).containsExactly("message@" + Thread.currentThread().getName());

        release.countDown();
        awaitSeen(3);
        assertThat(seen.subList(1, 3)).containsExactly("halfClose@worker", "cancel@worker");
    }

    @Test
    void theCallsContextIsCurrentInTheHandler() throws Exception {
        List<String> inHandler = new CopyOnWriteArrayList<>();
        ServerCall.Listener<String> listener = start(new Recording(() -> inHandler.add(CALL.get()), null));

        Context.current().withValue(CALL, "call 7").run(() -> {
            listener.onMessage("request");
            listener.onHalfClose();
        });
        awaitSeen(2);

        assertThat(inHandler).containsExactly("call 7");
    }

    @Test
    void aHandlerThatThrowsOnTheWorkerClosesTheCallAsUnknownAndLaterCallbacksStillRun() throws Exception {
        ServerCall.Listener<String> listener = start(new Recording(() -> {
            throw new IllegalStateException("bug");
        }, null));

        listener.onMessage("request");
        listener.onHalfClose();
        awaitSeen(2);
        assertThat(call.closed.await(10, TimeUnit.SECONDS)).isTrue();
        listener.onCancel();
        awaitSeen(3);

        assertThat(call.status.getCode()).isEqualTo(Status.Code.UNKNOWN);
        assertThat(call.status.getCause()).hasMessage("bug");
        assertThat(seen.get(2)).startsWith("cancel@");  // here, or on the worker if it was still draining
    }

    @Test
    void aWorkerPoolThatRefusesClosesTheCallAsUnavailableWithoutRunningTheHandler() {
        assertRefusedWithoutRunningTheHandler(r -> {
            throw new RejectedExecutionException("shut down");
        }, "the server is shutting down");
    }

    /** A pool that cannot take the half-close: the call ends UNAVAILABLE, its later callbacks run here. */
    private void assertRefusedWithoutRunningTheHandler(java.util.concurrent.Executor refusingPool, String why) {
        ServerCall.Listener<String> listener = new CallOnWorker(refusingPool, EventLoopCalls.NONE)
                .interceptCall(call, new Metadata(), (c, h) -> new Recording(() -> {}, null));

        listener.onMessage("request");
        listener.onHalfClose();
        listener.onCancel();

        assertThat(call.status.getCode()).isEqualTo(Status.Code.UNAVAILABLE);
        assertThat(call.status.getDescription()).isEqualTo(why);
        String here = Thread.currentThread().getName();
        assertThat(seen).containsExactly("message@" + here, "cancel@" + here);
    }

    @Test
    void aCallbackThatThrowsOnTheTransportsThreadPropagatesAndTheNextOnesStillRun() {
        ServerCall.Listener<String> listener = start(new Recording(() -> {}, "message"));

        try {
            listener.onMessage("request");
        } catch (IllegalArgumentException expected) {
            // grpc-java closes the call for a listener that throws
        }
        listener.onCancel();

        assertThat(seen).containsExactly("cancel@" + Thread.currentThread().getName());
    }

    private ServerCall.Listener<String> start(Recording delegate) {
        return new CallOnWorker(worker, EventLoopCalls.NONE).interceptCall(call, new Metadata(), (c, h) -> delegate);
    }

    /** Calls that run on the event loop whatever else it serves: {@code etserve.grpc.inline-below} alone. */
    private static EventLoopCalls quickOnly(java.util.function.Predicate<Object> quick) {
        return new EventLoopCalls(quick, request -> false, java.time.Duration.ZERO);
    }

    private void awaitSeen(int n) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (seen.size() < n && System.nanoTime() < end) {
            Thread.sleep(1);
        }
        assertThat(seen).hasSizeGreaterThanOrEqualTo(n);
    }

    private static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static void await(CountDownLatch latch) {
        try {
            latch.await(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Records each callback with its thread; the half-close runs {@code handler}. */
    private final class Recording extends ServerCall.Listener<String> {
        private final Runnable handler;
        private final String throwIn;

        Recording(Runnable handler, String throwIn) {
            this.handler = handler;
            this.throwIn = throwIn;
        }

        private void record(String what) {
            if (what.equals(throwIn)) {
                throw new IllegalArgumentException(what);
            }
            seen.add(what + "@" + Thread.currentThread().getName());
        }

        @Override
        public void onMessage(String message) {
            record("message");
        }

        @Override
        public void onHalfClose() {
            try {
                handler.run();
            } finally {
                record("halfClose");
            }
        }

        @Override
        public void onCancel() {
            record("cancel");
        }

        @Override
        public void onComplete() {
            record("complete");
        }

        @Override
        public void onReady() {
            record("ready");
        }
    }

    private static final class FakeCall extends ServerCall<String, String> {
        private static final MethodDescriptor.Marshaller<String> TEXT = new MethodDescriptor.Marshaller<>() {
            @Override
            public InputStream stream(String value) {
                return new ByteArrayInputStream(value.getBytes());
            }

            @Override
            public String parse(InputStream stream) {
                return "";
            }
        };

        final CountDownLatch closed = new CountDownLatch(1);
        volatile Status status;
        MethodDescriptor.MethodType type = MethodDescriptor.MethodType.UNARY;
        io.grpc.Attributes attributes = io.grpc.Attributes.EMPTY;

        @Override
        public io.grpc.Attributes getAttributes() {
            return attributes;
        }

        @Override
        public void request(int numMessages) {}

        @Override
        public void sendHeaders(Metadata headers) {}

        @Override
        public void sendMessage(String message) {}

        @Override
        public boolean isCancelled() {
            return false;
        }

        @Override
        public void close(Status s, Metadata trailers) {
            status = s;
            closed.countDown();
        }

        @Override
        public MethodDescriptor<String, String> getMethodDescriptor() {
            return MethodDescriptor.<String, String>newBuilder().setType(type)
                    .setFullMethodName("test.Service/Call").setRequestMarshaller(TEXT).setResponseMarshaller(TEXT)
                    .build();
        }
    }
}
