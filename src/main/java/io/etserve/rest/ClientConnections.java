package io.etserve.rest;

import io.etserve.inference.Caller;
import jakarta.servlet.http.HttpServletRequest;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.channels.CancelledKeyException;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.ClosedSelectorException;
import java.nio.channels.IllegalBlockingModeException;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.util.Iterator;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Supplier;
import org.eclipse.jetty.ee11.servlet.ServletContextRequest;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Tells the inference path that an HTTP client went away while its request waits.
 *
 * <p>Jetty does not read an HTTP/1.1 connection while its request is handled (what comes next
 * belongs to the next request), so it learns of a client that closed only when it writes the
 * answer: servlet listeners and Jetty's failure listeners stay silent until then. The cheapest
 * signal that does come is the kernel's: the connection turns readable when the client closes it
 * (end of stream or reset) or sends more bytes. So one thread with its own selector watches the
 * connections of the requests that wait, read-readiness only, and reads nothing (the bytes stay
 * Jetty's): readable with nothing to read is a client that is gone, as nginx takes it (its
 * 499); readable with bytes waiting is a pipelined request, so the client is there and watching
 * stops. A request is registered once it has waited a little and unregistered when it ends; one
 * that runs soon is never registered. The watcher looks every {@link #TICK_MILLIS} while it
 * watches anything, so a registration costs no wake-up.
 *
 * <p>Not seen: a TLS client's close (its close_notify arrives as bytes) and a client that
 * half-closes and still reads (treated as gone, as nginx does).
 */
public final class ClientConnections implements AutoCloseable {

    private static final Logger log = LoggerFactory.getLogger(ClientConnections.class);

    /**
     * How often the watcher looks while it watches anything: registrations and unregistrations
     * wait for its next look (no wake-up per request; a departure is seen at most this much
     * later), and only then does the JDK close the socket of a connection Jetty closed
     * meanwhile. With nothing registered it sleeps until a registration wakes it.
     */
    private static final long TICK_MILLIS = 10;

    private final Selector selector;
    private final Thread watcher;
    /** Registrations and unregistrations, applied in order by the watcher: keys change on its thread only. */
    private final ConcurrentLinkedQueue<Watch> changes = new ConcurrentLinkedQueue<>();
    /** The watcher sleeps without a timeout: the next registration must wake it. */
    private volatile boolean sleeping;
    private volatile boolean closed;

    public ClientConnections() {
        try {
            selector = Selector.open();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot open a selector to watch HTTP clients", e);
        }
        watcher = new Thread(this::watch, "etserve-client-watch");
        watcher.setDaemon(true);
        watcher.start();
    }

    /** The client of {@code request}, watched on demand. */
    public Caller caller(HttpServletRequest request) {
        return caller(() -> channelOf(request));
    }

    /** A client on the connection {@code channel} gives (looked up only when it is watched; null: not watched). */
    Caller caller(Supplier<SocketChannel> channel) {
        return gone -> {
            SocketChannel connection = channel.get();
            if (connection == null || closed) {
                return () -> {};
            }
            Watch w = new Watch(connection, gone);
            changes.add(w);
            if (sleeping) {
                selector.wakeup();
            }
            return w;
        };
    }

    /** The request's socket: Jetty's endpoint transport for plain HTTP/1.1; null elsewhere. */
    static SocketChannel channelOf(HttpServletRequest request) {
        try {
            ServletContextRequest jetty = ServletContextRequest.getServletContextRequest(request);
            if (jetty == null) {
                return null;
            }
            Object transport = jetty.getConnectionMetaData().getConnection().getEndPoint().getTransport();
            return transport instanceof SocketChannel channel ? channel : null;
        } catch (RuntimeException | LinkageError e) {
            return null;  // another container, or a request without a connection (tests)
        }
    }

    /** One waiting request's connection; closing it unregisters (lazily, see {@link #TICK_MILLIS}). */
    private final class Watch implements Caller.Watch {
        final SocketChannel channel;
        final Runnable gone;
        final AtomicBoolean fired = new AtomicBoolean();
        volatile boolean done;
        /** Whether the watcher has applied it: the next change for it is an unregistration. */
        boolean registered;

        Watch(SocketChannel channel, Runnable gone) {
            this.channel = channel;
            this.gone = gone;
        }

        @Override
        public void close() {
            if (!done) {
                done = true;
                changes.add(this);  // no wake-up: the next look unregisters it
            }
        }

        void fire() {
            if (!done && fired.compareAndSet(false, true)) {
                gone.run();
            }
        }
    }

    private void watch() {
        while (!closed) {
            try {
                // Sleeping is announced before the queue is read, and a registration is queued
                // before the flag is read: one of the two sees the other.
                sleeping = selector.keys().isEmpty();
                boolean idle = sleeping && changes.isEmpty();
                selector.select(idle ? 0 : TICK_MILLIS);
                sleeping = false;
                for (Watch w; (w = changes.poll()) != null; ) {
                    apply(w);
                }
                for (Iterator<SelectionKey> it = selector.selectedKeys().iterator(); it.hasNext(); ) {
                    SelectionKey key = it.next();
                    it.remove();
                    readable(key);
                }
            } catch (ClosedSelectorException e) {
                return;
            } catch (IOException | RuntimeException e) {
                log.warn("watching HTTP clients: {}", e.toString());
            }
        }
    }

    /**
     * A watch comes through here twice: when it starts (registered, unless it ended already) and
     * when it ends (unregistered, if the connection's key is still its own).
     */
    private void apply(Watch w) throws IOException {
        SelectionKey key = w.channel.keyFor(selector);
        if (w.registered) {
            if (key != null && key.attachment() == w) {
                key.cancel();
            }
            return;
        }
        w.registered = true;
        if (w.done) {
            return;  // ended before it was registered
        }
        if (key != null && !key.isValid()) {
            selector.selectNow();  // flush the connection's previous, cancelled key
            key = w.channel.keyFor(selector);
        }
        try {
            if (key == null) {
                w.channel.register(selector, SelectionKey.OP_READ, w);
            } else {
                key.attach(w);
                key.interestOps(SelectionKey.OP_READ);
            }
        } catch (ClosedChannelException | CancelledKeyException e) {
            w.fire();  // Jetty closed the connection already
        } catch (IllegalBlockingModeException e) {
            // not a selectable connection: nothing to watch
        }
    }

    /** A watched connection turned readable: gone when there is nothing to read. */
    private static void readable(SelectionKey key) {
        Watch w = (Watch) key.attachment();
        key.cancel();  // one verdict per watch
        if (w == null) {
            return;
        }
        int waiting;
        try {
            waiting = w.channel.socket().getInputStream().available();
        } catch (IOException e) {
            waiting = 0;  // closed or reset
        }
        if (waiting == 0) {
            w.fire();
        }
    }

    @Override
    public void close() {
        closed = true;
        selector.wakeup();
        try {
            watcher.join(TimeUnit.SECONDS.toMillis(5));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        try {
            selector.close();
        } catch (IOException e) {
            log.debug("closing the client watcher's selector: {}", e.toString());
        }
    }
}
