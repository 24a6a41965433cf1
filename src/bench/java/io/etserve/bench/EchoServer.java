package io.etserve.bench;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.util.Locale;

/**
 * The data-path benchmark's transport-only baseline (bench/data-path.sh): an HTTP/1.1 server on
 * loopback that answers every request with its own body. The body is read from the socket into
 * one direct buffer per connection and written back from it with the status line in one
 * gathering write: the kernel's two copies and nothing else, what moving the bytes costs, to set
 * the service's MB/s and CPU beside. (Until 7 December it read through socket streams into a
 * heap array, which costs two more copies per request through the JDK's temporary direct
 * buffers: bench/results/2026-12-07-2core-data-path-serving-share.md.)
 * Usage: EchoServer PORT
 */
public final class EchoServer {

    public static void main(String[] args) throws IOException {
        int port = Integer.parseInt(args[0]);
        try (ServerSocketChannel server = ServerSocketChannel.open()) {
            server.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 64);
            System.out.println("echo server on 127.0.0.1:" + port);
            while (true) {
                SocketChannel channel = server.accept();
                Thread t = new Thread(() -> serve(channel), "echo");
                t.setDaemon(true);
                t.start();
            }
        }
    }

    private static void serve(SocketChannel channel) {
        try (channel) {
            channel.setOption(StandardSocketOptions.TCP_NODELAY, true);
            ByteBuffer in = ByteBuffer.allocateDirect(64 * 1024).flip();  // read from; empty
            ByteBuffer body = ByteBuffer.allocateDirect(0);
            while (true) {
                long length = readHeaders(channel, in);
                if (length < 0) {
                    return;
                }
                if (body.capacity() < length) {
                    body = ByteBuffer.allocateDirect((int) length);
                }
                body.clear().limit((int) length);
                // Body bytes that came with the headers, then the rest straight from the socket
                int early = Math.min(in.remaining(), body.remaining());
                body.put(in.slice(in.position(), early));
                in.position(in.position() + early);
                while (body.hasRemaining()) {
                    if (channel.read(body) < 0) {
                        return;
                    }
                }
                ByteBuffer head = ByteBuffer.wrap(("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                        + "Content-Length: " + length + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
                ByteBuffer[] answer = {head, body.flip()};
                while (head.hasRemaining() || body.hasRemaining()) {
                    channel.write(answer);
                }
            }
        } catch (IOException e) {
            // the client went away
        }
    }

    /**
     * The request's Content-Length (0 without one), or -1 at the end of the connection. Reads
     * {@code in} up to the end of the headers, refilling it from the channel; what it read past
     * them stays in {@code in}.
     */
    private static long readHeaders(SocketChannel channel, ByteBuffer in) throws IOException {
        StringBuilder line = new StringBuilder();
        long length = 0;
        while (true) {
            if (!in.hasRemaining()) {
                in.clear();
                int n = channel.read(in);
                in.flip();
                if (n < 0) {
                    return -1;
                }
                continue;
            }
            char c = (char) (in.get() & 0xff);
            if (c == '\n') {
                String l = line.toString().trim();
                if (l.isEmpty()) {
                    return length;
                }
                if (l.toLowerCase(Locale.ROOT).startsWith("content-length:")) {
                    length = Long.parseLong(l.substring(15).trim());
                }
                line.setLength(0);
            } else {
                line.append(c);
            }
        }
    }
}
