package io.etserve.rest;

import java.util.concurrent.BlockingQueue;
import org.eclipse.jetty.io.Connection;
import org.eclipse.jetty.util.thread.QueuedThreadPool;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Jetty's thread pool for a public port whose handler runs on the selector
 * ({@code etserve.http.inline-below} or {@code inline-alone-below} set), where
 * {@link InferHandler} hands every request it does not run there to this pool. When such a request completes, Jetty resumes its connection (the read
 * of the next request) by executing it on the pool: one more hand-off per request than when
 * Jetty dispatched the request itself. A task handed over through {@link #runHere} has that
 * resumption wait and run after it on the same thread instead, as the thread Jetty dispatched to
 * would have continued; the next request read there is served there ({@link #onHandedOverThread}).
 */
public final class ResumingThreadPool extends QueuedThreadPool {

    private static final Logger log = LoggerFactory.getLogger(ResumingThreadPool.class);

    /** A pool thread's state while it runs a handed-over task: a connection to resume after it. */
    private static final class HandOver {
        boolean running;
        Runnable resume;
    }

    private static final ThreadLocal<HandOver> HANDED_OVER = ThreadLocal.withInitial(HandOver::new);

    public ResumingThreadPool(int maxThreads, int minThreads, int idleTimeoutMillis, BlockingQueue<Runnable> queue) {
        super(maxThreads, minThreads, idleTimeoutMillis, queue);
    }

    /**
     * Runs {@code task} on this pool thread; a connection resumed while it runs (its request
     * completed) is read again here, after it, and so on while one is.
     */
    static void runHere(Runnable task) {
        HandOver here = HANDED_OVER.get();
        for (Runnable next = task; next != null; ) {
            here.running = true;
            try {
                next.run();
            } catch (Throwable e) {
                log.warn("a task handed to the request pool failed", e);
            } finally {
                here.running = false;
            }
            next = here.resume;
            here.resume = null;
        }
    }

    /** Whether this thread runs a task handed over through {@link #runHere}: it may block. */
    static boolean onHandedOverThread() {
        return HANDED_OVER.get().running;
    }

    @Override
    public void execute(Runnable job) {
        if (job instanceof Connection) {
            HandOver here = HANDED_OVER.get();
            if (here.running && here.resume == null) {
                here.resume = job;
                return;
            }
        }
        super.execute(job);
    }
}
