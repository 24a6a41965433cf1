package io.etserve.support;

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
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;

/**
 * One raw TCP connection speaking HTTP/1.1 by hand: what a slow, broken or hostile client does
 * (partial headers, trickled bodies, several requests on one connection) and what
 * {@code java.net.http.HttpClient} will not do.
 */
public final class RawConnection implements Closeable {

    public record Response(int status, Map<String, String> headers, byte[] body) {
        public String text() {
            return new String(body, StandardCharsets.UTF_8);
        }

        public String header(String name) {
            return headers.get(name.toLowerCase(Locale.ROOT));
        }
    }

    private final Socket socket;
    private final InputStream in;
    private final OutputStream out;

    private RawConnection(Socket socket) throws IOException {
        this.socket = socket;
        this.in = new BufferedInputStream(socket.getInputStream());
        this.out = socket.getOutputStream();
    }

    public static RawConnection open(int port, int readTimeoutMillis) throws IOException {
        Socket s = new Socket();
        s.setSoTimeout(readTimeoutMillis);
        s.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 5000);
        return new RawConnection(s);
    }

    /** A complete POST with a JSON body and Content-Length. */
    public static String post(String path, String json) {
        byte[] body = json.getBytes(StandardCharsets.UTF_8);
        return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                + "Content-Length: " + body.length + "\r\n\r\n" + json;
    }

    public RawConnection send(String ascii) throws IOException {
        return send(ascii.getBytes(StandardCharsets.UTF_8));
    }

    public RawConnection send(byte[] bytes) throws IOException {
        out.write(bytes);
        out.flush();
        return this;
    }

    public Response exchange(String request) throws IOException {
        send(request);
        return read();
    }

    /** Reads one response (a Content-Length, chunked or, on a closing connection, close-delimited body). */
    public Response read() throws IOException {
        String status = line();
        if (!status.startsWith("HTTP/1.1 ")) {
            throw new IOException("not an HTTP/1.1 status line: " + status);
        }
        Map<String, String> headers = new LinkedHashMap<>();
        for (String l = line(); !l.isEmpty(); l = line()) {
            int colon = l.indexOf(':');
            headers.put(l.substring(0, colon).trim().toLowerCase(Locale.ROOT), l.substring(colon + 1).trim());
        }
        byte[] body;
        if ("chunked".equalsIgnoreCase(headers.get("transfer-encoding"))) {
            ByteArrayOutputStream all = new ByteArrayOutputStream();
            for (int size; (size = Integer.parseInt(line().split(";")[0].trim(), 16)) > 0; line()) {
                all.writeBytes(exactly(size));
            }
            while (!line().isEmpty()) {
                // trailers
            }
            body = all.toByteArray();
        } else if (headers.containsKey("content-length")) {
            body = exactly(Integer.parseInt(headers.get("content-length")));
        } else if ("close".equalsIgnoreCase(headers.get("connection"))) {
            body = in.readAllBytes(); // HTTP/1.1's third framing: the body ends where the connection does
        } else {
            body = new byte[0];
        }
        return new Response(Integer.parseInt(status.substring(9, 12)), headers, body);
    }

    private byte[] exactly(int length) throws IOException {
        byte[] body = in.readNBytes(length);
        if (body.length != length) {
            throw new EOFException("body ended after " + body.length + " of " + length + " bytes");
        }
        return body;
    }

    /** True when the server closed its side: a read ends at EOF (or the connection was reset). */
    public boolean closedByServer() throws IOException {
        try {
            return in.read() < 0;
        } catch (SocketTimeoutException e) {
            return false;
        } catch (IOException reset) {
            return true;
        }
    }

    private String line() throws IOException {
        StringBuilder b = new StringBuilder();
        for (int c; (c = in.read()) != '\n'; ) {
            if (c < 0) {
                throw new EOFException("connection closed by the server");
            }
            if (c != '\r') {
                b.append((char) c);
            }
        }
        return b.toString();
    }

    @Override
    public void close() throws IOException {
        socket.close();
    }
}
