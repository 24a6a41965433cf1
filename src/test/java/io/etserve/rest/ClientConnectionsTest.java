package io.etserve.rest;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.inference.Caller;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The watcher on real loopback connections, as Jetty holds them (non-blocking, the request
 * already read): a client that closes or resets is seen, one that sends more bytes (a pipelined
 * request) is not taken for gone, and nothing is read from the connection.
 */
class ClientConnectionsTest {

    final ClientConnections clients = new ClientConnections();

    @AfterEach
    void close() {
        clients.close();
    }

    /** A connected pair: the client's socket and the server's non-blocking channel. */
    record Connection(Socket client, SocketChannel server) implements AutoCloseable {
        static Connection open() throws IOException {
            try (ServerSocketChannel listener = ServerSocketChannel.open()) {
                listener.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
                Socket client = new Socket(InetAddress.getLoopbackAddress(), listener.socket().getLocalPort());
                SocketChannel server = listener.accept();
                server.configureBlocking(false);
                return new Connection(client, server);
            }
        }

        @Override
        public void close() throws IOException {
            client.close();
            server.close();
        }
    }

    @Test
    void aClientThatClosesItsConnectionIsGone() throws Exception {
        try (Connection c = Connection.open()) {
            CountDownLatch gone = new CountDownLatch(1);
            Caller.Watch watch = clients.caller(c::server).watch(gone::countDown);
            assertThat(gone.await(200, TimeUnit.MILLISECONDS)).as("still there").isFalse();
            c.client().close();
            assertThat(gone.await(5, TimeUnit.SECONDS)).as("seen to go").isTrue();
            watch.close();
        }
    }

    @Test
    void aClientThatResetsItsConnectionIsGone() throws Exception {
        try (Connection c = Connection.open()) {
            CountDownLatch gone = new CountDownLatch(1);
            clients.caller(c::server).watch(gone::countDown);
            c.client().setSoLinger(true, 0);
            c.client().close();
            assertThat(gone.await(5, TimeUnit.SECONDS)).isTrue();
        }
    }

    @Test
    void aClientThatSendsMoreIsStillThereAndItsBytesStayUnread() throws Exception {
        try (Connection c = Connection.open()) {
            CountDownLatch gone = new CountDownLatch(1);
            Caller.Watch watch = clients.caller(c::server).watch(gone::countDown);
            Thread.sleep(50);  // registered
            c.client().getOutputStream().write("GET /next HTTP/1.1\r\n".getBytes());
            assertThat(gone.await(300, TimeUnit.MILLISECONDS)).as("a pipelined request is no departure").isFalse();
            ByteBuffer next = ByteBuffer.allocate(64);
            assertThat(c.server().read(next)).as("the bytes are still Jetty's to read").isEqualTo(20);
            watch.close();
        }
    }

    @Test
    void aClosedWatchHearsNothingAndTheConnectionCanBeWatchedAgain() throws Exception {
        try (Connection c = Connection.open()) {
            CountDownLatch first = new CountDownLatch(1);
            clients.caller(c::server).watch(first::countDown).close();
            Thread.sleep(50);  // unregistered at the watcher's next look
            // The next request on the same keep-alive connection.
            CountDownLatch second = new CountDownLatch(1);
            clients.caller(c::server).watch(second::countDown);
            c.client().close();
            assertThat(second.await(5, TimeUnit.SECONDS)).isTrue();
            assertThat(first.getCount()).as("the first request had ended").isEqualTo(1);
        }
    }

    @Test
    void aConnectionThatIsNotASocketIsNotWatched() {
        Caller.Watch watch = clients.caller(() -> null).watch(() -> {
            throw new AssertionError("nothing to watch");
        });
        watch.close();
    }
}
