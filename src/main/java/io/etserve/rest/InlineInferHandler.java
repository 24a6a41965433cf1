package io.etserve.rest;

import java.util.concurrent.RejectedExecutionException;
import java.util.function.Supplier;
import org.eclipse.jetty.http.HttpStatus;
import org.eclipse.jetty.io.Content;
import org.eclipse.jetty.server.Handler;
import org.eclipse.jetty.server.Request;
import org.eclipse.jetty.server.Response;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.util.Callback;

/**
 * Which thread runs a request on the public port, when {@code etserve.http.inline-below} is set.
 * This handler declares itself non-blocking, so Jetty parses each request on the selector thread
 * that read it and calls {@link #handle} there. A quick inference whose whole body came with its
 * head is served right there ({@link InlineInference}): no hand-off, no wake-up. Everything else
 * goes on to the servlet context on a pool thread; its first body chunk, when one was read to
 * decide, is read again first. Jetty cannot tell this handler whether it runs on the selector
 * (a connection's next request may be read by the pool thread that finished the last one), so
 * whatever may block is always dispatched: the cost of that hand-off is why this is opt-in
 * (bench/results/2026-12-05-2core-inline-rest.md).
 */
public final class InlineInferHandler extends Handler.Wrapper {

    private final Supplier<InlineInference> inline;
    /** Resolved at the first request: the server is built before the beans that serve inference. */
    private volatile InlineInference resolved;

    InlineInferHandler(Handler next, Supplier<InlineInference> inline) {
        super(next);
        this.inline = inline;
    }

    /**
     * Puts the handler in front of {@code server}'s own (once; a customizer may run twice).
     *
     * @param inline the quick path, or null until the application's beans are there
     */
    public static void install(Server server, Supplier<InlineInference> inline) {
        if (server.getDescendant(InlineInferHandler.class) == null) {
            server.setHandler(new InlineInferHandler(server.getHandler(), inline));
        }
    }

    @Override
    public InvocationType getInvocationType() {
        // Whatever may block is dispatched to the pool (dispatch()): the selector never blocks here.
        return InvocationType.NON_BLOCKING;
    }

    @Override
    public boolean handle(Request request, Response response, Callback callback) {
        InlineInference here = inline();
        InferExchange.Target target = here != null ? here.quick(request) : null;
        if (target == null) {
            dispatch(request, response, callback);
            return true;
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
            here.serve(request, response, callback, target, chunk);
            return true;
        }
        Request next = request;
        Callback done = callback;
        if (chunk != null) {
            Replay replay = new Replay(request, chunk);
            next = replay;
            done = Callback.from(replay::discard, callback);
        }
        dispatch(next, response, done);
        return true;
    }

    private InlineInference inline() {
        InlineInference here = resolved;
        if (here == null) {
            here = inline.get();
            resolved = here;
        }
        return here;
    }

    /** The rest of the handler tree, on a pool thread. */
    private void dispatch(Request request, Response response, Callback callback) {
        try {
            getServer().getThreadPool().execute(() -> handleNext(request, response, callback));
        } catch (RejectedExecutionException e) {
            Response.writeError(request, response, callback, HttpStatus.SERVICE_UNAVAILABLE_503, "server is overloaded");
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
