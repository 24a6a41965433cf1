package io.etserve.api;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;
import org.springframework.http.HttpStatus;

class RequestBodyTest {

    static final long MB = 1024 * 1024;

    @Test
    void aLargeDeclaredBodyReservesOnlyWhatArrived() {
        InflightBytes budget = new InflightBytes(4 * MB);
        try (RequestBody body = new RequestBody(budget, 64 * MB, 64 * MB)) {
            body.append(new byte[10], 0, 10);
            assertThat(budget.held()).isEqualTo(64 * 1024);
        }
        assertThat(budget.held()).isZero();
    }

    @Test
    void growsToExactlyTheDeclaredLengthSoTheArrayIsNotCopiedAgain() {
        InflightBytes budget = new InflightBytes(4 * MB);
        int declared = 300_000;
        try (RequestBody body = new RequestBody(budget, 64 * MB, declared)) {
            byte[] chunk = new byte[1000];
            for (int i = 0; i < declared / chunk.length; i++) {
                chunk[0] = (byte) i;
                body.append(chunk, 0, chunk.length);
            }
            byte[] bytes = body.bytes();
            assertThat(bytes).hasSize(declared);
            assertThat(bytes[299_000]).isEqualTo((byte) 299);
            assertThat(budget.held()).isEqualTo(declared);
        }
    }

    @Test
    void refusesMoreThanDeclaredOrAllowed() {
        InflightBytes budget = new InflightBytes(4 * MB);
        assertThatThrownBy(() -> new RequestBody(budget, 1000, 1001))
                .isInstanceOfSatisfying(ApiException.class, e -> assertThat(e.status()).isEqualTo(HttpStatus.CONTENT_TOO_LARGE));
        try (RequestBody declared = new RequestBody(budget, 1000, 10)) {
            assertThatThrownBy(() -> declared.append(new byte[11], 0, 11)).hasMessageContaining("Content-Length of 10");
        }
        try (RequestBody chunked = new RequestBody(budget, 1000, -1)) {
            chunked.append(new byte[1000], 0, 1000);
            assertThatThrownBy(() -> chunked.append(new byte[1], 0, 1))
                    .isInstanceOfSatisfying(ApiException.class, e -> assertThat(e.status()).isEqualTo(HttpStatus.CONTENT_TOO_LARGE));
        }
        assertThat(budget.held()).isZero();
    }

    @Test
    void aSpentBudgetAnswers503WithRetryAfterAndLeavesNothingHeld() {
        InflightBytes budget = new InflightBytes(100 * 1024);
        try (RequestBody first = new RequestBody(budget, 64 * MB, -1)) {
            first.append(new byte[60_000], 0, 60_000);
            try (RequestBody second = new RequestBody(budget, 64 * MB, -1)) {
                assertThatThrownBy(() -> second.append(new byte[1], 0, 1))
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
