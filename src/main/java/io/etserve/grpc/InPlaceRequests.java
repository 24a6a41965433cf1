package io.etserve.grpc;

import com.google.protobuf.ByteString;
import com.google.protobuf.CodedInputStream;
import com.google.protobuf.ExtensionRegistryLite;
import com.google.protobuf.MessageLite;
import com.google.protobuf.Parser;
import com.google.protobuf.UnsafeByteOperations;
import io.grpc.Detachable;
import io.grpc.ForwardingServerCallListener;
import io.grpc.HasByteBuffer;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.ServerInterceptors;
import io.grpc.ServerMethodDefinition;
import io.grpc.ServerServiceDefinition;
import io.grpc.Status;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;

/**
 * Large requests parsed over the transport's own buffers. grpc-java's protobuf parse reads a
 * message out of Netty's buffers into an array, and protobuf copies each bytes field out of that
 * again: for a 4 MiB tensor, two copies and two 4 MiB arrays per call before its bytes reach the
 * buffer the model reads (bench/results/2026-12-06-2core-grpc-in-place.md). A request of at least
 * {@link #MIN_BYTES} to one of the given methods instead keeps Netty's buffers ({@link Detachable})
 * and is parsed over them with protobuf's aliasing: its {@code raw_input_contents} are views of
 * what was read from the socket, and {@link GrpcTensors} copies them once, into the call's tensor
 * buffers.
 *
 * <p>Such a request's buffers are held from the parse until the handler, having read it, closes
 * what {@link #take} gave it, or, when no handler took them, until the call ends. As an
 * interceptor this class must sit inside {@link CallOnWorker}, which runs a call's callbacks one
 * after the other: the call's completion or cancellation then comes after its handler has
 * returned, and letting the buffers go there cannot pull them from under a handler still reading.
 * No request is read after that: its bytes fields would show whatever the pool put there next.
 */
public final class InPlaceRequests implements ServerInterceptor {

    /** Below this the copies are small (grpc-java parses a small message in an array it reuses). */
    static final int MIN_BYTES = 64 * 1024;

    /** What a handler holds while it reads a request parsed in place; closing it lets the buffers go. */
    public interface Taken extends AutoCloseable {
        @Override
        void close();
    }

    private static final Taken NOTHING_HELD = () -> {};

    private final Set<String> methods;
    /** Messages whose buffers are held, by identity (a message's equals would compare 4 MiB). */
    private final Map<Object, Held> held = Collections.synchronizedMap(new IdentityHashMap<>());
    /** The size of {@link #held}, read without its lock: most calls find it 0 and look no further. */
    private final AtomicInteger heldNow = new AtomicInteger();
    private final LongAdder parsedInPlace = new LongAdder();

    public InPlaceRequests(MethodDescriptor<?, ?>... methods) {
        this.methods = Set.of(Arrays.stream(methods).map(MethodDescriptor::getFullMethodName)
                .toArray(String[]::new));
    }

    /**
     * {@code service} with the methods' large requests parsed in place. The service must have this
     * interceptor inside {@link CallOnWorker}, and every listener outside it must pass each message
     * on ({@link UnreadableMessages} does, after a refusal too): it lets go of what it sees.
     */
    public ServerServiceDefinition parseInPlace(ServerServiceDefinition service) {
        // By name: the rebuilt methods are not the descriptor's own instances.
        ServerServiceDefinition.Builder inPlace = ServerServiceDefinition.builder(
                service.getServiceDescriptor().getName());
        for (ServerMethodDefinition<?, ?> method : service.getMethods()) {
            inPlace.addMethod(withParse(method));
        }
        return inPlace.build();
    }

    /**
     * For the handler, before it reads {@code message}: if the message is parsed in place, its
     * buffers, held until the result is closed; otherwise nothing to close. Fails CANCELLED should
     * the buffers go between the lookup and the take, which this interceptor's place inside
     * {@link CallOnWorker} rules out: a guard, so that a reordering fails the call rather than read
     * what the pool holds next.
     */
    public Taken take(Object message) {
        Held h = heldFor(message);
        if (h == null) {
            return NOTHING_HELD;
        }
        h.take();
        return h;
    }

    /** What holds {@code message}'s buffers, or null; most calls find nothing held and take no lock. */
    private Held heldFor(Object message) {
        return heldNow.get() == 0 ? null : held.get(message);
    }

    /** Messages whose buffers are held now. */
    int heldCount() {
        return held.size();
    }

    /** Messages parsed over the transport's buffers since start. */
    long parsedInPlace() {
        return parsedInPlace.sum();
    }

    /** The method as it was, or, if it is one of those parsed in place, with the in-place parse. */
    private <Q, R> ServerMethodDefinition<Q, R> withParse(ServerMethodDefinition<Q, R> method) {
        MethodDescriptor<Q, R> descriptor = method.getMethodDescriptor();
        if (!methods.contains(descriptor.getFullMethodName())) {
            return method;
        }
        if (!(descriptor.getRequestMarshaller() instanceof MethodDescriptor.PrototypeMarshaller<Q> copying)
                || !(copying.getMessagePrototype() instanceof MessageLite prototype)) {
            throw new IllegalArgumentException(descriptor.getFullMethodName() + " takes no protobuf message");
        }
        Parse<Q> parse = new Parse<>(copying, prototype.getParserForType());
        return ServerMethodDefinition.create(descriptor.toBuilder(parse, descriptor.getResponseMarshaller()).build(),
                method.getServerCallHandler());
    }

    @Override
    public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers,
            ServerCallHandler<Q, R> next) {
        ServerCall.Listener<Q> delegate = next.startCall(call, headers);
        if (!methods.contains(call.getMethodDescriptor().getFullMethodName())) {
            return delegate;
        }
        return new ForwardingServerCallListener.SimpleForwardingServerCallListener<>(delegate) {
            /** This call's messages parsed in place (one for a unary call that keeps to the protocol). */
            private List<Held> own;

            @Override
            public void onMessage(Q message) {
                Held h = heldFor(message);
                if (h != null) {
                    if (own == null) {
                        own = new ArrayList<>(1);
                    }
                    own.add(h);
                }
                super.onMessage(message);
            }

            @Override
            public void onComplete() {
                try {
                    super.onComplete();
                } finally {
                    callEnded();
                }
            }

            @Override
            public void onCancel() {
                try {
                    super.onCancel();
                } finally {
                    callEnded();
                }
            }

            /** After the handler, if it ran (CallOnWorker): what it did not take and close goes now. */
            private void callEnded() {
                if (own != null) {
                    own.forEach(Held::callEnded);
                    own = null;
                }
            }
        };
    }

    /** The request marshaller of a method parsed in place; a small request goes to {@code copying}. */
    private final class Parse<Q> implements MethodDescriptor.PrototypeMarshaller<Q> {
        private final MethodDescriptor.PrototypeMarshaller<Q> copying;
        private final Parser<? extends MessageLite> parser;

        Parse(MethodDescriptor.PrototypeMarshaller<Q> copying, Parser<? extends MessageLite> parser) {
            this.copying = copying;
            this.parser = parser;
        }

        @Override
        public InputStream stream(Q value) {
            return copying.stream(value);
        }

        @Override
        public Q getMessagePrototype() {
            return copying.getMessagePrototype();
        }

        @Override
        public Class<Q> getMessageClass() {
            return copying.getMessageClass();
        }

        @Override
        public Q parse(InputStream stream) {
            if (available(stream) < MIN_BYTES || !(stream instanceof Detachable detachable)
                    || !(stream instanceof HasByteBuffer buffers) || !buffers.byteBufferSupported()) {
                return copying.parse(stream);
            }
            InputStream detached = detachable.detach();
            Held kept = null;
            try {
                int size = detached.available();
                // Marked, the stream keeps the buffers it is skipped past until it is closed.
                detached.mark(size);
                List<ByteString> pieces = new ArrayList<>();
                while (detached.available() > 0) {
                    ByteBuffer piece = ((HasByteBuffer) detached).getByteBuffer();
                    if (piece == null || !piece.hasRemaining()) {
                        detached.reset();
                        return copying.parse(detached);
                    }
                    pieces.add(UnsafeByteOperations.unsafeWrap(piece));
                    detached.skip(piece.remaining());
                }
                detached.reset();
                // A rope over the pieces, not a copy (pieces under 128 bytes side by side are merged).
                ByteString whole = ByteString.copyFrom(pieces);
                // Protobuf aliases only over direct buffers alone; over any other it parses by copying.
                boolean aliased = whole.asReadOnlyByteBufferList().stream().allMatch(ByteBuffer::isDirect);
                CodedInputStream in = whole.newCodedInput();
                in.enableAliasing(true);
                in.setSizeLimit(Integer.MAX_VALUE);
                @SuppressWarnings("unchecked")
                Q message = (Q) parser.parseFrom(in, ExtensionRegistryLite.getEmptyRegistry());
                in.checkLastTagWas(0);
                if (aliased) {
                    kept = new Held(message, detached);
                    held.put(message, kept);
                    heldNow.incrementAndGet();
                    parsedInPlace.increment();
                }
                return message;
            } catch (IOException e) {
                // As grpc-java's own parse fails (UnreadableMessages reads the cause).
                throw Status.INTERNAL.withDescription("Invalid protobuf byte sequence").withCause(e)
                        .asRuntimeException();
            } finally {
                if (kept == null) {
                    closeQuietly(detached);
                }
            }
        }
    }

    private static int available(InputStream stream) {
        try {
            return stream.available();
        } catch (IOException e) {
            return 0;  // unknown: the copying parse reads it as it comes
        }
    }

    private static void closeQuietly(InputStream stream) {
        try {
            stream.close();
        } catch (IOException ignored) {
            // releasing buffers: nothing to report
        }
    }

    /** A parsed message's buffers: held until the handler is done with them, or the call ends untaken. */
    private final class Held implements Taken {
        private final Object message;
        private final InputStream buffers;
        private boolean taken;
        private boolean gone;

        Held(Object message, InputStream buffers) {
            this.message = message;
            this.buffers = buffers;
        }

        synchronized void take() {
            if (gone) {  // let go since the lookup: see take(Object)
                throw Status.CANCELLED.withDescription("the request's buffers are gone").asRuntimeException();
            }
            taken = true;
        }

        /** The call ended, after its handler if it ran: the buffers go, unless that handler took them. */
        synchronized void callEnded() {
            if (!taken) {
                letGo();
            }
        }

        @Override
        public synchronized void close() {
            letGo();
        }

        private void letGo() {
            if (!gone) {
                gone = true;
                held.remove(message);
                heldNow.decrementAndGet();
                closeQuietly(buffers);
            }
        }
    }
}
