package io.etserve.api;

import io.etserve.runtime.DirectBufferPool;
import io.etserve.runtime.OutputBuffers;
import jakarta.servlet.ServletInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.springframework.http.HttpStatus;

/**
 * An inference request's body as it arrives, and the owner of every tensor buffer its exchange
 * uses. The JSON part (all of a JSON request; the first {@code Inference-Header-Content-Length}
 * bytes of a binary one) grows in a heap array; the binary sections go straight from the
 * connection into one pooled direct buffer, which the inputs then use in place (slices), so the
 * only copy of binary tensor data on the way in is the one out of the server's network buffer.
 * Inputs decoded from JSON and the forward call's outputs take pooled buffers from here too
 * ({@link #tensorBuffer}, {@link #allocate}); {@link #close()} gives them all back once the
 * response is written. Those are not counted in the in-flight budget, which bounds bodies held
 * before a model admits them: a JSON tensor is at most the size of its text, an output is made
 * only by an admitted call.
 *
 * <p>Everything allocated is reserved in {@link InflightBytes} as it grows, capped by the size
 * limit and the declared {@code Content-Length}: a client that declares a large body and sends
 * little costs what it sent (allocations at most double what arrived).
 */
final class RequestBody implements OutputBuffers, AutoCloseable {

    /** First allocation of each part when the client declared nothing (or something larger). */
    private static final int INITIAL = 64 * 1024;

    private final InflightBytes.Reservation reservation;
    private final DirectBufferPool pool;
    private final long maxBytes;
    private final long declared;
    /** Bytes of the JSON part: the header length of a binary request, else the whole body. */
    private final long jsonCap;
    private byte[] json = new byte[0];
    private int jsonLength;
    private ByteBuffer binary;  // pooled; position = bytes received
    private final List<ByteBuffer> taken = new ArrayList<>();
    private boolean closed;

    /**
     * @param declared the {@code Content-Length}, or -1 (chunked)
     * @param headerLength {@code Inference-Header-Content-Length}, or -1 for a JSON-only body
     * @throws ApiException 413 when {@code declared} is over {@code maxBytes}
     */
    RequestBody(InflightBytes inflight, DirectBufferPool pool, long maxBytes, long declared, long headerLength) {
        if (declared > maxBytes) {
            throw tooLarge("request body of " + declared + " bytes exceeds the limit of " + maxBytes);
        }
        this.pool = pool;
        this.maxBytes = maxBytes;
        this.declared = declared;
        this.jsonCap = headerLength >= 0 ? Math.min(headerLength, cap()) : cap();
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
     * One read from {@code in} straight into the part it belongs to (no intermediate buffer), so
     * a non-blocking caller can ask {@code isReady()} between calls.
     *
     * @return the bytes read, or -1 at the end of the body
     */
    int readFrom(InputStream in) throws IOException {
        if (length() == cap()) {
            // All the bytes that may come are here (the declared length, or the limit of a
            // chunked body): only the end of the body may follow.
            if (in.read() < 0) {
                return -1;
            }
            throw overCap();
        }
        if (jsonLength < jsonCap) {
            if (jsonLength == json.length) {
                growJson();
            }
            int n = in.read(json, jsonLength, (int) Math.min(json.length - jsonLength, jsonCap - jsonLength));
            if (n > 0) {
                jsonLength += n;
            }
            return n;
        }
        if (binary == null || !binary.hasRemaining()) {
            growBinary(in.available());
        }
        int n;
        if (in instanceof ServletInputStream servlet) {
            n = servlet.read(binary);  // the network buffer's bytes, copied once, into place
        } else {
            byte[] chunk = new byte[Math.min(binary.remaining(), INITIAL)];
            n = in.read(chunk);
            if (n > 0) {
                binary.put(chunk, 0, n);
            }
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

    private void growJson() {
        // Doubling keeps copies amortized O(n); never past what may still legally arrive, so an
        // honest length ends in an array of exactly that size.
        int grown = (int) Math.min(jsonCap, Math.max(INITIAL, 2L * json.length));
        reservation.grow(grown - json.length);
        json = Arrays.copyOf(json, grown);
    }

    /**
     * Room for more binary data: double what is held (or take what is already waiting), never
     * past what may still legally arrive. An honest Content-Length that arrives with its headers
     * gets its final buffer at once; a trickled one is copied on growth, amortized O(n).
     */
    private void growBinary(int waiting) {
        long most = cap() - jsonCap;
        int held = binary == null ? 0 : binary.position();
        long grown = Math.min(most, Math.max(Math.max(INITIAL, 2L * held), (long) held + waiting));
        ByteBuffer bigger = pool.acquire(grown);
        reservation.grow(bigger.capacity() - (binary == null ? 0 : binary.capacity()));
        if (binary != null) {
            bigger.put(binary.flip());
            pool.release(binary);
        }
        binary = bigger;
    }

    /** {@code Inference-Header-Content-Length}, or -1 when absent or not a number (the controller refuses that). */
    static long headerLength(jakarta.servlet.http.HttpServletRequest request) {
        String value = request.getHeader(InferenceProtocolController.HEADER_LENGTH);
        if (value == null) {
            return -1;
        }
        try {
            return Math.max(-1, Long.parseLong(value.trim()));
        } catch (NumberFormatException e) {
            return -1;
        }
    }

    int length() {
        return jsonLength + (binary == null ? 0 : binary.position());
    }

    /** The JSON part's array; its first {@link #jsonLength()} bytes are the JSON. */
    byte[] json() {
        return json;
    }

    int jsonLength() {
        return jsonLength;
    }

    /** The binary sections (a view from their first byte to the last received), or an empty buffer. */
    ByteBuffer binary() {
        return binary == null ? ByteBuffer.allocate(0) : binary.duplicate().flip().slice();
    }

    /** A pooled direct buffer for an input decoded from JSON; given back with the body. */
    ByteBuffer tensorBuffer(int bytes) {
        return take(bytes);
    }

    /** Outputs of the forward call go to pooled buffers too, written to the response from there. */
    @Override
    public ByteBuffer allocate(int output, long bytes) {
        return take(bytes);
    }

    private synchronized ByteBuffer take(long bytes) {
        if (closed) {
            throw new IllegalStateException("the request body was released");
        }
        ByteBuffer b = pool.acquire(bytes);
        taken.add(b);
        return b;
    }

    /** Gives every buffer back (once); nothing of this exchange may be used after. */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        json = null;
        if (binary != null) {
            pool.release(binary);
            binary = null;
        }
        taken.forEach(pool::release);
        taken.clear();
        reservation.close();
    }

    private static ApiException tooLarge(String message) {
        return new ApiException(HttpStatus.CONTENT_TOO_LARGE, message);
    }
}
