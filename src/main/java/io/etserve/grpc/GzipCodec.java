package io.etserve.grpc;

import io.grpc.Codec;
import io.grpc.Status;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.util.zip.GZIPInputStream;
import java.util.zip.GZIPOutputStream;

/**
 * gRPC's {@code gzip} message encoding, as grpc-java's own but for a message flagged gzip that
 * does not start as gzip data: {@link GZIPInputStream} reads the header when it is made, inside
 * grpc-java's deframer, whose failure ended the call UNKNOWN without a word. Here that is
 * INVALID_ARGUMENT with the reason; data that goes bad later fails in the parse, which refuses
 * it the same way ({@link UnreadableMessages}).
 */
final class GzipCodec implements Codec {

    static final GzipCodec INSTANCE = new GzipCodec();

    private GzipCodec() {}

    @Override
    public String getMessageEncoding() {
        return "gzip";
    }

    @Override
    public OutputStream compress(OutputStream os) throws IOException {
        return new GZIPOutputStream(os);
    }

    @Override
    public InputStream decompress(InputStream is) {
        try {
            return new GZIPInputStream(is);
        } catch (IOException e) {
            throw Status.INVALID_ARGUMENT.withDescription("the message is flagged gzip but is not gzip data: "
                    + e.getMessage()).withCause(e).asRuntimeException();
        }
    }
}
