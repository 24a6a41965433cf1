package io.etserve.config;

import java.time.Duration;
import java.util.Arrays;
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
 *   <li>this is the connector's connection limit, in place of Jetty's (which stops accepting
 *       when full): at the limit, a new connection closes the one that has waited longest for
 *       its request head (sent part of one and stopped, or sent nothing for half a second), so
 *       slow heads can never fill the port. It stops accepting only while none may be let go
 *       (every connection is past its head, or the server has not read it yet, as in a flood of
 *       new connections), and looks again every 20 ms.
 * </ul>
 * A real client sends a request head in one packet; a connection still sending one after seconds
 * is an attack or a broken client, and closing it costs nothing that needed an answer. The sweep
 * looks at every connection once a period (a tenth of the timeout, at most a second); nothing
 * runs per request.
 */
final class RequestHeadGuard extends AbstractLifeCycle implements Connection.Listener {

    private static final Logger log = LoggerFactory.getLogger(RequestHeadGuard.class);
    private static final long LOG_EVERY_MILLIS = 10_000;
    /** A connection that has sent nothing for this long may be let go at the limit. */
    private static final long SILENT_MILLIS = 500;
    /** Waiting connections looked at for one to let go. */
    private static final int SCAN = 256;
    /** While accepting is stopped at the limit, how often to look for room. */
    private static final long RELIEVE_MILLIS = 20;

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
        if (maxConnections > 0 && connector.getConnectedEndPoints().size() >= maxConnections && !evictOldest()) {
            // Full, and nothing to let go yet (the acceptor can run ahead of the heads the
            // server has read): stop accepting until there is room, as Jetty's limit would.
            setLimited(true);
        }
    }

    @Override
    public void onClosed(Connection connection) {
        if (limited && connector.getConnectedEndPoints().size() < maxConnections) {
            setLimited(false);
        }
    }

    /** Stops or resumes accepting, when that changes; while stopped, {@link #relieve} looks again shortly. */
    private synchronized void setLimited(boolean limit) {
        if (limited != limit) {
            limited = limit;
            connector.setAccepting(!limit);
            if (limit) {
                stoppedAccepting.incrementAndGet();
                connector.getScheduler().schedule(this::relieve, RELIEVE_MILLIS, TimeUnit.MILLISECONDS);
            }
        }
    }

    /** While accepting is stopped: let slow heads go until there is room, then accept again. */
    private void relieve() {
        if (!limited || !isRunning()) {
            return;
        }
        int room = connector.getConnectedEndPoints().size() - maxConnections + 1;
        while (room-- > 0 && evictOldest()) {
            // one each
        }
        synchronized (this) {
            if (connector.getConnectedEndPoints().size() < maxConnections || room < 0) {
                limited = false;
                connector.setAccepting(true);
            } else {
                connector.getScheduler().schedule(this::relieve, RELIEVE_MILLIS, TimeUnit.MILLISECONDS);
            }
        }
    }

    /**
     * Closes the connection that has waited longest for its head: one that sent part of a head
     * and stopped, or one that has sent nothing for {@link #SILENT_MILLIS}. A real client's head
     * comes whole and is read within milliseconds, so it is neither (a connection whose head has
     * not been read yet is left alone). Looks at the oldest {@link #SCAN} waiting connections.
     *
     * @return false when none of them may be let go
     */
    private boolean evictOldest() {
        long silentSince = System.currentTimeMillis() - SILENT_MILLIS;
        for (int attempt = 0; attempt < 4; attempt++) {
            Waiting victim = null;
            int looked = 0;
            for (var it = waiting.iterator(); it.hasNext() && looked < SCAN; ) {
                Waiting w = it.next();
                if (!w.current()) {
                    it.remove();
                    continue;
                }
                looked++;
                if (!w.connection.getParser().isStart() || w.sinceMillis <= silentSince) {
                    victim = w;
                    break;
                }
            }
            if (victim == null) {
                return false;
            }
            if (waiting.remove(victim)) {  // another thread may have taken it: then look again
                close(victim.connection, evicted, "its request head was the longest awaited at the connection limit");
                return true;
            }
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
        if (Arrays.equals(counts, reportedCounts) || now - reported < LOG_EVERY_MILLIS) {
            return;
        }
        log.info("port {} since the last report: closed {} connections whose request head took over {} ms and {} "
                + "waiting for theirs at the connection limit ({}); stopped accepting {} times, with none to let go", connector instanceof NetworkConnector n ? n.getLocalPort() : "?",
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
