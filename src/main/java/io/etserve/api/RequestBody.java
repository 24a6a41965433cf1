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

    /**
     * Reads {@code in} to its end (blocking reads, or a body already complete); 413 past the
     * limit or the declared length, 503 when the budget is spent.
     */
    void readAll(InputStream in) throws IOException {
        while (readFrom(in) >= 0) {
            // until the end of the body
        }
    }

    /**
     * Reads what {@code in} has straight into the body's array (no intermediate buffer): one
     * read call, so a non-blocking caller can ask {@code isReady()} between calls.
     *
     * @return the bytes read, or -1 at the end of the body
     */
    int readFrom(InputStream in) throws IOException {
        if (length == cap()) {
            // All the bytes that may come are here (the declared length, or the limit of a
            // chunked body): only the end of the body may follow.
            if (in.read() < 0) {
                return -1;
            }
            throw overCap();
        }
        if (length == buffer.length) {
            grow();
        }
        int n = in.read(buffer, length, buffer.length - length);
        if (n > 0) {
            length += n;
        }
        return n;
    }

    /** The most bytes this body may have: its declared length, else the limit. */
    private long cap() {
        return declared >= 0 ? declared : maxBytes;
    }

    private ApiException overCap() {
        return tooLarge(declared >= 0 ? "request body is longer than its Content-Length of " + declared
                : "request body exceeds the limit of " + maxBytes + " bytes");
    }

    /** Room for more (the array is full and below the cap): 503 when the budget is spent. */
    private void grow() {
        // Doubling keeps copies amortized O(n); never past what may still legally arrive, so an
        // honest Content-Length ends in an array of exactly that size.
        int grown = (int) Math.min(cap(), Math.max(INITIAL, 2L * buffer.length));
        reservation.grow(grown - buffer.length);
        buffer = Arrays.copyOf(buffer, grown);
    }

    int length() {
        return length;
    }

    /** The whole body; copies only when the array grew past it (a chunked body). */
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
