package io.etserve.rest;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.etserve.inference.InflightBytes;
import io.etserve.runtime.DirectBufferPool;
import java.io.ByteArrayInputStream;
import java.io.FilterInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.springframework.http.HttpStatus;

class RequestBodyTest {

    static final long MB = 1024 * 1024;
    static final DirectBufferPool POOL = new DirectBufferPool(64 * MB);

    static ByteArrayInputStream bytes(int n) {
        return new ByteArrayInputStream(new byte[n]);
    }

    /** {@code n} bytes that arrive 16 KiB at a time, as a network delivers a large body. */
    static InputStream trickle(long n) {
        return new InputStream() {
            long left = n;

            @Override
            public int read() {
                return left-- > 0 ? 0 : -1;
            }

            @Override
            public int read(byte[] b, int off, int len) {
                if (left <= 0) {
                    return -1;
                }
                int k = (int) Math.min(Math.min(len, 16 * 1024), left);
                left -= k;
                return k;
            }

            @Override
            public int available() {
                return (int) Math.min(left, 16 * 1024);
            }
        };
    }

    @Test
    void eightUploadsStalledPastHalfTheirLengthLeaveTheBudgetForOthers() throws Exception {
        // The case scaled by 1/32: a 512 MiB budget, 64 MiB uploads that stall at 33 MiB.
        // Charged what arrived, eight of them hold 264/512; charged their buffers (each doubled
        // past the half), they held it all and refused everyone.
        InflightBytes budget = new InflightBytes(16 * MB);
        long declared = 2 * MB;
        long arrived = 33 * MB / 32;
        List<RequestBody> stalled = new ArrayList<>();
        try {
            for (int i = 0; i < 8; i++) {
                // JSON bodies and binary ones (a 100-byte JSON header, then binary sections).
                RequestBody body = new RequestBody(budget, POOL, 64 * MB, declared, i % 2 == 0 ? -1 : 100);
                stalled.add(body);
                body.readAll(trickle(arrived));
                assertThat(body.length()).isEqualTo(arrived);
                // What a stalled body holds is what arrived and at most one more chunk.
                assertThat(body.allocated()).isBetween(arrived, arrived + MB);
            }
            assertThat(budget.held()).isEqualTo(8 * arrived);
            // A good request of 4 MiB (128 MiB unscaled) still fits beside them.
            try (RequestBody good = new RequestBody(budget, POOL, 64 * MB, 4 * MB, -1)) {
                good.readAll(trickle(4 * MB));
                assertThat(good.length()).isEqualTo(4 * MB);
            }
        } finally {
            stalled.forEach(RequestBody::close);
        }
        assertThat(budget.held()).isZero();
    }

    @Test
    void aBodyThatArrivedInPiecesIsOneArrayAndOneBufferOnceComplete() throws Exception {
        InflightBytes budget = new InflightBytes(64 * MB);
        DirectBufferPool pool = new DirectBufferPool(64 * MB);
        byte[] sent = new byte[100 + 3 * (int) MB];
        new Random(7).nextBytes(sent);
        try (RequestBody body = new RequestBody(budget, pool, 64 * MB, sent.length, 100)) {
            InputStream in = new FilterInputStream(new ByteArrayInputStream(sent)) {
                @Override
                public int read(byte[] b, int off, int len) throws IOException {
                    return super.read(b, off, Math.min(len, 1000));
                }

                @Override
                public int available() throws IOException {
                    return Math.min(super.available(), 1000);
                }
            };
            body.readAll(in);
            assertThat(budget.held()).isEqualTo(sent.length);
            assertThat(Arrays.copyOf(body.json(), body.jsonLength()))
                    .isEqualTo(Arrays.copyOf(sent, 100));
            ByteBuffer binary = body.binary();
            assertThat(binary.isDirect()).isTrue();
            byte[] got = new byte[binary.remaining()];
            binary.get(got);
            assertThat(got).isEqualTo(Arrays.copyOfRange(sent, 100, sent.length));
        }
        assertThat(budget.held()).isZero();
    }

    @Test
    void aBinaryPartOfADeclaredLengthArrivingInPiecesLandsInOneBufferWithoutAJoin() throws Exception {
        InflightBytes budget = new InflightBytes(64 * MB);
        DirectBufferPool pool = new DirectBufferPool(64 * MB);
        byte[] sent = new byte[100 + 3 * (int) MB];
        new Random(11).nextBytes(sent);
        try (RequestBody body = new RequestBody(budget, pool, 64 * MB, sent.length, 100)) {
            ByteArrayInputStream first = new ByteArrayInputStream(sent, 0, 100 + 1000);
            body.readFrom(first);  // the JSON part
            body.readFrom(first);  // the first piece of the binary part
            // Its first byte took one buffer for the whole part, lent by the budget's room; what
            // arrived is held, the rest is lent until it comes.
            assertThat(body.allocated()).isEqualTo(100 + 4 * MB);
            assertThat(budget.held()).isEqualTo(100 + 1000);
            assertThat(budget.lent()).isEqualTo(3 * MB - 1000);
            body.readAll(new ByteArrayInputStream(sent, 100 + 1000, sent.length - 1100) {
                @Override
                public synchronized int read(byte[] b, int off, int len) {
                    return super.read(b, off, Math.min(len, 1000));
                }
            });
            assertThat(budget.held()).isEqualTo(sent.length);
            assertThat(budget.lent()).isZero();
            ByteBuffer binary = body.binary();
            assertThat(body.allocated()).as("no second buffer to join pieces into").isEqualTo(100 + 4 * MB);
            byte[] got = new byte[binary.remaining()];
            binary.get(got);
            assertThat(got).isEqualTo(Arrays.copyOfRange(sent, 100, sent.length));
        }
        assertThat(budget.held()).isZero();
        assertThat(budget.lent()).isZero();
    }

    @Test
    void aStalledUploadLentItsLengthKeepsOthersOutOfTheRoomNotOutOfTheBudget() throws Exception {
        InflightBytes budget = new InflightBytes(8 * MB);
        try (RequestBody stalled = new RequestBody(budget, POOL, 64 * MB, 6 * MB, 100)) {
            stalled.readAll(trickle(MB));
            assertThat(budget.held()).isEqualTo(MB);
            assertThat(budget.lent()).isEqualTo(5 * MB);
            // 4 MiB more would not fit beside what is held and lent: this body grows in chunks,
            // and is served, since only arrived bytes can make a 503.
            byte[] sent = new byte[100 + 4 * (int) MB];
            new Random(3).nextBytes(sent);
            try (RequestBody next = new RequestBody(budget, POOL, 64 * MB, sent.length, 100)) {
                next.readAll(new ByteArrayInputStream(sent) {
                    @Override
                    public synchronized int read(byte[] b, int off, int len) {
                        return super.read(b, off, Math.min(len, 16 * 1024));
                    }

                    @Override
                    public synchronized int available() {
                        return Math.min(super.available(), 16 * 1024);
                    }
                });
                assertThat(budget.held()).isEqualTo(MB + sent.length);
                assertThat(budget.lent()).isEqualTo(5 * MB);
                ByteBuffer binary = next.binary();
                byte[] got = new byte[binary.remaining()];
                binary.get(got);
                assertThat(got).isEqualTo(Arrays.copyOfRange(sent, 100, sent.length));
            }
        }
        assertThat(budget.held()).isZero();
        assertThat(budget.lent()).isZero();
    }

    @Test
    void aLargeDeclaredBodyReservesOnlyWhatArrived() throws Exception {
        InflightBytes budget = new InflightBytes(4 * MB);
        try (RequestBody body = new RequestBody(budget, POOL, 64 * MB, 64 * MB, -1)) {
            body.readAll(bytes(10));
            assertThat(budget.held()).isEqualTo(10);
            // Its chunk was sized to what was waiting, not to the declared 64 MB.
            assertThat(body.allocated()).isEqualTo(64 * 1024);
        }
        assertThat(budget.held()).isZero();
    }

    @Test
    void inputsReadFromSharedMemoryHoldTheBudgetAsABodysBytesDoUntilTheBodyCloses() throws Exception {
        InflightBytes budget = new InflightBytes(4 * MB);
        try (RequestBody body = new RequestBody(budget, POOL, 64 * MB, 10, -1)) {
            body.readAll(bytes(10));
            assertThat(body.sharedMemoryBuffer((int) (3 * MB)).remaining()).isEqualTo((int) (3 * MB));
            assertThat(budget.held()).isEqualTo(3 * MB + 10);
            assertThatThrownBy(() -> body.sharedMemoryBuffer((int) MB))
                    .isInstanceOf(io.etserve.inference.OverloadedException.class)
                    .hasMessageContaining("too many request bytes in flight");
            assertThat(budget.held()).isEqualTo(3 * MB + 10);
        }
        assertThat(budget.held()).isZero();
    }

    @Test
    void growsToExactlyTheDeclaredLengthSoTheArrayIsNotCopiedAgain() throws Exception {
        InflightBytes budget = new InflightBytes(4 * MB);
        int declared = 300_000;
        try (RequestBody body = new RequestBody(budget, POOL, 64 * MB, declared, -1)) {
            byte[] sent = new byte[declared];
            for (int i = 0; i < declared / 1000; i++) {
                sent[i * 1000] = (byte) i;
            }
            body.readAll(new ByteArrayInputStream(sent));
            byte[] bytes = Arrays.copyOf(body.json(), body.jsonLength());
            assertThat(body.json()).hasSize(declared);
            assertThat(bytes[299_000]).isEqualTo((byte) 299);
            assertThat(budget.held()).isEqualTo(declared);
        }
    }

    @Test
    void refusesMoreThanDeclaredOrAllowed() throws Exception {
        InflightBytes budget = new InflightBytes(4 * MB);
        assertThatThrownBy(() -> new RequestBody(budget, POOL, 1000, 1001, -1))
                .isInstanceOfSatisfying(ApiException.class, e -> assertThat(e.status()).isEqualTo(HttpStatus.CONTENT_TOO_LARGE));
        try (RequestBody declared = new RequestBody(budget, POOL, 1000, 10, -1)) {
            assertThatThrownBy(() -> declared.readAll(bytes(11))).hasMessageContaining("Content-Length of 10");
        }
        try (RequestBody chunked = new RequestBody(budget, POOL, 1000, -1, -1)) {
            chunked.readAll(bytes(1000));
            assertThatThrownBy(() -> chunked.readAll(bytes(1)))
                    .isInstanceOfSatisfying(ApiException.class, e -> assertThat(e.status()).isEqualTo(HttpStatus.CONTENT_TOO_LARGE));
        }
        assertThat(budget.held()).isZero();
    }

    @Test
    void aSpentBudgetAnswers503WithRetryAfterAndLeavesNothingHeld() throws Exception {
        InflightBytes budget = new InflightBytes(100 * 1024);
        try (RequestBody first = new RequestBody(budget, POOL, 64 * MB, -1, -1)) {
            first.readAll(bytes(60_000));
            try (RequestBody second = new RequestBody(budget, POOL, 64 * MB, -1, -1)) {
                second.readAll(bytes(40_000));
                assertThat(budget.held()).isEqualTo(100_000);
            }
            try (RequestBody third = new RequestBody(budget, POOL, 64 * MB, -1, -1)) {
                assertThatThrownBy(() -> third.readAll(bytes(50_000)))
                        .isInstanceOfSatisfying(ApiException.class, e -> {
                            assertThat(e.status()).isEqualTo(HttpStatus.SERVICE_UNAVAILABLE);
                            assertThat(e.retryAfter()).isNotNull();
                        });
            }
            assertThat(budget.held()).isEqualTo(60_000);
        }
        assertThat(budget.held()).isZero();
    }

    @Test
    void binarySectionsLandInOneDirectBufferThatGoesBackToThePool() throws Exception {
        InflightBytes budget = new InflightBytes(4 * MB);
        DirectBufferPool pool = new DirectBufferPool(64 * MB);
        byte[] sent = new byte[10 + 300_000];
        sent[0] = '{';
        sent[10] = 7;
        sent[10 + 299_999] = 9;
        ByteBuffer binary;
        try (RequestBody body = new RequestBody(budget, pool, 64 * MB, sent.length, 10)) {
            body.readAll(new ByteArrayInputStream(sent));
            assertThat(body.jsonLength()).isEqualTo(10);
            binary = body.binary();
            assertThat(binary.isDirect()).isTrue();
            assertThat(binary.remaining()).isEqualTo(300_000);
            assertThat(binary.get(0)).isEqualTo((byte) 7);
            assertThat(binary.get(299_999)).isEqualTo((byte) 9);
            // Everything that arrived was available at once: one buffer of its size, no copies.
            assertThat(budget.held()).isEqualTo(sent.length);
            assertThat(body.allocated()).isEqualTo(10 + 512 * 1024);
            assertThat(pool.retainedBytes()).isZero();
        }
        assertThat(budget.held()).isZero();
        assertThat(pool.retainedBytes()).isEqualTo(512 * 1024);
        // The next request of that size reuses the same memory.
        try (RequestBody again = new RequestBody(budget, pool, 64 * MB, sent.length, 10)) {
            again.readAll(new ByteArrayInputStream(sent));
            assertThat(pool.retainedBytes()).isZero();
        }
    }

    @Test
    void outputAndTensorBuffersAreGivenBackWithTheBody() {
        InflightBytes budget = new InflightBytes(4 * MB);
        DirectBufferPool pool = new DirectBufferPool(64 * MB);
        RequestBody body = new RequestBody(budget, pool, 64 * MB, 0, -1);
        ByteBuffer out = body.allocate(0, 4 * MB);
        ByteBuffer in = body.tensorBuffer(100);
        assertThat(out.isDirect() && in.isDirect()).isTrue();
        assertThat(out.remaining()).isEqualTo(4 * MB);
        assertThat(in.remaining()).isEqualTo(100);
        body.close();
        body.close();  // idempotent: the filter and the controller may both close it
        assertThat(pool.retainedBytes()).isEqualTo(4 * MB + 4096);
        assertThatThrownBy(() -> body.allocate(0, 1)).isInstanceOf(IllegalStateException.class);
    }
}
