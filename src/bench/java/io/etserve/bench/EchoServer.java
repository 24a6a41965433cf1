package io.etserve.bench;

import java.io.BufferedInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.Locale;

/**
 * The data-path benchmark's transport-only baseline (bench/data-path.sh): an HTTP/1.1 server on
 * loopback that answers every request with its own body, from one reused array per connection.
 * No parsing beyond the headers, no copies beyond the socket's: what moving the bytes costs, to
 * set the service's MB/s beside. Usage: EchoServer PORT
 */
public final class EchoServer {

    public static void main(String[] args) throws IOException {
        int port = Integer.parseInt(args[0]);
        try (ServerSocket server = new ServerSocket(port, 64, InetAddress.getLoopbackAddress())) {
            System.out.println("echo server on 127.0.0.1:" + port);
            while (true) {
                Socket socket = server.accept();
                Thread t = new Thread(() -> serve(socket), "echo");
                t.setDaemon(true);
                t.start();
            }
        }
    }

    private static void serve(Socket socket) {
        try (socket) {
            socket.setTcpNoDelay(true);
            InputStream in = new BufferedInputStream(socket.getInputStream(), 64 * 1024);
            OutputStream out = socket.getOutputStream();
            byte[] body = new byte[0];
            while (true) {
                long length = readHeaders(in);
                if (length < 0) {
                    return;
                }
                if (body.length < length) {
                    body = new byte[(int) length];
                }
                for (int at = 0; at < length; ) {
                    int n = in.read(body, at, (int) length - at);
                    if (n < 0) {
                        return;
                    }
                    at += n;
                }
                out.write(("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: " + length
                        + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
                out.write(body, 0, (int) length);
                out.flush();
            }
        } catch (IOException e) {
            // the client went away
        }
    }

    /** The request's Content-Length (0 without one), or -1 at the end of the connection. */
    private static long readHeaders(InputStream in) throws IOException {
        StringBuilder line = new StringBuilder();
        long length = 0;
        for (int c; (c = in.read()) >= 0; ) {
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
                line.append((char) c);
            }
        }
        return -1;
    }
}
