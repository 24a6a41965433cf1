package io.etserve.config;

import java.time.Duration;
import java.util.IdentityHashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import org.eclipse.jetty.http.HttpParser;
import org.eclipse.jetty.io.Connection;
import org.eclipse.jetty.io.EndPoint;
import org.eclipse.jetty.server.AbstractConnector;
import org.eclipse.jetty.server.NetworkConnector;
import org.eclipse.jetty.server.internal.HttpConnection;
import org.eclipse.jetty.util.component.AbstractLifeCycle;
import org.eclipse.jetty.util.thread.Scheduler;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Slow request heads (slowloris) on one connector. Jetty bounds how long a connection may be
 * idle, not how long its request head may take, and its connection limit stops accepting when
 * full: a client sending one header byte every few seconds held its connection forever, and a few
 * thousand of them held every connection the port allows ({@code server.jetty.max-connections}),
 * so inference and {@code /v2/health/live} timed out while the management port stayed healthy.
 * Two rules:
 * <ul>
 *   <li>a request head (request line and headers) must be complete within {@code timeout} of
 *       the connection's opening (its first request) or of its first byte (a later request on a
 *       kept-alive connection), or the connection is closed; a kept-alive connection idle between
 *       requests is the idle timeout's business;
 *   <li>this is the connector's connection limit, in place of Jetty's: past it, a new connection
 *       closes the one that has waited longest for its request head, so slow heads can never
 *       fill the port; it stops accepting (as Jetty's would) only while every other connection
 *       is past its head.
 * </ul>
 * A real client sends a request head in one packet; a connection still sending one after seconds
 * is an attack or a broken client, and closing it costs nothing that needed an answer. The sweep
 * looks at every connection once a period (a tenth of the timeout, at most a second); nothing
 * runs per request.
 */
final class RequestHeadGuard extends AbstractLifeCycle implements Connection.Listener {

    private static final Logger log = LoggerFactory.getLogger(RequestHeadGuard.class);
    private static final long LOG_EVERY_MILLIS = 10_000;

    private final AbstractConnector connector;
    private final long timeoutMillis;
    private final long periodMillis;
    /** Connections held at once; 0: no limit. */
    private final int maxConnections;
    /** Connections waiting for a request head, roughly oldest first; stale entries are skipped. */
    private final ConcurrentLinkedDeque<Waiting> waiting = new ConcurrentLinkedDeque<>();
    private final AtomicLong timedOut = new AtomicLong();
    private final AtomicLong evicted = new AtomicLong();
    private final AtomicLong stoppedAccepting = new AtomicLong();
    /** Accepting stopped at the limit with nothing to let go; changed under this. */
    private volatile boolean limited;
    /** The sweep's own (one thread): when a later head on a kept-alive connection was first seen. */
    private Map<HttpConnection, Waiting> laterHeads = new IdentityHashMap<>();
    private volatile Scheduler.Task sweep;
    private long reported;
    private final long[] reportedCounts = new long[3];

    /** A connection waiting for the head of its request number {@code requests + 1}, since {@code sinceMillis}. */
    private record Waiting(HttpConnection connection, long requests, long sinceMillis) {
        boolean current() {
            return connection.getEndPoint().isOpen() && connection.getMessagesIn() == requests
                    && waitingForHead(connection);
        }
    }

    /**
     * @param timeout longest a request head may take
     * @param maxConnections connections held at once ({@code server.jetty.max-connections}); 0 or
     *     less: no limit
     */
    RequestHeadGuard(AbstractConnector connector, Duration timeout, int maxConnections) {
        this.connector = connector;
        this.timeoutMillis = timeout.toMillis();
        this.periodMillis = Math.max(50, Math.min(1000, timeoutMillis / 10));
        this.maxConnections = Math.max(0, maxConnections);
    }

    /** Waiting for a request head: the first one (nothing, or part of it, has arrived) or a later one that has begun. */
    static boolean waitingForHead(HttpConnection c) {
        HttpParser parser = c.getParser();
        return parser.inHeaderState() && (!parser.isStart() || c.getMessagesIn() == 0);
    }

    @Override
    public void onOpened(Connection connection) {
        if (!(connection instanceof HttpConnection http)) {
            return;
        }
        waiting.addLast(new Waiting(http, 0, connection.getEndPoint().getCreatedTimeStamp()));
        if (maxConnections > 0 && connector.getConnectedEndPoints().size() >= maxConnections) {
            // Full (or over: the acceptor runs ahead of the connections it opens): make room for
            // the next one by letting go the longest-waiting head, or stop accepting.
            if (!evictOldest(http)) {
                setLimited(true);
            }
        }
    }

    @Override
    public void onClosed(Connection connection) {
        if (limited && connector.getConnectedEndPoints().size() < maxConnections) {
            setLimited(false);
        }
    }

    /** Stops or resumes accepting, when that changes. */
    private synchronized void setLimited(boolean limit) {
        if (limited != limit) {
            limited = limit;
            connector.setAccepting(!limit);
            if (limit) {
                stoppedAccepting.incrementAndGet();
            }
        }
    }

    /**
     * Closes the connection that has waited longest for its head, other than {@code opened}:
     * first one that has sent part of a head and stopped (a slow head), else one that has sent
     * nothing yet. A real client's head comes whole, so it is never the first kind; it is the
     * second only for the moment between its connection and its head being read.
     *
     * @return false when there is none: every other connection is past its head
     */
    private boolean evictOldest(HttpConnection opened) {
        Waiting nothingYet = null;
        for (var it = waiting.iterator(); it.hasNext(); ) {
            Waiting w = it.next();
            if (!w.current()) {
                it.remove();
            } else if (!w.connection.getParser().isStart()) {
                it.remove();
                close(w.connection, evicted, "its request head was the longest awaited at the connection limit");
                return true;
            } else if (nothingYet == null && w.connection != opened) {
                nothingYet = w;
            }
        }
        if (nothingYet != null && waiting.remove(nothingYet)) {
            close(nothingYet.connection, evicted, "it had sent nothing, the longest of those at the connection limit");
            return true;
        }
        return false;
    }

    private void sweep() {
        try {
            long now = System.currentTimeMillis();
            Map<HttpConnection, Waiting> seen = new IdentityHashMap<>();
            for (EndPoint endPoint : connector.getConnectedEndPoints()) {
                if (!(endPoint.getConnection() instanceof HttpConnection c) || !waitingForHead(c)) {
                    continue;
                }
                long requests = c.getMessagesIn();
                long since;
                if (requests == 0) {
                    since = endPoint.getCreatedTimeStamp();
                } else {
                    Waiting earlier = laterHeads.get(c);
                    Waiting w = earlier != null && earlier.requests == requests ? earlier : new Waiting(c, requests, now);
                    if (w != earlier) {
                        waiting.addLast(w);
                    }
                    seen.put(c, w);
                    since = w.sinceMillis;
                }
                if (now - since >= timeoutMillis) {
                    close(c, timedOut, "its request head did not arrive within " + timeoutMillis + " ms");
                }
            }
            laterHeads = seen;
            waiting.removeIf(w -> !w.current());
            report(now);
        } catch (RuntimeException e) {
            log.warn("request head sweep failed", e);
        } finally {
            if (isRunning()) {
                sweep = connector.getScheduler().schedule(this::sweep, periodMillis, TimeUnit.MILLISECONDS);
            }
        }
    }

    private static void close(HttpConnection c, AtomicLong counter, String why) {
        counter.incrementAndGet();
        log.debug("closing {}: {}", c.getEndPoint().getRemoteSocketAddress(), why);
        c.getEndPoint().close(new TimeoutException(why));
    }

    /** At most every 10 s, and only when something happened: how much, so an attack shows in the log. */
    private void report(long now) {
        long[] counts = {timedOut.get(), evicted.get(), stoppedAccepting.get()};
        if (java.util.Arrays.equals(counts, reportedCounts) || now - reported < LOG_EVERY_MILLIS) {
            return;
        }
        log.info("port {} since the last report: closed {} connections whose request head took over {} ms and {} "
                + "waiting for theirs at the connection limit ({}); stopped accepting {} times (every connection "
                + "past its head)", connector instanceof NetworkConnector n ? n.getLocalPort() : "?",
                counts[0] - reportedCounts[0], timeoutMillis, counts[1] - reportedCounts[1], maxConnections,
                counts[2] - reportedCounts[2]);
        System.arraycopy(counts, 0, reportedCounts, 0, counts.length);
        reported = now;
    }

    @Override
    protected void doStart() {
        sweep = connector.getScheduler().schedule(this::sweep, periodMillis, TimeUnit.MILLISECONDS);
    }

    @Override
    protected void doStop() {
        Scheduler.Task task = sweep;
        if (task != null) {
            task.cancel();
        }
    }
}
