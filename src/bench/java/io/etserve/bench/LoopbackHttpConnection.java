package io.etserve.bench;

import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.Closeable;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.Locale;
import java.util.OptionalInt;

/**
 * A blocking HTTP/1.1 keep-alive connection to 127.0.0.1, and nothing more. The load generator
 * uses it instead of {@code java.net.http.HttpClient} because on a 2-core host every
 * client-side microsecond is taken from the server: this writes one pre-encoded request with
 * one {@code write} and parses the response in the calling thread, with no selector thread,
 * no executor hand-offs and no per-request header objects.
 *
 * <p>It reconnects when the server closes the connection (after a 408 or 413) and counts
 * those reconnects.
 */
final class LoopbackHttpConnection implements Closeable {

    /** A complete response; {@code body} holds exactly Content-Length (or de-chunked) bytes. */
    record Response(int status, byte[] body, OptionalInt inferenceHeaderLength) {}

    private static final int MAX_HEADER_BYTES = 16 * 1024;
    private static final int MAX_BODY_BYTES = 64 * 1024 * 1024;

    private final InetSocketAddress address;
    private final int timeoutMillis;
    private Socket socket;
    private InputStream in;
    private OutputStream out;
    private long connects;

    LoopbackHttpConnection(int port, int timeoutMillis) {
        this.address = new InetSocketAddress(InetAddress.getLoopbackAddress(), port);
        this.timeoutMillis = timeoutMillis;
        if (!address.getAddress().getHostAddress().equals("127.0.0.1")) {
            throw new IllegalStateException("the loopback address is " + address + ", not 127.0.0.1");
        }
    }

    /** Sends {@code request} (request line, headers and body, already encoded) and reads the reply. */
    Response exchange(byte[] request) throws IOException {
        if (socket == null) {
            connect();
        }
        try {
            out.write(request);
            out.flush();
            return readResponse();
        } catch (IOException e) {
            close();
            throw e;
        }
    }

    /** How many TCP connections this has opened, the first one included. */
    long connects() {
        return connects;
    }

    private void connect() throws IOException {
        Socket s = new Socket();
        try {
            s.setTcpNoDelay(true);
            s.setSoTimeout(timeoutMillis);
            s.connect(address, timeoutMillis);
        } catch (IOException e) {
            s.close();
            throw e;
        }
        socket = s;
        in = new BufferedInputStream(s.getInputStream(), 64 * 1024);
        out = s.getOutputStream();
        connects++;
    }

    private Response readResponse() throws IOException {
        String statusLine = readLine();
        if (!statusLine.startsWith("HTTP/1.1 ") || statusLine.length() < 12) {
            throw new IOException("not an HTTP/1.1 status line: " + statusLine);
        }
        int status = Integer.parseInt(statusLine.substring(9, 12));
        long contentLength = -1;
        boolean chunked = false;
        boolean closeAfter = false;
        OptionalInt inferenceHeaderLength = OptionalInt.empty();
        int headerBytes = statusLine.length();
        for (String line = readLine(); !line.isEmpty(); line = readLine()) {
            headerBytes += line.length();
            if (headerBytes > MAX_HEADER_BYTES) {
                throw new IOException("response headers exceed " + MAX_HEADER_BYTES + " bytes");
            }
            int colon = line.indexOf(':');
            if (colon <= 0) {
                throw new IOException("malformed header line: " + line);
            }
            String name = line.substring(0, colon).trim().toLowerCase(Locale.ROOT);
            String value = line.substring(colon + 1).trim();
            switch (name) {
                case "content-length" -> contentLength = Long.parseLong(value);
                case "transfer-encoding" -> chunked = value.toLowerCase(Locale.ROOT).contains("chunked");
                case "connection" -> closeAfter = value.equalsIgnoreCase("close");
                case "inference-header-content-length" -> inferenceHeaderLength = OptionalInt.of(Integer.parseInt(value));
                default -> { }
            }
        }
        byte[] body;
        if (chunked) {
            body = readChunked();
        } else if (contentLength >= 0) {
            if (contentLength > MAX_BODY_BYTES) {
                throw new IOException("response body of " + contentLength + " bytes is over the limit");
            }
            // Straight into an array of the final size (large reads bypass the stream's buffer).
            body = new byte[(int) contentLength];
            int got = in.readNBytes(body, 0, body.length);
            if (got != contentLength) {
                throw new EOFException("response body ended after " + got + " of " + contentLength + " bytes");
            }
        } else {
            // Neither length nor chunking: the body runs to the end of the connection.
            body = in.readNBytes(MAX_BODY_BYTES);
            closeAfter = true;
        }
        if (closeAfter) {
            close();
        }
        return new Response(status, body, inferenceHeaderLength);
    }

    private byte[] readChunked() throws IOException {
        ByteArrayOutputStream body = new ByteArrayOutputStream();
        while (true) {
            String sizeLine = readLine();
            int semicolon = sizeLine.indexOf(';');
            int size = Integer.parseInt((semicolon >= 0 ? sizeLine.substring(0, semicolon) : sizeLine).trim(), 16);
            if (size == 0) {
                while (!readLine().isEmpty()) {
                    // trailers: none expected, skipped
                }
                return body.toByteArray();
            }
            if (body.size() + size > MAX_BODY_BYTES) {
                throw new IOException("chunked response body is over the limit");
            }
            byte[] chunk = in.readNBytes(size);
            if (chunk.length != size) {
                throw new EOFException("chunk ended early");
            }
            body.writeBytes(chunk);
            if (!readLine().isEmpty()) {
                throw new IOException("missing CRLF after a chunk");
            }
        }
    }

    /** One CRLF-terminated line in ISO-8859-1, without the CRLF. */
    private String readLine() throws IOException {
        StringBuilder line = new StringBuilder(64);
        while (true) {
            int b = in.read();
            if (b < 0) {
                throw new EOFException("connection closed by the server");
            }
            if (b == '\n') {
                int n = line.length();
                if (n > 0 && line.charAt(n - 1) == '\r') {
                    line.setLength(n - 1);
                }
                return line.toString();
            }
            if (line.length() > MAX_HEADER_BYTES) {
                throw new IOException("header line too long");
            }
            line.append((char) b);
        }
    }

    static byte[] ascii(String s) {
        return s.getBytes(StandardCharsets.ISO_8859_1);
    }

    @Override
    public void close() {
        if (socket != null) {
            try {
                socket.close();
            } catch (IOException ignored) {
                // closing a loopback socket that already failed: nothing left to release
            }
            socket = null;
            in = null;
            out = null;
        }
    }
}
