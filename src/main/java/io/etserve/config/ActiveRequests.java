package io.etserve.config;

import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.LongAdder;
import org.eclipse.jetty.server.Handler;
import org.eclipse.jetty.server.Request;
import org.eclipse.jetty.server.Response;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.handler.StatisticsHandler;
import org.eclipse.jetty.util.Callback;

/**
 * The number graceful shutdown waits on, the requests in progress, counted for one small object
 * per request. Spring Boot's graceful shutdown installs Jetty's {@link StatisticsHandler} in
 * front of everything and reads one number from it ({@link #getRequestsActive}); that handler
 * wraps every request and response to fire its events, copies a read-only view of every chunk
 * read, and registers a completion listener, for every request
 * (what that costs: bench/results/2026-12-05-2core-active-requests.md). Spring Boot finds a handler of this type
 * in its place (it looks for a {@code StatisticsHandler} in the server's chain of wrappers), so
 * {@code server.shutdown: graceful} keeps its meaning; the statistics Jetty's handler would
 * also keep (times, status classes, bytes) are not kept here, and read as zero.
 *
 * <p>A request counts from the moment it reaches this handler until the handler behind it
 * completes its callback, or, when that handler declines it or throws, until Jetty has sent its
 * own answer.
 */
final class ActiveRequests extends StatisticsHandler {

    private final LongAdder active = new LongAdder();

    ActiveRequests(Handler handler) {
        super(handler);
    }

    /** Puts the counter in front of {@code server}'s handlers (once). */
    static void install(Server server) {
        if (server.getDescendant(ActiveRequests.class) == null) {
            server.setHandler(new ActiveRequests(server.getHandler()));
        }
    }

    @Override
    public boolean handle(Request request, Response response, Callback callback) throws Exception {
        Handler next = getHandler();
        if (next == null) {
            return false;
        }
        active.increment();
        Counted counted = new Counted(callback);
        boolean handled = false;
        try {
            handled = next.handle(request, response, counted);
            return handled;
        } finally {
            if (!handled) {
                // Declined (404) or thrown (500): Jetty answers and completes the request itself,
                // and our callback may never complete.
                Request.addCompletionListener(request, done -> counted.end());
            }
        }
    }

    @Override
    public int getRequestsActive() {
        return active.intValue();
    }

    /** The request's callback, which takes the request off the count once, however it ends. */
    private final class Counted extends AtomicBoolean implements Callback {

        private final Callback callback;

        Counted(Callback callback) {
            this.callback = callback;
        }

        void end() {
            if (compareAndSet(false, true)) {
                active.decrement();
            }
        }

        @Override
        public void succeeded() {
            try {
                callback.succeeded();
            } finally {
                end();
            }
        }

        @Override
        public void failed(Throwable x) {
            try {
                callback.failed(x);
            } finally {
                end();
            }
        }

        @Override
        public InvocationType getInvocationType() {
            return callback.getInvocationType();
        }
    }
}
