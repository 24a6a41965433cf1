package io.etserve.rest;

import java.nio.channels.SelectableChannel;
import java.nio.channels.Selector;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.function.Supplier;
import org.eclipse.jetty.http.HttpStatus;
import org.eclipse.jetty.io.Content;
import org.eclipse.jetty.io.ManagedSelector;
import org.eclipse.jetty.server.ConnectionMetaData;
import org.eclipse.jetty.server.Handler;
import org.eclipse.jetty.server.Request;
import org.eclipse.jetty.server.Response;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.util.Callback;

/**
 * The public port's {@code /infer} in front of its servlet context. A POST to a plain model path
 * whose whole body came with its head ({@link CoreInference#target}) is served through Jetty's
 * core API, never entering the servlet layer or Spring's filters; every other request goes on to
 * the servlet context, its first body chunk, when one was read to decide, read again first.
 *
 * <p>With {@code etserve.http.inline-below} or {@code etserve.http.inline-alone-below} set the
 * handler declares itself non-blocking, so Jetty parses each request on the selector thread that
 * read it and calls {@link #handle} there. A quick call ({@link CoreInference#quick}) is served
 * right there while other connections' requests keep the selector busy ({@link #sharedSelector}):
 * no hand-off, no wake-up. So is a call whose model's calls end soon
 * ({@link CoreInference#endsSoon}, a GPU model's too) when its connection is the only one the
 * selector serves ({@link #aloneOnSelector}): nobody else waits for that selector, and the thread
 * that read the request answers it and goes back to wait for the next, one wake-up per request
 * where a hand-off costs two or three (bench/results/2026-12-06-h100-rest-inline-alone-default.md).
 * Everything else is handed to the pool ({@link ResumingThreadPool}: the thread that answers goes
 * on to read the connection's next request and serves that one itself, as a thread Jetty
 * dispatched to would). Jetty cannot tell a non-blocking handler whether it runs on the selector,
 * so the pool's threads say so ({@link ResumingThreadPool#onHandedOverThread}). With both set to
 * 0, the handler is as blocking as the servlet context behind it and Jetty hands every request to
 * a pool thread itself (bench/results/2026-12-05-2core-core-infer.md).
 */
public final class InferHandler extends Handler.Wrapper {

    /** How recently another connection's request must have come for a selector to count as busy. */
    private static final long SHARED_WITHIN_NANOS = 1_000_000;
    private static final ThreadLocal<LastRequest> LAST_REQUEST = ThreadLocal.withInitial(LastRequest::new);
    /** A connection's attribute: the selector its channel is registered with. */
    private static final String SELECTOR_ATTRIBUTE = InferHandler.class.getName() + ".selector";

    private final Supplier<CoreInference> core;
    private final boolean onSelector;
    /** A task to a pool thread, which goes on to read its connection's next request (ResumingThreadPool). */
    private final Executor handOver = task -> getServer().getThreadPool().execute(() -> ResumingThreadPool.runHere(task));
    /** Resolved at the first request: the server is built before the beans that serve inference. */
    private volatile CoreInference resolved;

    InferHandler(Handler next, Supplier<CoreInference> core, boolean onSelector) {
        super(next);
        this.core = core;
        this.onSelector = onSelector;
    }

    /**
     * Puts the handler in front of {@code server}'s own (once; a customizer may run twice).
     *
     * @param core the core-API path, or null until the application's beans are there
     * @param onSelector whether calls may run on the selector ({@code etserve.http.inline-below} or
     *     {@code inline-alone-below} set)
     */
    public static void install(Server server, Supplier<CoreInference> core, boolean onSelector) {
        if (server.getDescendant(InferHandler.class) == null) {
            server.setHandler(new InferHandler(server.getHandler(), core, onSelector));
        }
    }

    @Override
    public InvocationType getInvocationType() {
        // On the selector, whatever may block is dispatched to the pool (dispatch()): it never blocks here.
        return onSelector ? InvocationType.NON_BLOCKING : super.getInvocationType();
    }

    @Override
    public boolean handle(Request request, Response response, Callback callback) throws Exception {
        // A pool thread may block: Jetty's own (default), or, on the selector's server, one that
        // took a request from it and now reads its connection's next (ResumingThreadPool).
        boolean mayBlock = !onSelector || ResumingThreadPool.onHandedOverThread();
        CoreInference here = core();
        InferExchange.Target target = here != null ? here.target(request) : null;
        if (target == null) {
            return next(request, response, callback, mayBlock);
        }
        Content.Chunk chunk = request.read();
        if (chunk != null && !Content.Chunk.isFailure(chunk) && chunk.remaining() == request.getLength()) {
            if (!chunk.isLast()) {
                // The end of the body, parsed from bytes already read (no I/O): the exchange ends
                // with its request consumed, as the servlet path's does.
                Content.Chunk end = request.read();
                if (end != null) {
                    end.release();
                }
            }
            if (mayBlock) {
                here.serve(request, response, callback, target, chunk, false, handOver);
            } else if (sharedSelector(request) ? here.quick(target)
                    : here.endsSoon(target) && aloneOnSelector(request)) {
                here.serve(request, response, callback, target, chunk, true, handOver);
            } else {
                dispatch(() -> here.serve(request, response, callback, target, chunk, false, handOver), () -> {
                    chunk.release();
                    here.refuseOverloaded(target, response, callback);
                });
            }
            return true;
        }
        Request next = request;
        Callback done = callback;
        if (chunk != null) {
            Replay replay = new Replay(request, chunk);
            next = replay;
            done = Callback.from(replay::discard, callback);
        }
        return next(next, response, done, mayBlock);
    }

    /** The servlet context: here on a pool thread, handed to one from the selector. */
    private boolean next(Request request, Response response, Callback callback, boolean mayBlock) throws Exception {
        if (mayBlock) {
            return super.handle(request, response, callback);
        }
        dispatch(() -> handleNext(request, response, callback), () -> refuseOverloaded(request, response, callback));
        return true;
    }

    /**
     * Whether the selector running this request served another connection's just before it
     * (within {@link #SHARED_WITHIN_NANOS}): requests of several connections are keeping it busy,
     * so one served here saves a hand-off and a wake-up and the selector never sleeps between
     * them. A connection alone sends its next request only once it has its answer, and a
     * selector that served it would sleep and be woken for every one: handed to the pool, the
     * thread that answers reads the next request itself (ResumingThreadPool) and is often in
     * time to find it there. That is what becomes of such a connection's calls that do not end
     * soon, and of all of them with {@code etserve.http.inline-alone-below} at 0; by default it
     * is served on the selector all the same, which costs less wherever the client does not share
     * the service's few cores (bench/results/2026-12-06-h100-rest-inline-alone-default.md).
     */
    private static boolean sharedSelector(Request request) {
        LastRequest last = LAST_REQUEST.get();
        int connection = System.identityHashCode(request.getConnectionMetaData().getConnection());
        long now = System.nanoTime();
        boolean shared = last.nanos != 0 && last.connection != connection && now - last.nanos < SHARED_WITHIN_NANOS;
        last.connection = connection;
        last.nanos = now;
        return shared;
    }

    /**
     * Whether the selector running this request serves no other connection: the request's
     * channel is the only one registered with it, so a call run here, however long, delays no
     * other connection's request (only one accepted onto this selector meanwhile waits for its
     * first read). HTTP/1 only: one connection of HTTP/2 may carry many calls at once. The
     * selector found for a connection is kept among its attributes for its next requests.
     */
    private static boolean aloneOnSelector(Request request) {
        ConnectionMetaData connection = request.getConnectionMetaData();
        if (connection.getHttpVersion().getVersion() >= 20) {
            return false;
        }
        ManagedSelector selector = connection.getAttribute(SELECTOR_ATTRIBUTE) instanceof ManagedSelector known
                ? known : selectorOf(connection);
        return selector != null && selector.size() == 1;
    }

    /** The selector {@code connection}'s channel is registered with (remembered), or null. */
    private static ManagedSelector selectorOf(ConnectionMetaData connection) {
        if (connection.getConnector() instanceof ServerConnector connector
                && connection.getConnection().getEndPoint().getTransport() instanceof SelectableChannel channel) {
            for (ManagedSelector candidate : connector.getSelectorManager().getBeans(ManagedSelector.class)) {
                Selector nio = candidate.getSelector();
                if (nio != null && channel.keyFor(nio) != null) {
                    connection.setAttribute(SELECTOR_ATTRIBUTE, candidate);
                    return candidate;
                }
            }
        }
        return null;
    }

    /** The last request a selector thread took: its connection (identity hash) and when. */
    private static final class LastRequest {
        int connection;
        long nanos;
    }

    private CoreInference core() {
        CoreInference here = resolved;
        if (here == null) {
            here = core.get();
            resolved = here;
        }
        return here;
    }

    /**
     * {@code task} on a pool thread, which goes on to read the connection's next request once
     * this one is answered ({@link ResumingThreadPool}); {@code refuse} when the pool is full.
     */
    private void dispatch(Runnable task, Runnable refuse) {
        try {
            handOver.execute(task);
        } catch (RejectedExecutionException e) {
            refuse.run();
        }
    }

    /**
     * A full pool's 503 for a request bound for the servlet context, as {@link CoreInference}
     * answers it; an inference request is counted in the REST metrics as the servlet path counts
     * it ({@link RestRequestMetricsFilter}: a POST to a path ending in {@code /infer}, its model
     * as the path names it).
     */
    private void refuseOverloaded(Request request, Response response, Callback callback) {
        CoreInference here = core();
        String path = request.getHttpURI().getPath();
        if (here != null && InferBodyFilter.isInfer(request.getMethod(), path)) {
            here.refuseOverloaded(new InferExchange.Target(RestRequestMetricsFilter.modelOf(path), null), response,
                    callback);
        } else {
            CoreInference.writeRefusal(response, CoreInference.overloaded(), callback);
        }
    }

    private void handleNext(Request request, Response response, Callback callback) {
        try {
            if (!super.handle(request, response, callback)) {
                Response.writeError(request, response, callback, HttpStatus.NOT_FOUND_404);
            }
        } catch (Throwable x) {
            Response.writeError(request, response, callback, x);
        }
    }

    /** A request whose first body chunk was read to decide where it runs: read again first. */
    private static final class Replay extends Request.Wrapper {

        private Content.Chunk first;

        Replay(Request request, Content.Chunk first) {
            super(request);
            this.first = first;
        }

        @Override
        public Content.Chunk read() {
            Content.Chunk chunk = take();
            return chunk != null ? chunk : super.read();
        }

        @Override
        public void demand(Runnable demandCallback) {
            if (pending()) {
                demandCallback.run();  // a chunk is there to read now
            } else {
                super.demand(demandCallback);
            }
        }

        /** At the end of the exchange: a chunk never read again goes back to Jetty's pool. */
        void discard() {
            Content.Chunk chunk = take();
            if (chunk != null) {
                chunk.release();
            }
        }

        private synchronized Content.Chunk take() {
            Content.Chunk chunk = first;
            first = null;
            return chunk;
        }

        private synchronized boolean pending() {
            return first != null;
        }
    }
}
