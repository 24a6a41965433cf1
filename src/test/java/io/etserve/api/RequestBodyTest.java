package io.etserve.api;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.ByteArrayInputStream;
import org.junit.jupiter.api.Test;
import org.springframework.http.HttpStatus;

class RequestBodyTest {

    static final long MB = 1024 * 1024;

    static ByteArrayInputStream bytes(int n) {
        return new ByteArrayInputStream(new byte[n]);
    }

    @Test
    void aLargeDeclaredBodyReservesOnlyWhatArrived() throws Exception {
        InflightBytes budget = new InflightBytes(4 * MB);
        try (RequestBody body = new RequestBody(budget, 64 * MB, 64 * MB)) {
            body.readAll(bytes(10));
            assertThat(budget.held()).isEqualTo(64 * 1024);
        }
        assertThat(budget.held()).isZero();
    }

    @Test
    void growsToExactlyTheDeclaredLengthSoTheArrayIsNotCopiedAgain() throws Exception {
        InflightBytes budget = new InflightBytes(4 * MB);
        int declared = 300_000;
        try (RequestBody body = new RequestBody(budget, 64 * MB, declared)) {
            byte[] sent = new byte[declared];
            for (int i = 0; i < declared / 1000; i++) {
                sent[i * 1000] = (byte) i;
            }
            body.readAll(new ByteArrayInputStream(sent));
            byte[] bytes = body.bytes();
            assertThat(bytes).hasSize(declared);
            assertThat(bytes[299_000]).isEqualTo((byte) 299);
            assertThat(budget.held()).isEqualTo(declared);
        }
    }

    @Test
    void refusesMoreThanDeclaredOrAllowed() throws Exception {
        InflightBytes budget = new InflightBytes(4 * MB);
        assertThatThrownBy(() -> new RequestBody(budget, 1000, 1001))
                .isInstanceOfSatisfying(ApiException.class, e -> assertThat(e.status()).isEqualTo(HttpStatus.CONTENT_TOO_LARGE));
        try (RequestBody declared = new RequestBody(budget, 1000, 10)) {
            assertThatThrownBy(() -> declared.readAll(bytes(11))).hasMessageContaining("Content-Length of 10");
        }
        try (RequestBody chunked = new RequestBody(budget, 1000, -1)) {
            chunked.readAll(bytes(1000));
            assertThatThrownBy(() -> chunked.readAll(bytes(1)))
                    .isInstanceOfSatisfying(ApiException.class, e -> assertThat(e.status()).isEqualTo(HttpStatus.CONTENT_TOO_LARGE));
        }
        assertThat(budget.held()).isZero();
    }

    @Test
    void aSpentBudgetAnswers503WithRetryAfterAndLeavesNothingHeld() throws Exception {
        InflightBytes budget = new InflightBytes(100 * 1024);
        try (RequestBody first = new RequestBody(budget, 64 * MB, -1)) {
            first.readAll(bytes(60_000));
            try (RequestBody second = new RequestBody(budget, 64 * MB, -1)) {
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
}
