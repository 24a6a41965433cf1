package io.etserve.grpc;

import io.grpc.Codec;
import java.io.InputStream;
import java.io.OutputStream;
import java.util.zip.DeflaterOutputStream;
import java.util.zip.InflaterInputStream;

/**
 * gRPC's {@code deflate} message encoding (zlib, RFC 1950), which grpc-java does not register:
 * Triton's clients offer it beside {@code gzip}. A message's decompressed size is bounded by
 * grpc-java as a gzip one is, by the server's largest message.
 */
final class DeflateCodec implements Codec {

    static final DeflateCodec INSTANCE = new DeflateCodec();

    private DeflateCodec() {}

    @Override
    public String getMessageEncoding() {
        return "deflate";
    }

    @Override
    public OutputStream compress(OutputStream os) {
        return new DeflaterOutputStream(os);
    }

    @Override
    public InputStream decompress(InputStream is) {
        return new InflaterInputStream(is);
    }
}
