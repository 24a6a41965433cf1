package io.etserve.protocol;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalInt;

/**
 * An encoded {@code /infer} response body: the JSON part, then the binary output sections, kept
 * apart so they go to the connection as they are (no body array assembling both).
 *
 * @param json the JSON part's bytes; only the first {@code jsonLength} are valid (a small body's
 *     binary sections may be copied behind them, see {@link #buffers()})
 * @param jsonLength length of the JSON part
 * @param binary binary output data, in order, after the JSON part
 * @param inferenceHeaderContentLength length of the JSON part, for the
 *     {@code Inference-Header-Content-Length} header; present only when binary data follows it
 * @param contentType {@code application/json}, or {@code application/octet-stream} when the
 *     body carries binary data
 */
public record EncodedResponse(byte[] json, int jsonLength, List<ByteBuffer> binary,
        OptionalInt inferenceHeaderContentLength, String contentType) {

    public static final String JSON = "application/json";
    public static final String OCTET_STREAM = "application/octet-stream";

    public EncodedResponse {
        binary = List.copyOf(binary);
    }

    /** The body's length in bytes, for Content-Length. */
    public long contentLength() {
        long total = jsonLength;
        for (ByteBuffer b : binary) {
            total += b.remaining();
        }
        return total;
    }

    /**
     * Bodies up to this size go out as one write: their binary sections are copied behind the
     * JSON part in the container's buffer. Jetty writes a ByteBuffer on its own, after flushing
     * what it holds, so a small binary response would cost two writes, and the client two reads
     * and a wake-up: more than the same response as JSON (bench/results/cpu-small-requests.md).
     */
    static final int ONE_WRITE_BYTES = 8 * 1024;

    /**
     * Writes the body: the JSON part, then each binary section straight from where the bridge
     * put it (a servlet stream takes a direct buffer as is: Servlet 6.1's write(ByteBuffer));
     * a small body as one write instead ({@link #ONE_WRITE_BYTES}).
     */
    public void writeTo(OutputStream out) throws IOException {
        out.write(json, 0, jsonLength);
        boolean oneWrite = contentLength() <= ONE_WRITE_BYTES;
        for (ByteBuffer b : binary) {
            ByteBuffer section = b.duplicate();
            if (out instanceof jakarta.servlet.ServletOutputStream servlet && !oneWrite) {
                servlet.write(section);
            } else if (section.hasArray()) {
                out.write(section.array(), section.arrayOffset() + section.position(), section.remaining());
            } else {
                byte[] chunk = new byte[Math.min(64 * 1024, section.remaining())];
                while (section.hasRemaining()) {
                    int n = Math.min(chunk.length, section.remaining());
                    section.get(chunk, 0, n);
                    out.write(chunk, 0, n);
                }
            }
        }
    }

    /**
     * The body as buffers to write in order, for a sink that takes buffers (Jetty's core API): a
     * small body as one buffer, its binary sections copied behind the JSON part
     * ({@link #ONE_WRITE_BYTES}); else the JSON part, then each binary section as the bridge left it.
     */
    public List<ByteBuffer> buffers() {
        ByteBuffer head = ByteBuffer.wrap(json, 0, jsonLength);
        if (binary.isEmpty()) {
            return List.of(head);
        }
        long length = contentLength();
        if (length <= ONE_WRITE_BYTES) {
            // Behind the JSON in its own array when it has the room (the encoder sizes it so).
            ByteBuffer whole = json.length >= length ? ByteBuffer.wrap(json).position(jsonLength)
                    : ByteBuffer.allocate((int) length).put(head);
            binary.forEach(b -> whole.put(b.duplicate()));
            return List.of(whole.flip());
        }
        List<ByteBuffer> parts = new ArrayList<>(binary.size() + 1);
        parts.add(head);
        binary.forEach(b -> parts.add(b.duplicate()));
        return parts;
    }

    /** The whole body in one array (a copy; tests and tools). */
    public byte[] body() {
        java.io.ByteArrayOutputStream all = new java.io.ByteArrayOutputStream((int) Math.min(Integer.MAX_VALUE - 8,
                contentLength()));
        try {
            writeTo(all);
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
        return all.toByteArray();
    }
}
