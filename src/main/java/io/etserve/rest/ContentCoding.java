package io.etserve.rest;

import io.etserve.inference.UntrustedText;
import java.io.IOException;
import java.io.InputStream;
import java.util.Locale;
import java.util.zip.GZIPInputStream;
import java.util.zip.InflaterInputStream;
import org.springframework.http.HttpStatus;

/**
 * The {@code Content-Encoding} of a REST inference body, and the inflating of a compressed one.
 * Triton's HTTP clients compress a request when asked ({@code request_compression_algorithm}):
 * gzip (RFC 1952) or deflate, which in HTTP is the zlib format (RFC 1950); Triton's server
 * inflates them, and so does this one. Any other coding is refused 415.
 */
enum ContentCoding {

    IDENTITY, GZIP, DEFLATE;

    /** The codings a body may have, for {@code Accept-Encoding} on a 415 (RFC 9110 §12.5.3). */
    static final String ACCEPTED = "gzip, deflate";

    /**
     * The coding a {@code Content-Encoding} names: none (absent or blank) or {@code identity};
     * {@code gzip} or its alias {@code x-gzip}; {@code deflate}. Case and surrounding whitespace
     * do not matter. A list of codings is refused as any other: Triton's clients apply one.
     *
     * @throws ApiException 415 for any other coding
     */
    static ContentCoding of(String header) {
        String coding = normalized(header);
        return switch (coding) {
            case "", "identity" -> IDENTITY;
            case "gzip", "x-gzip" -> GZIP;
            case "deflate" -> DEFLATE;
            default -> throw new ApiException(HttpStatus.UNSUPPORTED_MEDIA_TYPE, "Content-Encoding '"
                    + UntrustedText.abbreviate(header) + "' is not supported: send the body uncompressed (identity)"
                    + " or compressed with one of " + ACCEPTED);
        };
    }

    /**
     * Whether a {@code Content-Encoding} names no coding, as {@link #of} reads it: the body is
     * read as sent. Anything else (a coding, supported or not) is for {@link #of} to judge.
     */
    static boolean isIdentity(String header) {
        if (header == null) {
            return true;  // the usual request: no allocation
        }
        String coding = normalized(header);
        return coding.isEmpty() || coding.equals("identity");
    }

    private static String normalized(String header) {
        return header == null ? "" : header.trim().toLowerCase(Locale.ROOT);
    }

    /**
     * Inflates the compressed bytes of {@code sent} (a gzip or deflate body) into {@code into},
     * whose own limit and budget bound what they inflate to (413 past the limit, having read at
     * most the limit and one chunk more; 503 when the budget is spent).
     *
     * @throws ApiException 400 when the bytes are not a whole stream of this coding
     */
    void inflate(RequestBody sent, RequestBody into) {
        try (InputStream in = this == GZIP ? new GZIPInputStream(sent.bytes()) : new Zlib(sent.bytes())) {
            into.readAll(in);
            if (in instanceof Zlib zlib && zlib.trailing()) {
                // Nothing may follow the stream: those bytes would be part of no request.
                throw notInflating("bytes follow the end of the compressed data");
            }
        } catch (IOException e) {
            // ZipException (corrupt data, a bad header or checksum) or EOFException (the body ends
            // before the stream does; an empty body has no gzip header).
            throw notInflating(e.getMessage() != null ? e.getMessage() : "the body ends before the compressed data does");
        } catch (ApiException e) {
            if (e.status() == HttpStatus.CONTENT_TOO_LARGE) {
                throw new ApiException(e.status(), "the " + this + " request body inflated: " + e.getMessage());
            }
            throw e;
        }
    }

    private ApiException notInflating(String reason) {
        return new ApiException(HttpStatus.BAD_REQUEST, "the " + this + " request body does not inflate: " + reason);
    }

    /** The name HTTP gives the coding. */
    @Override
    public String toString() {
        return name().toLowerCase(Locale.ROOT);
    }

    /**
     * The zlib format with the default {@link java.util.zip.Inflater}, which says whether bytes
     * are left once its stream ended (gzip's reader takes what follows as another member).
     */
    private static final class Zlib extends InflaterInputStream {

        Zlib(InputStream in) {
            super(in);
        }

        boolean trailing() throws IOException {
            return inf.getRemaining() > 0 || in.available() > 0;
        }
    }
}
