package io.etserve.grpc;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.rpc.RetryInfo;
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
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.protobuf.ProtoUtils;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** gRPC's one switch: every kind of failure to its status, with RetryInfo where REST sends Retry-After. */
class GrpcStatusesTest {

    private static final Metadata.Key<RetryInfo> RETRY_INFO = ProtoUtils.keyForProto(RetryInfo.getDefaultInstance());

    private final GrpcStatuses statuses = new GrpcStatuses(new PublicMessages(Path.of("/srv/models")));

    @Test
    void eachKindHasItsStatus() {
        Map<InferenceException.Kind, Status.Code> want = Map.of(
                InferenceException.Kind.INVALID_INPUT, Status.Code.INVALID_ARGUMENT,
                InferenceException.Kind.NOT_FOUND, Status.Code.NOT_FOUND,
                InferenceException.Kind.UNAVAILABLE, Status.Code.UNAVAILABLE,
                InferenceException.Kind.OVERLOADED, Status.Code.RESOURCE_EXHAUSTED,
                // Triton: a timeout that expired in the queue is UNAVAILABLE "Request timeout expired".
                InferenceException.Kind.TIMED_OUT, Status.Code.UNAVAILABLE,
                InferenceException.Kind.DEADLINE_EXCEEDED, Status.Code.DEADLINE_EXCEEDED,
                InferenceException.Kind.CLIENT_GONE, Status.Code.CANCELLED,
                InferenceException.Kind.FAILED, Status.Code.INTERNAL);
        assertThat(want).as("every kind").containsOnlyKeys(InferenceException.Kind.values());
        want.forEach((kind, code) -> assertThat(GrpcStatuses.code(kind).getCode()).as("%s", kind).isEqualTo(code));
    }

    @Test
    void everyExceptionAnswersByItsKind() {
        Map<Throwable, Status.Code> want = Map.of(
                new InvalidInputException("x"), Status.Code.INVALID_ARGUMENT,
                new InvalidRequestException("x"), Status.Code.INVALID_ARGUMENT,
                new RepositoryControl.RefusedException("x"), Status.Code.INVALID_ARGUMENT,
                new ModelNotFoundException("x"), Status.Code.NOT_FOUND,
                new ModelUnavailableException("x"), Status.Code.UNAVAILABLE,
                new OverloadedException("x", Duration.ofSeconds(1)), Status.Code.RESOURCE_EXHAUSTED,
                new RequestCancelledException(RequestCancelledException.Reason.DEADLINE,
                        RequestCancelledException.Stage.BATCH, "x"), Status.Code.DEADLINE_EXCEEDED,
                new ExecuTorchException("MemoryAllocationFailed", 0x21, "x", ""), Status.Code.INTERNAL,
                new IllegalStateException("x"), Status.Code.INTERNAL);
        want.forEach((e, code) -> assertThat(statuses.of(e).getStatus().getCode())
                .as("%s", e.getClass().getSimpleName()).isEqualTo(code));
    }

    @Test
    void aStatusAlreadyChosenStays() {
        StatusRuntimeException chosen = Status.FAILED_PRECONDITION.asRuntimeException();
        assertThat(statuses.of(chosen)).isSameAs(chosen);
    }

    @Test
    void theUnavailableAndTheOverloadedCarryRetryInfo() {
        StatusRuntimeException open = statuses.of(new ModelUnavailableException("breaker open", Duration.ofMillis(1500)));
        RetryInfo retry = open.getTrailers().get(RETRY_INFO);
        assertThat(retry.getRetryDelay().getSeconds()).isEqualTo(1);
        assertThat(retry.getRetryDelay().getNanos()).isEqualTo(500_000_000);
        assertThat(statuses.of(new OverloadedException("full", Duration.ofSeconds(2))).getTrailers().get(RETRY_INFO)
                .getRetryDelay().getSeconds()).isEqualTo(2);
        assertThat(statuses.of(new ModelUnavailableException("failed to load")).getTrailers().get(RETRY_INFO))
                .isNull();
        assertThat(statuses.of(new RequestCancelledException(RequestCancelledException.Reason.TIMEOUT,
                RequestCancelledException.Stage.QUEUE, "expired")).getTrailers().get(RETRY_INFO)).isNull();
    }

    @Test
    void theDescriptionIsThePublicMessage() {
        assertThat(statuses.of(new ModelUnavailableException("cannot read /srv/models/m/1/model.pte")).getStatus()
                .getDescription()).isEqualTo("cannot read m/1/model.pte");
        assertThat(statuses.of(new ExecuTorchException("OperatorMissing", 0x14, "no kernel", "")).getStatus()
                .getDescription()).isEqualTo("inference failed: no kernel (OperatorMissing)");
        assertThat(statuses.of(new IllegalStateException("at /srv/models/secret")).getStatus().getDescription())
                .isEqualTo("internal error: IllegalStateException");
    }
}
