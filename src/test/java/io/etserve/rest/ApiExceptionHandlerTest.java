package io.etserve.rest;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.inference.InferenceException;
import io.etserve.inference.InvalidInputException;
import io.etserve.inference.ModelNotFoundException;
import io.etserve.inference.ModelUnavailableException;
import io.etserve.inference.OverloadedException;
import io.etserve.inference.RequestCancelledException;
import io.etserve.protocol.InvalidRequestException;
import io.etserve.protocol.PublicMessages;
import io.etserve.repository.RepositoryControl;
import io.etserve.runtime.ExecuTorchException;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import org.springframework.mock.web.MockHttpServletResponse;
import tools.jackson.databind.ObjectMapper;

/** REST's one switch: every kind of failure to its status, with Retry-After and a redacted body. */
class ApiExceptionHandlerTest {

    private final ApiExceptionHandler handler = new ApiExceptionHandler(new PublicMessages(Path.of("/srv/models")));

    @Test
    void eachKindAnswersItsStatus() {
        Map<InferenceException.Kind, Integer> want = Map.of(
                InferenceException.Kind.INVALID_INPUT, 400,
                InferenceException.Kind.NOT_FOUND, 404,
                InferenceException.Kind.UNAVAILABLE, 503,
                InferenceException.Kind.OVERLOADED, 503,
                InferenceException.Kind.TIMED_OUT, 503,
                InferenceException.Kind.DEADLINE_EXCEEDED, 504,
                InferenceException.Kind.CLIENT_GONE, 499,
                InferenceException.Kind.FAILED, 500);
        assertThat(want).as("every kind").containsOnlyKeys(InferenceException.Kind.values());
        want.forEach((kind, status) -> assertThat(ApiExceptionHandler.status(kind)).as("%s", kind).isEqualTo(status));
    }

    @Test
    void everyExceptionAnswersByItsKind() {
        Map<Exception, Integer> want = Map.of(
                new InvalidInputException("x"), 400,
                new InvalidRequestException("x"), 400,
                new RepositoryControl.RefusedException("x"), 400,
                new ModelNotFoundException("x"), 404,
                new ModelUnavailableException("x"), 503,
                new OverloadedException("x", Duration.ofSeconds(1)), 503,
                new RequestCancelledException(RequestCancelledException.Reason.CLIENT,
                        RequestCancelledException.Stage.QUEUE, "x"), 499,
                new ExecuTorchException("MemoryAllocationFailed", 0x21, "x", ""), 500,
                new IllegalStateException("x"), 500);
        want.forEach((e, status) -> {
            ResponseEntity<ProtocolDtos.ErrorBody> answer = handler.answer(e);
            assertThat(answer.getStatusCode().value()).as("%s", e.getClass().getSimpleName()).isEqualTo(status);
            assertThat(answer.getHeaders().getContentType()).isEqualTo(MediaType.APPLICATION_JSON);
        });
    }

    @Test
    void theUnavailableAndTheOverloadedSayWhenToRetryInWholeSeconds() {
        ResponseEntity<ProtocolDtos.ErrorBody> open = handler.answer(
                new ModelUnavailableException("breaker open", Duration.ofMillis(1500)));
        assertThat(open.getHeaders().getFirst(HttpHeaders.RETRY_AFTER)).isEqualTo("2");
        ResponseEntity<ProtocolDtos.ErrorBody> full = handler.answer(new OverloadedException("full", Duration.ZERO));
        assertThat(full.getHeaders().getFirst(HttpHeaders.RETRY_AFTER)).as("never 0").isEqualTo("1");
        ResponseEntity<ProtocolDtos.ErrorBody> timedOut = handler.answer(new RequestCancelledException(
                RequestCancelledException.Reason.TIMEOUT, RequestCancelledException.Stage.QUEUE, "expired"));
        assertThat(timedOut.getStatusCode().value()).isEqualTo(503);
        assertThat(timedOut.getHeaders().containsHeader(HttpHeaders.RETRY_AFTER)).as("the client set the limit")
                .isFalse();
        assertThat(handler.answer(new ModelUnavailableException("failed to load")).getHeaders()
                .containsHeader(HttpHeaders.RETRY_AFTER)).isFalse();
    }

    @Test
    void theBodyCarriesThePublicMessage() {
        assertThat(handler.answer(new ModelUnavailableException("cannot read /srv/models/m/1/model.pte")).getBody())
                .isEqualTo(new ProtocolDtos.ErrorBody("cannot read m/1/model.pte"));
        assertThat(handler.answer(new ExecuTorchException("OperatorMissing", 0x14, "no kernel", "")).getBody())
                .isEqualTo(new ProtocolDtos.ErrorBody("inference failed: no kernel (OperatorMissing)"));
        assertThat(handler.answer(new IllegalStateException("at /srv/models/secret")).getBody())
                .isEqualTo(new ProtocolDtos.ErrorBody("internal error: IllegalStateException"));
        assertThat(handler.answer(new ModelNotFoundException(null)).getBody())
                .isEqualTo(new ProtocolDtos.ErrorBody("Not Found"));
    }

    @Test
    void theRestLayersOwnRefusalsAndUnreadableBodiesKeepTheirStatus() {
        ResponseEntity<ProtocolDtos.ErrorBody> budget = handler.answer(new ApiException(
                HttpStatus.SERVICE_UNAVAILABLE, "in-flight budget spent", Duration.ofSeconds(1)));
        assertThat(budget.getStatusCode().value()).isEqualTo(503);
        assertThat(budget.getHeaders().getFirst(HttpHeaders.RETRY_AFTER)).isEqualTo("1");
        assertThat(handler.answer(new IOException("reset")).getStatusCode().value()).isEqualTo(400);
    }

    /** The direct inference path writes what MVC would: same status, body and Retry-After. */
    @Test
    void theDirectPathWritesTheAnswerMvcWouldGive() throws Exception {
        for (Exception e : List.of(new OverloadedException("full", Duration.ofMillis(1500)),
                new ModelNotFoundException("unknown model 'x'"), new IOException("reset"),
                new ApiException(HttpStatus.PAYLOAD_TOO_LARGE, "too big"),
                new IllegalStateException("at /srv/models/secret"))) {
            ResponseEntity<ProtocolDtos.ErrorBody> viaMvc = handler.answer(e);
            MockHttpServletResponse direct = new MockHttpServletResponse();
            handler.write(direct, e);
            assertThat(direct.getStatus()).as(e.toString()).isEqualTo(viaMvc.getStatusCode().value());
            assertThat(direct.getHeader(HttpHeaders.RETRY_AFTER)).as(e.toString())
                    .isEqualTo(viaMvc.getHeaders().getFirst(HttpHeaders.RETRY_AFTER));
            assertThat(direct.getContentType()).startsWith("application/json");
            assertThat(direct.getContentAsString()).as(e.toString())
                    .isEqualTo(new ObjectMapper().writeValueAsString(viaMvc.getBody()));
        }
    }
}
