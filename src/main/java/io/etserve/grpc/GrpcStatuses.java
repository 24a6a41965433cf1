package io.etserve.grpc;

import com.google.rpc.RetryInfo;
import io.etserve.inference.InferenceException;
import io.etserve.inference.InferenceFailedException;
import io.etserve.protocol.PublicMessages;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.protobuf.ProtoUtils;
import java.time.Duration;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Failures as gRPC statuses, with the messages REST gives in its {@code {"error": ...}} body and
 * {@code google.rpc.RetryInfo} where REST sends Retry-After. One switch over the failure's
 * {@link InferenceException.Kind}; rest/ApiExceptionHandler holds REST's.
 */
final class GrpcStatuses {

    private static final Logger log = LoggerFactory.getLogger(GrpcStatuses.class);
    private static final Metadata.Key<RetryInfo> RETRY_INFO = ProtoUtils.keyForProto(RetryInfo.getDefaultInstance());

    private final PublicMessages messages;

    GrpcStatuses(PublicMessages messages) {
        this.messages = messages;
    }

    /** A status this service already chose stays; any other failure is classified first. */
    StatusRuntimeException of(Throwable e) {
        if (e instanceof StatusRuntimeException s) {
            return s;
        }
        InferenceException failure = InferenceException.of(e);
        if (failure instanceof InferenceFailedException f) {
            f.log(log);
        }
        return status(code(failure.kind()), failure.getMessage(), failure.retryAfter());
    }

    /**
     * The status of each kind, as REST's statuses map to gRPC (400, 404, 503, 500), except
     * overload, which gRPC can say precisely; a {@code timeout} parameter that expired is
     * UNAVAILABLE, as Triton answers "Request timeout expired".
     */
    static Status code(InferenceException.Kind kind) {
        return switch (kind) {
            case INVALID_INPUT -> Status.INVALID_ARGUMENT;
            case NOT_FOUND -> Status.NOT_FOUND;
            case UNAVAILABLE, TIMED_OUT -> Status.UNAVAILABLE;
            case OVERLOADED -> Status.RESOURCE_EXHAUSTED;
            case DEADLINE_EXCEEDED -> Status.DEADLINE_EXCEEDED;
            case CLIENT_GONE -> Status.CANCELLED;
            case FAILED -> Status.INTERNAL;
        };
    }

    StatusRuntimeException status(Status status, String message, Duration retryAfter) {
        Metadata trailers = new Metadata();
        if (retryAfter != null) {
            RetryInfo.Builder retry = RetryInfo.newBuilder();
            retry.getRetryDelayBuilder().setSeconds(retryAfter.getSeconds()).setNanos(retryAfter.getNano());
            trailers.put(RETRY_INFO, retry.build());
        }
        return status.withDescription(messages.redact(message)).asRuntimeException(trailers);
    }
}
