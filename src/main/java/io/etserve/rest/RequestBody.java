package io.etserve.rest;

import io.etserve.inference.InflightBytes;
import io.etserve.inference.OverloadedException;
import io.etserve.runtime.BufferLease;
import io.etserve.runtime.DirectBufferPool;
import io.etserve.runtime.OutputBuffers;
import jakarta.servlet.ServletInputStream;
import jakarta.servlet.http.HttpServletRequest;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import org.springframework.http.HttpStatus;

/**
 * An inference request's body as it arrives, and the owner of every tensor buffer its exchange
 * uses. The JSON part (all of a JSON request; the first {@code Inference-Header-Content-Length}
 * bytes of a binary one) is held in heap arrays; the binary sections go straight from the
 * connection into pooled direct buffers, which the inputs then use in place (slices), so a
 * binary tensor's bytes are copied out of the server's network buffer once, and once more only
 * if they arrived in pieces. Inputs decoded from JSON and the forward call's outputs take pooled
 * buffers from here too ({@link #tensorBuffer}, {@link #allocate}); {@link #close()} gives them
 * all back once the response is written. Those are not counted in the in-flight budget, which
 * bounds bodies held before a model admits them: a JSON tensor is at most the size of its text,
 * an output is made only by an admitted call.
 *
 * <p>Each byte that arrives is reserved in {@link InflightBytes}, never what the
 * {@code Content-Length} declares, and a body holds little more than what arrived: a part
 * arrives into chunks that grow with it up to 1 MiB (each sized to what is already waiting when
 * that is more), and becomes one array or buffer when it is read ({@link #json()},
 * {@link #binary()}). A body that came with its headers (the usual small request) is one chunk
 * per part, of its exact size, and is never copied again; a stalled upload holds what it sent
 * and at most one chunk per part more. The exception: the binary part of a body with a
 * Content-Length takes one buffer of its whole length at its first byte when the budget has the
 * room to lend ({@link InflightBytes.Reservation#presize}), since joining a large tensor's
 * pieces would copy all of it again; the memory not yet filled is bounded by the budget's room.
 */
final class RequestBody implements OutputBuffers, AutoCloseable {

    /** The first chunk of a part when less is waiting. */
    private static final int INITIAL = 64 * 1024;
    /** Chunks double with their part up to this: few chunks, and little held beyond what arrived. */
    private static final int LARGEST_CHUNK = 1 << 20;
    private static final byte[] NO_JSON = new byte[0];

    private final InflightBytes.Reservation reservation;
    private final DirectBufferPool pool;
    private final long maxBytes;
    private final long declared;
    /** Bytes of the JSON part: the header length of a binary request, else the whole body. */
    private final long jsonCap;
    /** The JSON part: heap chunks, all full but the last, which holds {@code jsonInLast} bytes. */
    private final List<byte[]> json = new ArrayList<>();
    private int jsonInLast;
    private int jsonLength;
    /** The binary sections: pooled chunks, all full but the last; position = bytes received. */
    private final List<ByteBuffer> binary = new ArrayList<>();
    private long binaryLength;
    /** Buffers for inputs decoded from JSON and for the forward call's outputs. */
    private final BufferLease tensors;
    /** The array a binary part is read through from a stream that cannot fill a buffer itself. */
    private byte[] scratch;
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
        this.tensors = new BufferLease(pool);
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
     * Takes a body that arrived whole with its request's head (the bytes are copied; the caller
     * keeps {@code bytes}); refusals as {@link #readAll(InputStream)}.
     */
    void readAll(ByteBuffer bytes) throws IOException {
        readAll(new BufferStream(bytes.slice()));
    }

    /**
     * One read from {@code in} straight into the part it belongs to (no intermediate buffer), so
     * a non-blocking caller can ask {@code isReady()} between calls. The bytes read are reserved
     * in the budget.
     *
     * @return the bytes read, or -1 at the end of the body
     * @throws ApiException 503 when the budget is spent, 413 past the limit
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
        int n = jsonLength < jsonCap ? readJson(in) : readBinary(in);
        if (n > 0) {
            try {
                reservation.grow(n);
            } catch (OverloadedException spent) {
                throw new ApiException(HttpStatus.SERVICE_UNAVAILABLE, spent.getMessage(), spent.retryAfter());
            }
        }
        return n;
    }

    private int readJson(InputStream in) throws IOException {
        byte[] chunk = json.isEmpty() ? null : json.get(json.size() - 1);
        if (chunk == null || jsonInLast == chunk.length) {
            chunk = new byte[chunk(jsonLength, jsonCap - jsonLength, in.available())];
            json.add(chunk);
            jsonInLast = 0;
        }
        int n = in.read(chunk, jsonInLast, chunk.length - jsonInLast);
        if (n > 0) {
            jsonInLast += n;
            jsonLength += n;
        }
        return n;
    }

    private int readBinary(InputStream in) throws IOException {
        ByteBuffer chunk = binary.isEmpty() ? null : binary.get(binary.size() - 1);
        if (chunk == null || !chunk.hasRemaining()) {
            long left = cap() - jsonCap - binaryLength;
            // A binary part of a declared length takes one buffer for all of it when the budget
            // has room to lend (InflightBytes): no join, the tensors are slices of what the
            // connection's bytes were copied into. Else it grows in chunks.
            boolean whole = binary.isEmpty() && declared >= 0 && left > INITIAL && reservation.presize(left);
            chunk = pool.acquire(whole ? left : chunk(binaryLength, left, in.available()));
            binary.add(chunk);
        }
        int n;
        if (in instanceof ServletInputStream servlet) {
            n = servlet.read(chunk);  // the network buffer's bytes, copied once, into place
        } else if (in instanceof BufferStream buffer) {
            n = buffer.read(chunk);
        } else {
            // Any other stream (an inflating one: ContentCoding) reads through one array per body.
            if (scratch == null) {
                scratch = new byte[INITIAL];
            }
            n = in.read(scratch, 0, Math.min(chunk.remaining(), scratch.length));
            if (n > 0) {
                chunk.put(scratch, 0, n);
            }
        }
        if (n > 0) {
            binaryLength += n;
        }
        return n;
    }

    /**
     * The next chunk of a part that holds {@code held} bytes and may take {@code left} more:
     * as large as the part so far (doubling it) within {@link #INITIAL} and
     * {@link #LARGEST_CHUNK}, or what is already {@code waiting} when that is more, never past
     * what may still legally arrive (so an honest length ends in a chunk of exactly that size).
     */
    private static int chunk(long held, long left, int waiting) {
        long size = Math.max(Math.min(LARGEST_CHUNK, Math.max(INITIAL, held)), waiting);
        return (int) Math.min(left, size);
    }

    /** The most bytes this body may have: its declared length, else the limit. */
    private long cap() {
        return declared >= 0 ? declared : maxBytes;
    }

    private ApiException overCap() {
        return tooLarge(declared >= 0 ? "request body is longer than its Content-Length of " + declared
                : "request body exceeds the limit of " + maxBytes + " bytes");
    }

    /**
     * {@code Inference-Header-Content-Length} as the body is read: -1 when absent, negative or not
     * a number (the whole body is then held as JSON, within the limit), and {@link
     * InferExchange#headerLength} refuses such a value with 400 once the request is decoded.
     */
    static long headerLength(HttpServletRequest request) {
        return headerLength(request.getHeader(InferExchange.HEADER_LENGTH));
    }

    /** As {@link #headerLength(HttpServletRequest)}, from the header's value (null when absent). */
    static long headerLength(String value) {
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
        return (int) (jsonLength + binaryLength);
    }

    /** Bytes of the arrays and buffers that hold the body (what arrived, and the rest of its last chunks). */
    long allocated() {
        return json.stream().mapToLong(a -> a.length).sum() + binary.stream().mapToLong(ByteBuffer::capacity).sum();
    }

    /**
     * The JSON part's array; its first {@link #jsonLength()} bytes are the JSON. A part that
     * arrived in several chunks is joined into one array here, once.
     */
    byte[] json() {
        if (json.size() > 1 && jsonLength > json.get(0).length) {
            byte[] all = new byte[jsonLength];
            int at = 0;
            for (byte[] chunk : json) {
                int n = Math.min(chunk.length, jsonLength - at);
                System.arraycopy(chunk, 0, all, at, n);
                at += n;
            }
            json.clear();
            json.add(all);
            jsonInLast = jsonLength;
        }
        return json.isEmpty() ? NO_JSON : json.get(0);
    }

    int jsonLength() {
        return jsonLength;
    }

    /**
     * The binary sections (a view from their first byte to the last received), or an empty
     * buffer. Sections that arrived in several chunks are joined into one pooled buffer here, once.
     */
    ByteBuffer binary() {
        if (binary.isEmpty()) {
            return ByteBuffer.allocate(0);
        }
        if (binary.size() > 1) {
            // (A chunked body ends with a chunk taken for bytes that did not come: no join then.)
            ByteBuffer all = binary.get(0).position() == binaryLength ? binary.remove(0) : pool.acquire(binaryLength);
            for (ByteBuffer chunk : binary) {
                all.put(chunk.flip());
            }
            // Given back only once all are copied: were a copy to fail, close() would give each
            // back once, not a second time
            for (ByteBuffer chunk : binary) {
                pool.release(chunk);
            }
            binary.clear();
            binary.add(all);
        }
        return binary.get(0).duplicate().flip().slice();
    }

    /**
     * The bytes this body holds, in the order they arrived (the JSON part, then the binary part:
     * the split is by position, so this is the body exactly as sent), read in place; for a
     * compressed body ({@link ContentCoding}). Valid until {@link #close()}.
     */
    InputStream bytes() {
        List<ByteBuffer> parts = new ArrayList<>();
        int left = jsonLength;
        for (byte[] chunk : json) {
            int n = Math.min(chunk.length, left);
            parts.add(ByteBuffer.wrap(chunk, 0, n));
            left -= n;
        }
        for (ByteBuffer chunk : binary) {
            parts.add(chunk.duplicate().flip());
        }
        return new PartsStream(parts.toArray(ByteBuffer[]::new));
    }

    /** A pooled direct buffer for an input decoded from JSON; given back with the body. */
    ByteBuffer tensorBuffer(int bytes) {
        return tensors.acquire(bytes);
    }

    /**
     * A buffer for an input read from shared memory, its bytes reserved in the in-flight budget
     * as a body's are (503 when it is spent): they are held until the answer is written.
     */
    ByteBuffer sharedMemoryBuffer(int bytes) {
        reservation.grow(bytes);
        return tensors.acquire(bytes);
    }

    /** Outputs of the forward call go to pooled buffers too, written to the response from there. */
    @Override
    public ByteBuffer allocate(int output, long bytes) {
        return tensors.acquire(bytes);
    }

    /** Gives every buffer back (once); nothing of this exchange may be used after. */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        json.clear();
        binary.forEach(pool::release);
        binary.clear();
        tensors.close();
        reservation.close();
    }

    private static ApiException tooLarge(String message) {
        return new ApiException(HttpStatus.CONTENT_TOO_LARGE, message);
    }

    /** A buffer read as a stream; a binary part takes its bytes without an intermediate array. */
    private static final class BufferStream extends InputStream {

        private final ByteBuffer bytes;

        BufferStream(ByteBuffer bytes) {
            this.bytes = bytes;
        }

        @Override
        public int read() {
            return bytes.hasRemaining() ? bytes.get() & 0xff : -1;
        }

        @Override
        public int read(byte[] into, int offset, int length) {
            if (length == 0) {
                return 0;
            }
            if (!bytes.hasRemaining()) {
                return -1;
            }
            int n = Math.min(length, bytes.remaining());
            bytes.get(into, offset, n);
            return n;
        }

        int read(ByteBuffer into) {
            if (!bytes.hasRemaining()) {
                return -1;
            }
            int n = Math.min(into.remaining(), bytes.remaining());
            into.put(into.position(), bytes, bytes.position(), n);
            into.position(into.position() + n);
            bytes.position(bytes.position() + n);
            return n;
        }

        @Override
        public int available() {
            return bytes.remaining();
        }
    }

    /**
     * The buffers of a body read as one stream, in order ({@link #bytes()}). Apart from
     * {@link BufferStream}, which every small request reads through: one buffer there keeps that
     * path free of the array and the loop (bench/allocation.sh saw ~100 B more per request).
     */
    private static final class PartsStream extends InputStream {

        private final ByteBuffer[] parts;
        private int at;

        PartsStream(ByteBuffer[] parts) {
            this.parts = parts;
        }

        /** The part the next byte comes from, or null at the end. */
        private ByteBuffer current() {
            while (at < parts.length && !parts[at].hasRemaining()) {
                at++;
            }
            return at < parts.length ? parts[at] : null;
        }

        @Override
        public int read() {
            ByteBuffer bytes = current();
            return bytes != null ? bytes.get() & 0xff : -1;
        }

        @Override
        public int read(byte[] into, int offset, int length) {
            if (length == 0) {
                return 0;
            }
            ByteBuffer bytes = current();
            if (bytes == null) {
                return -1;
            }
            int n = Math.min(length, bytes.remaining());
            bytes.get(into, offset, n);
            return n;
        }

        /** All that is left, not only the current part's: gzip's reader asks whether another member follows. */
        @Override
        public int available() {
            long left = 0;
            for (int i = at; i < parts.length; i++) {
                left += parts[i].remaining();
            }
            return (int) Math.min(Integer.MAX_VALUE, left);
        }
    }
}
