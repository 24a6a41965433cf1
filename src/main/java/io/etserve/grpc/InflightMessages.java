package io.etserve.grpc;

import io.etserve.grpc.protocol.GRPCInferenceServiceGrpc;
import io.etserve.inference.InflightBytes;
import io.etserve.inference.OverloadedException;
import io.grpc.Metadata;
import io.grpc.ServerStreamTracer;
import io.grpc.Status;

/**
 * gRPC's requests in the same in-flight budget as REST's bodies
 * ({@code etserve.inference.max-inflight-request-bytes}): each call reserves its message's bytes
 * as grpc-java moves them off the connection into the message being assembled, and gives them
 * back when the call ends, as a REST body's bytes are given back when its answer is written. A
 * message that would overrun the budget ends its call RESOURCE_EXHAUSTED at once, the way
 * grpc-java refuses one over the message size limit; without it a burst of large messages held
 * (calls x message size) of direct memory until Netty could allocate no more and closed every
 * call of the connection that asked. Only ModelInfer counts, as on REST only inference bodies
 * do: a full budget never refuses a readiness, metadata or repository call. (The refusal goes
 * through grpc-java's deframer, which sends the status without trailers: no RetryInfo on it.
 * A compressed message counts its compressed bytes.)
 */
final class InflightMessages extends ServerStreamTracer.Factory {

    private final InflightBytes budget;

    InflightMessages(InflightBytes budget) {
        this.budget = budget;
    }

    private static final String MODEL_INFER = GRPCInferenceServiceGrpc.getModelInferMethod().getFullMethodName();
    private static final ServerStreamTracer UNCOUNTED = new ServerStreamTracer() {};

    @Override
    public ServerStreamTracer newServerStreamTracer(String fullMethodName, Metadata headers) {
        return MODEL_INFER.equals(fullMethodName) ? new Call(budget.open()) : UNCOUNTED;
    }

    /** One call's reservation. Its callbacks come from the transport, possibly on more than one thread. */
    private static final class Call extends ServerStreamTracer {

        private final InflightBytes.Reservation held;
        private boolean closed;

        Call(InflightBytes.Reservation held) {
            this.held = held;
        }

        @Override
        public synchronized void inboundWireSize(long bytes) {
            if (closed || bytes <= 0) {
                return;
            }
            try {
                held.grow(bytes);
            } catch (OverloadedException spent) {
                // Thrown into grpc-java's deframer: the call ends with this status, sent to the client.
                throw Status.RESOURCE_EXHAUSTED.withDescription(spent.getMessage()).asRuntimeException();
            }
        }

        @Override
        public synchronized void streamClosed(Status status) {
            closed = true;
            held.close();
        }
    }
}
