package io.etserve.rest;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.etserve.inference.InflightBytes;
import io.etserve.runtime.DirectBufferPool;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.Random;
import java.util.zip.DeflaterOutputStream;
import java.util.zip.GZIPOutputStream;
import org.junit.jupiter.api.Test;
import org.springframework.http.HttpStatus;

class ContentCodingTest {

    static final long MB = 1024 * 1024;
    static final DirectBufferPool POOL = new DirectBufferPool(64 * MB);

    static byte[] gzip(byte[] bytes) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        try (OutputStream z = new GZIPOutputStream(out)) {
            z.write(bytes);
        }
        return out.toByteArray();
    }

    /** The zlib format (RFC 1950), what HTTP's deflate and Python's zlib.compress are. */
    static byte[] deflate(byte[] bytes) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        try (OutputStream z = new DeflaterOutputStream(out)) {
            z.write(bytes);
        }
        return out.toByteArray();
    }

    static byte[] compress(ContentCoding coding, byte[] bytes) throws IOException {
        return coding == ContentCoding.GZIP ? gzip(bytes) : deflate(bytes);
    }

    /** A body as the filter holds it: the compressed bytes split at the (uncompressed) header length. */
    static RequestBody sent(InflightBytes budget, byte[] compressed, long headerLength) throws IOException {
        RequestBody body = new RequestBody(budget, POOL, 64 * MB, compressed.length, headerLength);
        body.readAll(new ByteArrayInputStream(compressed));
        return body;
    }

    static byte[] inflate(ContentCoding coding, byte[] compressed, long headerLength, long limit) throws IOException {
        InflightBytes budget = new InflightBytes(64 * MB);
        try (RequestBody sent = sent(budget, compressed, headerLength);
                RequestBody into = new RequestBody(budget, POOL, limit, -1, headerLength)) {
            coding.inflate(sent, into);
            ByteBuffer binary = into.binary();
            byte[] all = Arrays.copyOf(into.json(), into.jsonLength() + binary.remaining());
            binary.get(all, into.jsonLength(), binary.remaining());
            return all;
        } finally {
            assertThat(budget.held()).as("both bodies give their bytes back").isZero();
        }
    }

    @Test
    void theCodingsTritonsClientsSendAreRecognizedInAnyCaseAndSpacing() {
        for (String identity : new String[] {null, "", "  ", "identity", " Identity\t"}) {
            assertThat(ContentCoding.of(identity)).as(identity).isEqualTo(ContentCoding.IDENTITY);
            assertThat(ContentCoding.isIdentity(identity)).as(identity).isTrue();
        }
        // The direct path (InferExchange.directTarget) takes what of() reads as identity, no more.
        for (String coded : new String[] {"gzip", "x-gzip", "Deflate", "br", "identity, gzip", "\u0131dentity"}) {
            assertThat(ContentCoding.isIdentity(coded)).as(coded).isFalse();
        }
        for (String gzip : new String[] {"gzip", " GZIP ", "x-gzip", "X-Gzip"}) {
            assertThat(ContentCoding.of(gzip)).as(gzip).isEqualTo(ContentCoding.GZIP);
        }
        for (String deflate : new String[] {"deflate", "\tDeflate "}) {
            assertThat(ContentCoding.of(deflate)).as(deflate).isEqualTo(ContentCoding.DEFLATE);
        }
        assertThat(ContentCoding.GZIP).hasToString("gzip");
    }

    @Test
    void anyOtherCodingIsRefused415NamingItAndTheAcceptedOnes() {
        for (String other : new String[] {"br", "compress", "zstd", "gzip, deflate", "gzip;q=1", "identity, gzip"}) {
            assertThatThrownBy(() -> ContentCoding.of(other)).as(other).isInstanceOfSatisfying(ApiException.class,
                    e -> {
                        assertThat(e.status()).isEqualTo(HttpStatus.UNSUPPORTED_MEDIA_TYPE);
                        assertThat(e.getMessage()).contains("'" + other + "'").contains("gzip, deflate");
                    });
        }
        // A header's control characters are quoted escaped, not written into the message.
        assertThatThrownBy(() -> ContentCoding.of("br\r\nX: y")).hasMessageContaining("br\\u000D\\u000AX: y");
    }

    @Test
    void aCompressedBodyInflatesToTheBytesTheClientWroteSplitAtItsHeaderLength() throws Exception {
        byte[] body = new byte[100 + 300_000];
        new Random(5).nextBytes(body);
        Arrays.fill(body, 100, 200_000, (byte) 0);  // compressible, so the compressed split falls inside it
        for (ContentCoding coding : new ContentCoding[] {ContentCoding.GZIP, ContentCoding.DEFLATE}) {
            byte[] compressed = compress(coding, body);
            // The JSON part is the header length of the inflated body; the compressed bytes split there too.
            InflightBytes budget = new InflightBytes(64 * MB);
            try (RequestBody sent = sent(budget, compressed, 100);
                    RequestBody into = new RequestBody(budget, POOL, 64 * MB, -1, 100)) {
                coding.inflate(sent, into);
                assertThat(Arrays.copyOf(into.json(), into.jsonLength())).isEqualTo(Arrays.copyOf(body, 100));
                ByteBuffer binary = into.binary();
                assertThat(binary.isDirect()).isTrue();
                byte[] got = new byte[binary.remaining()];
                binary.get(got);
                assertThat(got).isEqualTo(Arrays.copyOfRange(body, 100, body.length));
                assertThat(budget.held()).as("both held in the budget").isEqualTo(compressed.length + body.length);
            }
            assertThat(budget.held()).isZero();
            // And a JSON body, all of it the JSON part.
            assertThat(inflate(coding, compress(coding, body), -1, 64 * MB)).isEqualTo(body);
        }
    }

    static byte[] concat(byte[] a, byte[] b) {
        return ByteBuffer.allocate(a.length + b.length).put(a).put(b).array();
    }

    @Test
    void gzipMembersOneAfterAnotherAreOneBodyAndATailThatBeginsNoneIsIgnored() throws Exception {
        // RFC 1952 §2.2, as gzip(1) and GZIPInputStream read it.
        byte[] a = gzip("{\"inputs\":".getBytes());
        byte[] b = gzip("[]}".getBytes());
        assertThat(inflate(ContentCoding.GZIP, concat(a, b), -1, MB)).isEqualTo("{\"inputs\":[]}".getBytes());
        assertThat(inflate(ContentCoding.GZIP, concat(a, "x".repeat(40).getBytes()), -1, MB))
                .isEqualTo("{\"inputs\":".getBytes());
        // A second member begun must be whole.
        assertThatThrownBy(() -> inflate(ContentCoding.GZIP, concat(a, Arrays.copyOf(b, b.length - 3)), -1, MB))
                .isInstanceOfSatisfying(ApiException.class,
                        e -> assertThat(e.status()).isEqualTo(HttpStatus.BAD_REQUEST));
    }

    @Test
    void bytesThatDoNotInflateAreRefused400SayingWhy() throws Exception {
        byte[] json = "{\"inputs\": []}".repeat(100).getBytes();
        for (ContentCoding coding : new ContentCoding[] {ContentCoding.GZIP, ContentCoding.DEFLATE}) {
            byte[] good = compress(coding, json);
            byte[] corrupt = good.clone();
            for (int i = 12; i < 20; i++) {
                corrupt[i] ^= (byte) 0x5a;
            }
            byte[] wrongFormat = compress(coding == ContentCoding.GZIP ? ContentCoding.DEFLATE : ContentCoding.GZIP, json);
            byte[][] bad = {corrupt, Arrays.copyOf(good, good.length / 2), Arrays.copyOf(good, good.length - 1),
                    wrongFormat, json, new byte[0]};
            for (byte[] body : bad) {
                assertThatThrownBy(() -> inflate(coding, body, -1, MB)).as(coding + " " + body.length + " bytes")
                        .isInstanceOfSatisfying(ApiException.class, e -> {
                            assertThat(e.status()).isEqualTo(HttpStatus.BAD_REQUEST);
                            assertThat(e.getMessage()).startsWith("the " + coding + " request body does not inflate: ");
                        });
            }
        }
        // zlib's stream has an end of its own: bytes after it belong to no request.
        byte[] trailing = Arrays.copyOf(deflate(json), deflate(json).length + 3);
        assertThatThrownBy(() -> inflate(ContentCoding.DEFLATE, trailing, -1, MB))
                .hasMessage("the deflate request body does not inflate: bytes follow the end of the compressed data");
    }

    @Test
    void aDecompressionBombStopsAtTheLimit413() throws Exception {
        byte[] zeros = new byte[(int) MB];
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        try (OutputStream z = new GZIPOutputStream(out)) {
            for (int i = 0; i < 256; i++) {
                z.write(zeros);  // 256 MiB in about 256 KB
            }
        }
        byte[] bomb = out.toByteArray();
        InflightBytes budget = new InflightBytes(64 * MB);
        for (long headerLength : new long[] {-1, 100}) {
            try (RequestBody sent = sent(budget, bomb, headerLength);
                    RequestBody into = new RequestBody(budget, POOL, 4 * MB, -1, headerLength)) {
                assertThatThrownBy(() -> ContentCoding.GZIP.inflate(sent, into))
                        .isInstanceOfSatisfying(ApiException.class, e -> {
                            assertThat(e.status()).isEqualTo(HttpStatus.CONTENT_TOO_LARGE);
                            assertThat(e.getMessage()).isEqualTo("the gzip request body inflated: request body"
                                    + " exceeds the limit of " + 4 * MB + " bytes");
                        });
                // It read the limit, then one byte to find the body longer: nothing more was held.
                assertThat(into.length()).isEqualTo(4 * MB);
                assertThat(into.allocated()).isLessThanOrEqualTo(4 * MB + MB);
            }
        }
        assertThat(budget.held()).isZero();
    }

    @Test
    void theInflatedBytesCountInTheInFlightBudget() throws Exception {
        byte[] body = new byte[2 * (int) MB];
        byte[] compressed = gzip(body);
        InflightBytes budget = new InflightBytes(MB + compressed.length);
        try (RequestBody sent = sent(budget, compressed, -1);
                RequestBody into = new RequestBody(budget, POOL, 64 * MB, -1, -1)) {
            assertThatThrownBy(() -> ContentCoding.GZIP.inflate(sent, into))
                    .isInstanceOfSatisfying(ApiException.class, e -> {
                        assertThat(e.status()).isEqualTo(HttpStatus.SERVICE_UNAVAILABLE);
                        assertThat(e.retryAfter()).isNotNull();
                    });
        }
        assertThat(budget.held()).isZero();
    }
}
