package io.etserve.grpc;

import com.google.protobuf.Duration;
import com.google.rpc.RetryInfo;
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
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The inference layer's exceptions as gRPC statuses, with the messages REST gives in its
 * {@code {"error": ...}} body: bad input INVALID_ARGUMENT (REST 400), unknown model NOT_FOUND
 * (404), not serving UNAVAILABLE and overload RESOURCE_EXHAUSTED (503; both with
 * {@code google.rpc.RetryInfo} when a retry time is known, as REST's Retry-After), a runtime
 * failure INTERNAL (500); a request dropped before it ran UNAVAILABLE when its {@code timeout}
 * parameter expired (Triton's "Request timeout expired", REST 503), CANCELLED or
 * DEADLINE_EXCEEDED when the call itself ended.
 */
final class GrpcStatuses {

    private static final Logger log = LoggerFactory.getLogger(GrpcStatuses.class);
    private static final Metadata.Key<RetryInfo> RETRY_INFO = ProtoUtils.keyForProto(RetryInfo.getDefaultInstance());

    private final PublicMessages messages;

    GrpcStatuses(PublicMessages messages) {
        this.messages = messages;
    }

    StatusRuntimeException of(Throwable e) {
        if (e instanceof StatusRuntimeException s) {
            return s;
        }
        if (e instanceof InvalidRequestException || e instanceof InvalidInputException
                || e instanceof RepositoryControl.RefusedException) {
            return status(Status.INVALID_ARGUMENT, e.getMessage(), null);
        }
        if (e instanceof ModelNotFoundException) {
            return status(Status.NOT_FOUND, e.getMessage(), null);
        }
        if (e instanceof ModelUnavailableException u) {
            return status(Status.UNAVAILABLE, e.getMessage(), u.retryAfter());
        }
        if (e instanceof OverloadedException o) {
            return status(Status.RESOURCE_EXHAUSTED, e.getMessage(), o.retryAfter());
        }
        if (e instanceof RequestCancelledException c) {
            // Triton: a timeout that expired in the queue is UNAVAILABLE "Request timeout expired".
            Status status = switch (c.reason()) {
                case TIMEOUT -> Status.UNAVAILABLE;
                case DEADLINE -> Status.DEADLINE_EXCEEDED;
                case CLIENT -> Status.CANCELLED;
            };
            return status(status, e.getMessage(), null);
        }
        if (e instanceof ExecuTorchException) {
            log.warn("inference failed in the runtime: {}", e.getMessage());
            return status(Status.INTERNAL, "inference failed: " + e.getMessage(), null);
        }
        log.error("unexpected failure", e);
        return status(Status.INTERNAL, "internal error: " + e.getClass().getSimpleName(), null);
    }

    StatusRuntimeException status(Status status, String message, java.time.Duration retryAfter) {
        Metadata trailers = new Metadata();
        if (retryAfter != null) {
            trailers.put(RETRY_INFO, RetryInfo.newBuilder().setRetryDelay(Duration.newBuilder()
                    .setSeconds(retryAfter.getSeconds()).setNanos(retryAfter.getNano())).build());
        }
        return status.withDescription(messages.redact(message)).asRuntimeException(trailers);
    }
}
