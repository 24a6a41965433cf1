package io.etserve.api;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.ByteArrayInputStream;
import org.junit.jupiter.api.Test;
import org.springframework.http.HttpStatus;

class RequestBodyTest {

    static final long MB = 1024 * 1024;
    static final io.etserve.runtime.DirectBufferPool POOL = new io.etserve.runtime.DirectBufferPool(64 * MB);

    static ByteArrayInputStream bytes(int n) {
        return new ByteArrayInputStream(new byte[n]);
    }

    @Test
    void aLargeDeclaredBodyReservesOnlyWhatArrived() throws Exception {
        InflightBytes budget = new InflightBytes(4 * MB);
        try (RequestBody body = new RequestBody(budget, POOL, 64 * MB, 64 * MB, -1)) {
            body.readAll(bytes(10));
            assertThat(budget.held()).isEqualTo(64 * 1024);
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
            byte[] bytes = java.util.Arrays.copyOf(body.json(), body.jsonLength());
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
                assertThatThrownBy(() -> second.readAll(bytes(1)))
                        .isInstanceOfSatisfying(ApiException.class, e -> {
                            assertThat(e.status()).isEqualTo(HttpStatus.SERVICE_UNAVAILABLE);
                            assertThat(e.retryAfter()).isNotNull();
                        });
            }
            assertThat(budget.held()).isEqualTo(64 * 1024);
        }
        assertThat(budget.held()).isZero();
    }

    @Test
    void binarySectionsLandInOneDirectBufferThatGoesBackToThePool() throws Exception {
        InflightBytes budget = new InflightBytes(4 * MB);
        io.etserve.runtime.DirectBufferPool pool = new io.etserve.runtime.DirectBufferPool(64 * MB);
        byte[] sent = new byte[10 + 300_000];
        sent[0] = '{';
        sent[10] = 7;
        sent[10 + 299_999] = 9;
        java.nio.ByteBuffer binary;
        try (RequestBody body = new RequestBody(budget, pool, 64 * MB, sent.length, 10)) {
            body.readAll(new ByteArrayInputStream(sent));
            assertThat(body.jsonLength()).isEqualTo(10);
            binary = body.binary();
            assertThat(binary.isDirect()).isTrue();
            assertThat(binary.remaining()).isEqualTo(300_000);
            assertThat(binary.get(0)).isEqualTo((byte) 7);
            assertThat(binary.get(299_999)).isEqualTo((byte) 9);
            // Everything that arrived was available at once: one buffer, no growth copies.
            assertThat(budget.held()).isEqualTo(10 + 512 * 1024);
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
        io.etserve.runtime.DirectBufferPool pool = new io.etserve.runtime.DirectBufferPool(64 * MB);
        RequestBody body = new RequestBody(budget, pool, 64 * MB, 0, -1);
        java.nio.ByteBuffer out = body.allocate(0, 4 * MB);
        java.nio.ByteBuffer in = body.tensorBuffer(100);
        assertThat(out.isDirect() && in.isDirect()).isTrue();
        assertThat(out.remaining()).isEqualTo(4 * MB);
        assertThat(in.remaining()).isEqualTo(100);
        body.close();
        body.close();  // idempotent: the filter and the controller may both close it
        assertThat(pool.retainedBytes()).isEqualTo(4 * MB + 4096);
        assertThatThrownBy(() -> body.allocate(0, 1)).isInstanceOf(IllegalStateException.class);
    }
}
