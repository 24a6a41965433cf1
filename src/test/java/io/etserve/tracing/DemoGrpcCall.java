package io.etserve.tracing;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.grpc.protocol.GRPCInferenceServiceGrpc;
import io.etserve.grpc.protocol.InferTensorContents;
import io.etserve.grpc.protocol.ModelInferRequest;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.stub.MetadataUtils;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

/** One gRPC ModelInfer on demo-portable with a {@code traceparent}, keeping the traceparent the answer carried. */
record DemoGrpcCall(String answerHeader, String answerTrailer) {

    static final Metadata.Key<String> TRACEPARENT = Metadata.Key.of("traceparent", Metadata.ASCII_STRING_MARSHALLER);

    static DemoGrpcCall run(int port, String traceparent) throws InterruptedException {
        Metadata sent = new Metadata();
        sent.put(TRACEPARENT, traceparent);
        AtomicReference<Metadata> headers = new AtomicReference<>();
        AtomicReference<Metadata> trailers = new AtomicReference<>();
        ManagedChannel channel = Grpc.newChannelBuilderForAddress("127.0.0.1", port,
                InsecureChannelCredentials.create()).build();
        try {
            var stub = GRPCInferenceServiceGrpc.newBlockingStub(channel).withDeadlineAfter(30, TimeUnit.SECONDS)
                    .withInterceptors(MetadataUtils.newAttachHeadersInterceptor(sent),
                            MetadataUtils.newCaptureMetadataInterceptor(headers, trailers));
            ModelInferRequest.Builder req = ModelInferRequest.newBuilder().setModelName("demo-portable");
            InferTensorContents.Builder data = InferTensorContents.newBuilder();
            for (int i = 0; i < 16; i++) {
                data.addFp32Contents(i / 16f);
            }
            req.addInputsBuilder().setName("x").setDatatype("FP32").addShape(1).addShape(16).setContents(data);
            assertThat(stub.modelInfer(req.build()).getModelName()).isEqualTo("demo-portable");
        } finally {
            channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        }
        return new DemoGrpcCall(headers.get().get(TRACEPARENT), trailers.get().get(TRACEPARENT));
    }
}
