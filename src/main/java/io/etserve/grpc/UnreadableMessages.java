package io.etserve.grpc;

import io.grpc.ForwardingServerCall;
import io.grpc.ForwardingServerCallListener;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.ServerInterceptors;
import io.grpc.ServerMethodDefinition;
import io.grpc.ServerServiceDefinition;
import io.grpc.Status;
import java.io.InputStream;

/**
 * A request that is not a valid protobuf message of its method's type is refused
 * INVALID_ARGUMENT with the parser's reason, as REST refuses malformed JSON with 400. grpc-java
 * parses a request before any interceptor sees it, and a failed parse would end the call UNKNOWN
 * ("Application error processing RPC") with a stack trace logged at ERROR for each such request:
 * here each method's request marshaller notes the failure and answers an empty message instead,
 * and the outermost listener, which grpc-java calls with it right after the parse on the same
 * thread, turns it into the refusal. Outermost, it is outside tracing too: such a call, which
 * never reaches a handler, has no span. Messages after a refusal are still passed on (no
 * half-close follows them, so no handler runs): {@link InPlaceRequests}, inside, lets go of the
 * buffers of those it holds when the call ends.
 */
final class UnreadableMessages implements ServerInterceptor {

    /** Why the last parse on this thread failed, for the listener that grpc-java calls next. */
    private static final ThreadLocal<Status> REASON = new ThreadLocal<>();

    private UnreadableMessages() {}

    /** {@code service} with its protobuf requests parsed this way. */
    static ServerServiceDefinition refuse(ServerServiceDefinition service) {
        ServerServiceDefinition.Builder lenient = ServerServiceDefinition.builder(
                service.getServiceDescriptor().getName());
        for (ServerMethodDefinition<?, ?> method : service.getMethods()) {
            lenient.addMethod(lenient(method));
        }
        return ServerInterceptors.intercept(lenient.build(), new UnreadableMessages());
    }

    private static <Q, R> ServerMethodDefinition<Q, R> lenient(ServerMethodDefinition<Q, R> method) {
        MethodDescriptor<Q, R> descriptor = method.getMethodDescriptor();
        if (!(descriptor.getRequestMarshaller() instanceof MethodDescriptor.PrototypeMarshaller<Q> strict)
                || strict.getMessagePrototype() == null) {
            return method;
        }
        Q empty = strict.getMessagePrototype();
        MethodDescriptor.Marshaller<Q> parse = new MethodDescriptor.Marshaller<>() {
            @Override
            public InputStream stream(Q value) {
                return strict.stream(value);
            }

            @Override
            public Q parse(InputStream stream) {
                try {
                    return strict.parse(stream);
                } catch (RuntimeException e) {
                    REASON.set(refusal(e));
                    return empty;
                }
            }
        };
        return ServerMethodDefinition.create(descriptor.toBuilder(parse, descriptor.getResponseMarshaller()).build(),
                method.getServerCallHandler());
    }

    @Override
    public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers,
            ServerCallHandler<Q, R> next) {
        Closing<Q, R> closing = new Closing<>(call);
        ServerCall.Listener<Q> delegate = next.startCall(closing, headers);
        return new ForwardingServerCallListener.SimpleForwardingServerCallListener<>(delegate) {
            private boolean refused;

            @Override
            public void onMessage(Q message) {
                Status reason = REASON.get();
                REASON.remove();
                if (reason == null) {
                    // After a refusal too: the handler never runs (no half-close follows), and
                    // whoever holds a message's buffers (InPlaceRequests) must see it to let them go.
                    super.onMessage(message);
                    return;
                }
                if (refused) {
                    return;
                }
                refused = true;
                closing.close(reason.withDescription("the " + call.getMethodDescriptor().getBareMethodName()
                        + " request " + reason.getDescription()), new Metadata());
            }

            @Override
            public void onHalfClose() {
                if (!refused) {
                    super.onHalfClose();
                }
            }
        };
    }

    /**
     * The refusal of a message that did not parse: RESOURCE_EXHAUSTED where grpc-java's own
     * limit stopped the read (a compressed message inflating past etserve.grpc.max-message-size,
     * as an uncompressed one over it is refused), INVALID_ARGUMENT otherwise; the description
     * follows "the METHOD request".
     */
    static Status refusal(RuntimeException e) {
        Status carried = Status.fromThrowable(e);
        if (carried.getCode() == Status.Code.RESOURCE_EXHAUSTED) {
            return Status.RESOURCE_EXHAUSTED.withDescription("is too large: " + carried.getDescription());
        }
        Throwable reason = e.getCause() != null ? e.getCause() : e;
        return Status.INVALID_ARGUMENT.withDescription("is not a valid protobuf message: " + reason.getMessage());
    }

    /** The call as its handlers see it, closed once: a refusal here, or a handler's own close. */
    private static final class Closing<Q, R> extends ForwardingServerCall.SimpleForwardingServerCall<Q, R> {
        private boolean closed;

        Closing(ServerCall<Q, R> call) {
            super(call);
        }

        @Override
        public synchronized void close(Status status, Metadata trailers) {
            if (closed) {
                return;  // closed already (a refusal here, then a handler's own close)
            }
            closed = true;
            super.close(status, trailers);
        }
    }
}
