package io.etserve.grpc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.google.protobuf.ByteString;
import com.google.protobuf.InvalidProtocolBufferException;
import io.etserve.grpc.protocol.GRPCInferenceServiceGrpc;
import io.etserve.grpc.protocol.ModelInferRequest;
import io.etserve.grpc.protocol.ModelInferResponse;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.ServerCall;
import io.grpc.ServerInterceptors;
import io.grpc.ServerMethodDefinition;
import io.grpc.ServerServiceDefinition;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.internal.CompositeReadableBuffer;
import io.grpc.internal.ForwardingReadableBuffer;
import io.grpc.internal.ReadableBuffers;
import io.grpc.stub.StreamObserver;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * ModelInfer requests parsed over the transport's buffers: that the tensor is read where it
 * arrived, and when the buffers go (the handler's close, or the call's end). The transport here
 * is grpc-java's own stream over buffers in pieces, as Netty's frames hand them over.
 */
class InPlaceRequestsTest {

    private static final MethodDescriptor<ModelInferRequest, ModelInferResponse> INFER =
            GRPCInferenceServiceGrpc.getModelInferMethod();
    private static final int PIECE = 16 << 10;  // an HTTP/2 frame's default payload

    private final InPlaceRequests inPlace = new InPlaceRequests(INFER);
    /** The tensor bytes each handled request had while its handler held them. */
    private final List<byte[]> handled = new ArrayList<>();
    private final ServerServiceDefinition service = inPlace.parseInPlace(ServerInterceptors.intercept(
            new GRPCInferenceServiceGrpc.GRPCInferenceServiceImplBase() {
                @Override
                public void modelInfer(ModelInferRequest request, StreamObserver<ModelInferResponse> out) {
                    try (InPlaceRequests.Taken read = inPlace.take(request)) {
                        handled.add(request.getRawInputContents(0).toByteArray());
                    }
                    out.onNext(ModelInferResponse.getDefaultInstance());
                    out.onCompleted();
                }
            }, inPlace));

    @Test
    void aLargeRequestsTensorIsReadWhereItArrivedUntilTheHandlerIsDoneWithIt() {
        byte[] tensor = tensor(256 << 10);
        Pieces pieces = new Pieces(request(tensor).toByteArray(), true);

        ModelInferRequest parsed = parse(pieces.stream());

        assertThat(parsed.getRawInputContents(0).toByteArray()).isEqualTo(tensor);
        assertThat(inPlace.parsedInPlace()).isEqualTo(1);
        assertThat(inPlace.heldCount()).isEqualTo(1);
        assertThat(pieces.closed).hasValue(0);
        // Not a copy: a byte changed in the transport's buffer shows in the parsed tensor.
        int at = 5 * PIECE + 100;
        ByteBuffer piece = pieces.buffers.get(5);
        int inTensor = at - (pieces.bytes.length - tensor.length);
        piece.put(100, (byte) (piece.get(100) + 1));
        assertThat(parsed.getRawInputContents(0).byteAt(inTensor)).isEqualTo((byte) (tensor[inTensor] + 1));

        Call call = new Call();
        ServerCall.Listener<ModelInferRequest> listener = startCall(call);
        listener.onMessage(parsed);
        assertThat(pieces.closed).hasValue(0);
        listener.onHalfClose();

        assertThat(handled).hasSize(1);
        assertThat(handled.get(0)[inTensor]).isEqualTo((byte) (tensor[inTensor] + 1));
        assertThat(call.status.getCode()).isEqualTo(Status.Code.OK);
        assertThat(pieces.closed).as("every piece let go once the handler read the request")
                .hasValue(pieces.buffers.size());
        assertThat(inPlace.heldCount()).isZero();
        listener.onComplete();
        assertThat(pieces.closed).as("and not again at the call's end").hasValue(pieces.buffers.size());
    }

    @Test
    void aCallThatEndsBeforeItsHandlerRanLetsTheBuffersGo() {
        Pieces pieces = new Pieces(request(tensor(128 << 10)).toByteArray(), true);
        ModelInferRequest parsed = parse(pieces.stream());
        ServerCall.Listener<ModelInferRequest> listener = startCall(new Call());
        listener.onMessage(parsed);

        listener.onCancel();

        assertThat(handled).isEmpty();
        assertThat(pieces.closed).hasValue(pieces.buffers.size());
        assertThat(inPlace.heldCount()).isZero();
    }

    @Test
    void secondMessagesOfAUnaryCallAreLetGoAtItsEndToo() {
        Pieces first = new Pieces(request(tensor(128 << 10)).toByteArray(), true);
        Pieces second = new Pieces(request(tensor(96 << 10)).toByteArray(), true);
        Call call = new Call();
        ServerCall.Listener<ModelInferRequest> listener = startCall(call);
        listener.onMessage(parse(first.stream()));
        listener.onMessage(parse(second.stream()));
        listener.onHalfClose();

        assertThat(call.status.getCode()).isEqualTo(Status.Code.INTERNAL);  // grpc-java's "Too many requests"
        listener.onComplete();

        assertThat(handled).isEmpty();
        assertThat(first.closed).hasValue(first.buffers.size());
        assertThat(second.closed).hasValue(second.buffers.size());
        assertThat(inPlace.heldCount()).isZero();
    }

    /** UnreadableMessages, outside, refuses the call at its first message and still passes the next on. */
    @Test
    void aLargeMessageAfterAnUnreadableOneIsLetGoWhenTheRefusedCallEnds() {
        ServerServiceDefinition refusing = UnreadableMessages.refuse(service);
        Call call = new Call();
        ServerCall.Listener<ModelInferRequest> listener = startCall(refusing, call);
        listener.onMessage(parse(refusing, new java.io.ByteArrayInputStream(new byte[] {(byte) 0xff, (byte) 0xff, 1})));
        assertThat(call.status.getCode()).isEqualTo(Status.Code.INVALID_ARGUMENT);
        Pieces pieces = new Pieces(request(tensor(128 << 10)).toByteArray(), true);

        listener.onMessage(parse(refusing, pieces.stream()));
        assertThat(inPlace.heldCount()).isEqualTo(1);
        listener.onHalfClose();
        listener.onComplete();

        assertThat(handled).isEmpty();
        assertThat(pieces.closed).hasValue(pieces.buffers.size());
        assertThat(inPlace.heldCount()).isZero();
    }

    @Test
    void overHeapBuffersTheRequestIsCopiedAndTheBuffersGoAtOnce() {
        byte[] tensor = tensor(128 << 10);
        Pieces pieces = new Pieces(request(tensor).toByteArray(), false);

        ModelInferRequest parsed = parse(pieces.stream());

        assertThat(parsed.getRawInputContents(0).toByteArray()).isEqualTo(tensor);
        assertThat(pieces.closed).hasValue(pieces.buffers.size());
        assertThat(inPlace.heldCount()).isZero();
        assertThat(inPlace.parsedInPlace()).isZero();
        assertThat(inPlace.take(parsed)).as("nothing to hold").isNotNull();
    }

    @Test
    void aSmallRequestIsParsedAsGrpcJavaParsesIt() {
        byte[] tensor = tensor(1 << 10);
        Pieces pieces = new Pieces(request(tensor).toByteArray(), true);

        ModelInferRequest parsed = parse(pieces.stream());

        assertThat(parsed.getRawInputContents(0).toByteArray()).isEqualTo(tensor);
        assertThat(inPlace.parsedInPlace()).isZero();
        assertThat(inPlace.heldCount()).isZero();
    }

    @Test
    void aTruncatedLargeRequestFailsAsGrpcJavasParseFailsAndHoldsNothing() {
        byte[] whole = request(tensor(128 << 10)).toByteArray();
        Pieces pieces = new Pieces(Arrays.copyOf(whole, whole.length - 10), true);

        assertThatThrownBy(() -> parse(pieces.stream())).isInstanceOfSatisfying(StatusRuntimeException.class, e -> {
            assertThat(e.getStatus().getCode()).isEqualTo(Status.Code.INTERNAL);
            assertThat(e.getCause()).isInstanceOf(InvalidProtocolBufferException.class);
        });
        assertThat(pieces.closed).hasValue(pieces.buffers.size());
        assertThat(inPlace.heldCount()).isZero();
    }

    @Test
    void otherMethodsKeepTheirOwnParse() {
        ServerServiceDefinition plain = new GRPCInferenceServiceGrpc.GRPCInferenceServiceImplBase() {}.bindService();
        ServerServiceDefinition rebuilt = inPlace.parseInPlace(plain);
        for (ServerMethodDefinition<?, ?> m : plain.getMethods()) {
            String name = m.getMethodDescriptor().getFullMethodName();
            boolean same = rebuilt.getMethod(name).getMethodDescriptor().getRequestMarshaller()
                    == m.getMethodDescriptor().getRequestMarshaller();
            assertThat(same).as(name).isEqualTo(!name.equals(INFER.getFullMethodName()));
        }
    }

    private ModelInferRequest parse(InputStream stream) {
        return parse(service, stream);
    }

    @SuppressWarnings("unchecked")
    private static ModelInferRequest parse(ServerServiceDefinition service, InputStream stream) {
        return ((MethodDescriptor<ModelInferRequest, ?>) service.getMethod(INFER.getFullMethodName())
                .getMethodDescriptor()).parseRequest(stream);
    }

    private ServerCall.Listener<ModelInferRequest> startCall(Call call) {
        return startCall(service, call);
    }

    @SuppressWarnings("unchecked")
    private static ServerCall.Listener<ModelInferRequest> startCall(ServerServiceDefinition service, Call call) {
        var method = (ServerMethodDefinition<ModelInferRequest, ModelInferResponse>) service.getMethod(
                INFER.getFullMethodName());
        call.method = method.getMethodDescriptor();
        return method.getServerCallHandler().startCall(call, new Metadata());
    }

    private static ModelInferRequest request(byte[] tensor) {
        ModelInferRequest.Builder b = ModelInferRequest.newBuilder().setModelName("affine").setId("in-place");
        b.addInputsBuilder().setName("x").setDatatype("FP32").addShape(tensor.length / 4);
        return b.addRawInputContents(ByteString.copyFrom(tensor)).build();
    }

    private static byte[] tensor(int bytes) {
        byte[] t = new byte[bytes];
        for (int i = 0; i < bytes; i++) {
            t[i] = (byte) (i * 31 + i / 251);
        }
        return t;
    }

    /** A message's bytes in direct or heap buffers of {@link #PIECE} bytes, each counted when let go. */
    private static final class Pieces {
        final byte[] bytes;
        final boolean direct;
        final List<ByteBuffer> buffers = new ArrayList<>();
        final AtomicInteger closed = new AtomicInteger();

        Pieces(byte[] bytes, boolean direct) {
            this.bytes = bytes;
            this.direct = direct;
        }

        /** grpc-java's stream over them, as its deframer hands a message to the parse. */
        InputStream stream() {
            CompositeReadableBuffer composite = new CompositeReadableBuffer();
            for (int at = 0; at < bytes.length; at += PIECE) {
                int n = Math.min(PIECE, bytes.length - at);
                ByteBuffer b = direct ? ByteBuffer.allocateDirect(n) : ByteBuffer.allocate(n);
                b.put(bytes, at, n).flip();
                buffers.add(b);
                composite.addBuffer(new ForwardingReadableBuffer(ReadableBuffers.wrap(b.duplicate())) {
                    @Override
                    public void close() {
                        closed.incrementAndGet();
                        super.close();
                    }
                });
            }
            return ReadableBuffers.openStream(composite, true);
        }
    }

    /** The server side of a call, as grpc-java hands it to a handler: it keeps the status it is closed with. */
    private static final class Call extends ServerCall<ModelInferRequest, ModelInferResponse> {
        MethodDescriptor<ModelInferRequest, ModelInferResponse> method;
        Status status;

        @Override
        public void request(int numMessages) {}

        @Override
        public void sendHeaders(Metadata headers) {}

        @Override
        public void sendMessage(ModelInferResponse message) {}

        @Override
        public void close(Status status, Metadata trailers) {
            this.status = status;
        }

        @Override
        public boolean isCancelled() {
            return false;
        }

        @Override
        public MethodDescriptor<ModelInferRequest, ModelInferResponse> getMethodDescriptor() {
            return method;
        }
    }
}
