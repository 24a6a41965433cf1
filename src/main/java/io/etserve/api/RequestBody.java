package io.etserve.api;

import java.io.IOException;
import java.io.InputStream;
import java.util.Arrays;
import org.springframework.http.HttpStatus;

/**
 * An inference request's body as it arrives: a byte array grown (and reserved in
 * {@link InflightBytes}) as bytes come in, capped by the size limit and, when the client declared
 * one, by its {@code Content-Length}. A client that declares a large body and sends little costs
 * what it sent.
 */
final class RequestBody implements AutoCloseable {

    /** First allocation when the client declared nothing (or something larger). */
    private static final int INITIAL = 64 * 1024;

    private final InflightBytes.Reservation reservation;
    private final long maxBytes;
    private final long declared;
    private byte[] buffer = new byte[0];
    private int length;

    /**
     * @param declared the {@code Content-Length}, or -1 (chunked)
     * @throws ApiException 413 when {@code declared} is over {@code maxBytes}
     */
    RequestBody(InflightBytes inflight, long maxBytes, long declared) {
        if (declared > maxBytes) {
            throw tooLarge("request body of " + declared + " bytes exceeds the limit of " + maxBytes);
        }
        this.maxBytes = maxBytes;
        this.declared = declared;
        this.reservation = inflight.open();
    }

    /** Appends {@code n} bytes; 413 past the limit or the declared length, 503 when the budget is spent. */
    void append(byte[] src, int off, int n) {
        ensureRoom((long) length + n);
        System.arraycopy(src, off, buffer, length, n);
        length += n;
    }

    /**
     * Reads what {@code in} has straight into the body's array (no intermediate buffer): one
     * read call, so a non-blocking caller can ask {@code isReady()} between calls.
     *
     * @return the bytes read, or -1 at the end of the body
     */
    int readFrom(InputStream in) throws IOException {
        if (length == declared) {
            // All declared bytes are here: only the end of the body may follow.
            if (in.read() < 0) {
                return -1;
            }
            throw tooLarge("request body is longer than its Content-Length of " + declared);
        }
        if (length == buffer.length) {
            ensureRoom((long) length + 1);
        }
        int n = in.read(buffer, length, buffer.length - length);
        if (n > 0) {
            length += n;
        }
        return n;
    }

    private void ensureRoom(long needed) {
        long cap = declared >= 0 ? declared : maxBytes;
        if (needed > cap) {
            throw tooLarge(declared >= 0 ? "request body is longer than its Content-Length of " + declared
                    : "request body exceeds the limit of " + maxBytes + " bytes");
        }
        if (needed > buffer.length) {
            // Doubling keeps copies amortized O(n); never past what may still legally arrive, so
            // an honest Content-Length ends in an array of exactly that size.
            int grown = (int) Math.min(cap, Math.max(needed, Math.max(INITIAL, 2L * buffer.length)));
            reservation.grow(grown - buffer.length);
            buffer = Arrays.copyOf(buffer, grown);
        }
    }

    int length() {
        return length;
    }

    /** The whole body; copies only when the client sent less than it declared (an error anyway). */
    byte[] bytes() {
        return length == buffer.length ? buffer : Arrays.copyOf(buffer, length);
    }

    @Override
    public void close() {
        buffer = null;
        reservation.close();
    }

    private static ApiException tooLarge(String message) {
        return new ApiException(HttpStatus.CONTENT_TOO_LARGE, message);
    }
}
