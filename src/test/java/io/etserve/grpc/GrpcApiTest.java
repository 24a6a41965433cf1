package io.etserve.grpc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.google.protobuf.ByteString;
import io.etserve.grpc.protocol.CudaSharedMemoryRegisterRequest;
import io.etserve.grpc.protocol.GRPCInferenceServiceGrpc;
import io.etserve.grpc.protocol.InferParameter;
import io.etserve.grpc.protocol.InferTensorContents;
import io.etserve.grpc.protocol.ModelInferRequest;
import io.etserve.grpc.protocol.ModelInferResponse;
import io.etserve.grpc.protocol.ModelMetadataRequest;
import io.etserve.grpc.protocol.ModelMetadataResponse;
import io.etserve.grpc.protocol.ModelReadyRequest;
import io.etserve.grpc.protocol.ServerLiveRequest;
import io.etserve.grpc.protocol.ServerMetadataRequest;
import io.etserve.grpc.protocol.ServerReadyRequest;
import io.etserve.grpc.protocol.SystemSharedMemoryRegisterRequest;
import io.etserve.support.InlineCalls;
import io.etserve.support.ModelActivity;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.Reference;
import io.etserve.support.TestPaths;
import io.grpc.CallOptions;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.health.v1.HealthCheckRequest;
import io.grpc.health.v1.HealthCheckResponse;
import io.grpc.health.v1.HealthGrpc;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.StreamObserver;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/** The Open Inference Protocol over gRPC, on the real runtime: a grpc-java client on loopback. */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
@org.junit.jupiter.api.TestMethodOrder(org.junit.jupiter.api.MethodOrderer.OrderAnnotation.class)
class GrpcApiTest {

    static final ModelRepositoryFixture REPO = ModelRepositoryFixture.create("etserve-grpc-")
            .copy(TestPaths.demoModels(), "demo-portable")
            .copy(TestPaths.demoModels(), "demo-xnnpack")
            .copy(TestPaths.testModels(), "affine-4mib")
            .withProgramBytes("broken", new byte[] {1, 2, 3, 4, 5, 6, 7, 8})
            // The probe delegate holds its one instance as long as asked: overload on demand.
            .withSlowProbe("slow");

    @DynamicPropertySource
    static void properties(DynamicPropertyRegistry r) {
        r.add("etserve.model-repository", () -> REPO.root().toString());
        r.add("etserve.native.extra-libraries", () -> TestPaths.probeDelegate().toString());
        r.add("etserve.inference.queue-timeout", () -> "200ms");
        r.add("etserve.grpc.max-message-size", () -> "1MB");
        InlineCalls.off(r);
        r.add("management.server.port", () -> "0");
    }

    @Autowired
    GrpcServer server;

    @Autowired
    org.springframework.context.ApplicationContext context;

    ManagedChannel channel;
    GRPCInferenceServiceGrpc.GRPCInferenceServiceBlockingStub stub;

    @BeforeEach
    void connect() {
        channel = Grpc.newChannelBuilderForAddress("127.0.0.1", server.port(), InsecureChannelCredentials.create())
                .build();
        stub = GRPCInferenceServiceGrpc.newBlockingStub(channel).withDeadlineAfter(30, TimeUnit.SECONDS);
    }

    @AfterEach
    void close() throws InterruptedException {
        channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
    }

    @Test
    void serverHealthAndMetadata() {
        assertThat(stub.serverLive(ServerLiveRequest.getDefaultInstance()).getLive()).isTrue();
        assertThat(stub.serverReady(ServerReadyRequest.getDefaultInstance()).getReady()).isTrue();
        var meta = stub.serverMetadata(ServerMetadataRequest.getDefaultInstance());
        assertThat(meta.getName()).isEqualTo("etserve");
        assertThat(meta.getExtensionsList()).contains("binary_tensor_data");
        assertThat(HealthGrpc.newBlockingStub(channel).check(HealthCheckRequest.getDefaultInstance()).getStatus())
                .isEqualTo(HealthCheckResponse.ServingStatus.SERVING);
        assertThat(HealthGrpc.newBlockingStub(channel).check(HealthCheckRequest.newBuilder()
                .setService("inference.GRPCInferenceService").build()).getStatus())
                .isEqualTo(HealthCheckResponse.ServingStatus.SERVING);
        // Any other service is unknown here (the health protocol's NOT_FOUND), not SERVING.
        StatusRuntimeException unknown = (StatusRuntimeException) org.assertj.core.api.Assertions.catchThrowable(() ->
                HealthGrpc.newBlockingStub(channel).check(HealthCheckRequest.newBuilder().setService("nope\n").build()));
        assertThat(unknown.getStatus().getCode()).isEqualTo(Status.Code.NOT_FOUND);
        assertThat(unknown.getStatus().getDescription()).contains("nope\\u000A");
    }

    /** The port started with Netty's leak detector off (GrpcServer.leakDetectionOffUnlessAsked). */
    @Test
    void servesWithNettysLeakDetectorOff() {
        for (String property : GrpcServer.LEAK_DETECTION_PROPERTIES) {
            org.junit.jupiter.api.Assumptions.assumeTrue(System.getProperty(property) == null,
                    "this run sets " + property + ": the detector is as it asks");
        }
        assertThat(stub.serverLive(ServerLiveRequest.getDefaultInstance()).getLive()).isTrue();
        assertThat(io.grpc.netty.shaded.io.netty.util.ResourceLeakDetector.getLevel())
                .isEqualTo(io.grpc.netty.shaded.io.netty.util.ResourceLeakDetector.Level.DISABLED);
    }

    @Test
    void aRequestThatIsNoProtobufMessageIsInvalidArgumentAndTheConnectionServesOn() {
        // Field 31, wire type 7 (no such type), then a truncated varint: no ModelInferRequest.
        MethodDescriptor<byte[], byte[]> raw = GRPCInferenceServiceGrpc.getModelInferMethod()
                .toBuilder(RawBytes.INSTANCE, RawBytes.INSTANCE).build();
        assertThatThrownBy(() -> ClientCalls.blockingUnaryCall(channel, raw, CallOptions.DEFAULT.withDeadlineAfter(30,
                TimeUnit.SECONDS), new byte[] {(byte) 0xff, (byte) 0xff, 0x01}))
                .isInstanceOfSatisfying(StatusRuntimeException.class, e -> {
                    assertThat(e.getStatus().getCode()).isEqualTo(Status.Code.INVALID_ARGUMENT);
                    assertThat(e.getStatus().getDescription())
                            .startsWith("the ModelInfer request is not a valid protobuf message: ");
                });
        // Invalid UTF-8 in a string field (the id) is no valid message either.
        byte[] badId = {0x12, 0x02, (byte) 0xc3, 0x28};
        assertThatThrownBy(() -> ClientCalls.blockingUnaryCall(channel, raw, CallOptions.DEFAULT.withDeadlineAfter(30,
                TimeUnit.SECONDS), badId)).isInstanceOfSatisfying(StatusRuntimeException.class,
                e -> assertThat(e.getStatus().getCode()).isEqualTo(Status.Code.INVALID_ARGUMENT));
        Reference ref = Reference.load(TestPaths.demoModels().resolve("demo-portable/1/reference.json"));
        assertMatches(ref, ref.cases().get(0), stub.modelInfer(request("demo-portable", ref.cases().get(0))));
    }

    /** A request's bytes as they are, for bodies no protobuf class would write. */
    enum RawBytes implements MethodDescriptor.Marshaller<byte[]> {
        INSTANCE;

        @Override
        public java.io.InputStream stream(byte[] value) {
            return new java.io.ByteArrayInputStream(value);
        }

        @Override
        public byte[] parse(java.io.InputStream stream) {
            try {
                return stream.readAllBytes();
            } catch (java.io.IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        }
    }

    @Test
    void modelMetadataAndReadiness() {
        ModelMetadataResponse m = stub.modelMetadata(ModelMetadataRequest.newBuilder().setName("demo-portable").build());
        assertThat(m.getName()).isEqualTo("demo-portable");
        assertThat(m.getVersionsList()).containsExactly("1");
        assertThat(m.getPlatform()).isEqualTo("executorch");
        assertThat(m.getInputs(0).getName()).isEqualTo("x");
        assertThat(m.getInputs(0).getDatatype()).isEqualTo("FP32");
        assertThat(m.getInputs(0).getShapeList()).containsExactly(1L, 16L);
        assertThat(m.getOutputs(0).getShapeList()).containsExactly(1L, 4L);
        assertThat(stub.modelReady(ModelReadyRequest.newBuilder().setName("demo-xnnpack").build()).getReady()).isTrue();
        assertThat(stub.modelReady(ModelReadyRequest.newBuilder().setName("broken").build()).getReady()).isFalse();
        // Unknown names and versions are not ready, not errors (Triton's answer; its clients raise on an error).
        assertThat(stub.modelReady(ModelReadyRequest.newBuilder().setName("no-such-model").build()).getReady()).isFalse();
        assertThat(stub.modelReady(ModelReadyRequest.newBuilder().setName("demo-xnnpack").setVersion("99").build())
                .getReady()).isFalse();
        assertThat(stub.modelReady(ModelReadyRequest.newBuilder().setName("../etc").build()).getReady()).isFalse();
    }

    @Test
    void rawInferenceOnBothDemoModelsMatchesThePyTorchReference() {
        for (String model : new String[] {"demo-portable", "demo-xnnpack"}) {
            Reference ref = Reference.load(TestPaths.demoModels().resolve(model + "/1/reference.json"));
            for (Reference.Case c : ref.cases()) {
                ModelInferResponse res = stub.modelInfer(request(model, c));
                assertThat(res.getModelName()).isEqualTo(model);
                assertThat(res.getModelVersion()).isEqualTo("1");
                assertThat(res.getId()).isEqualTo("case");
                assertMatches(ref, c, res);
            }
        }
    }

    @Test
    void aStreamAnswersEachRequestInOrderAndAFailedOneDoesNotEndIt() throws Exception {
        // Triton's streaming extension (tritonclient's stream_infer, perf_analyzer --streaming).
        Reference ref = Reference.load(TestPaths.demoModels().resolve("demo-xnnpack/1/reference.json"));
        Reference.Case c = ref.cases().get(0);
        java.util.concurrent.LinkedBlockingQueue<Object> got = new java.util.concurrent.LinkedBlockingQueue<>();
        StreamObserver<ModelInferRequest> requests = GRPCInferenceServiceGrpc.newStub(channel)
                .withDeadlineAfter(30, TimeUnit.SECONDS).modelStreamInfer(new StreamObserver<>() {
                    @Override
                    public void onNext(io.etserve.grpc.protocol.ModelStreamInferResponse r) {
                        got.add(r);
                    }

                    @Override
                    public void onError(Throwable t) {
                        got.add(t);
                    }

                    @Override
                    public void onCompleted() {
                        got.add("completed");
                    }
                });
        requests.onNext(request("demo-xnnpack", c));
        requests.onNext(request("no-such-model", c).toBuilder().setId("second").build());
        requests.onNext(request("demo-xnnpack", c).toBuilder().setId("third").build());
        requests.onCompleted();
        var first = (io.etserve.grpc.protocol.ModelStreamInferResponse) got.poll(30, TimeUnit.SECONDS);
        assertThat(first.getErrorMessage()).isEmpty();
        assertMatches(ref, c, first.getInferResponse());
        var second = (io.etserve.grpc.protocol.ModelStreamInferResponse) got.poll(30, TimeUnit.SECONDS);
        assertThat(second.getErrorMessage()).contains("no-such-model");
        // Only the request's id beside the error, as Triton answers: which request failed.
        assertThat(second.getInferResponse()).isEqualTo(ModelInferResponse.newBuilder().setId("second").build());
        var third = (io.etserve.grpc.protocol.ModelStreamInferResponse) got.poll(30, TimeUnit.SECONDS);
        assertThat(third.getInferResponse().getId()).isEqualTo("third");
        assertMatches(ref, c, third.getInferResponse());
        assertThat(got.poll(30, TimeUnit.SECONDS)).isEqualTo("completed");
    }

    @Test
    void compressedRequestsAnswerAsPlainOnesDeflateAsGzip() throws InterruptedException {
        // Triton's clients offer both; grpc-java's server knows only gzip unless told of deflate.
        io.grpc.CompressorRegistry both = io.grpc.CompressorRegistry.newEmptyInstance();
        both.register(new io.grpc.Codec.Gzip());
        both.register(DeflateCodec.INSTANCE);
        ManagedChannel ch = Grpc.newChannelBuilderForAddress("127.0.0.1", server.port(),
                InsecureChannelCredentials.create()).compressorRegistry(both).build();
        try {
            Reference ref = Reference.load(TestPaths.demoModels().resolve("demo-xnnpack/1/reference.json"));
            Reference.Case c = ref.cases().get(0);
            for (String encoding : new String[] {"gzip", "deflate"}) {
                ModelInferResponse res = GRPCInferenceServiceGrpc.newBlockingStub(ch).withCompression(encoding)
                        .withDeadlineAfter(30, TimeUnit.SECONDS).modelInfer(request("demo-xnnpack", c));
                assertMatches(ref, c, res);
            }
        } finally {
            ch.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        }
    }

    @Test
    @org.junit.jupiter.api.Order(1)  // first: no REST call has left buffers in the pool yet
    void aCallsTensorBuffersGoBackToThePoolAndTheNextCallsReuseThem(@Autowired io.etserve.runtime.DirectBufferPool pool) {
        Reference ref = Reference.load(TestPaths.demoModels().resolve("demo-xnnpack/1/reference.json"));
        Reference.Case c = ref.cases().get(0);
        ModelInferRequest.Builder req = ModelInferRequest.newBuilder().setModelName("demo-xnnpack");
        for (Reference.TensorValue in : c.inputs()) {
            req.addInputsBuilder().setName(in.name()).setDatatype(in.datatype())
                    .addAllShape(java.util.Arrays.stream(in.shape()).boxed().toList());
            req.addRawInputContents(ByteString.copyFrom(in.bytes()));
        }
        ModelInferRequest request = req.build();
        assertThat(pool.retainedBytes()).isZero();
        assertMatches(ref, c, stub.modelInfer(request));
        // Given back once the server's handler returns, which may be just after the client has the answer.
        long retained = settled(pool);
        assertThat(retained).as("the input's and output's buffers, given back").isPositive();
        for (int i = 0; i < 20; i++) {
            // The last call's buffers back first: a call that outran them would allocate its own.
            assertThat(awaitRetained(pool, retained)).as("reused, not allocated anew").isEqualTo(retained);
            assertMatches(ref, c, stub.modelInfer(request));
        }
        assertThat(awaitRetained(pool, retained)).as("reused, not allocated anew").isEqualTo(retained);
    }

    /** The pool's idle bytes once they are {@code expected}, or after 5 s whatever they are. */
    private static long awaitRetained(io.etserve.runtime.DirectBufferPool pool, long expected) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (pool.retainedBytes() != expected && System.nanoTime() < deadline) {
            Thread.onSpinWait();
        }
        return pool.retainedBytes();
    }

    /** The pool's idle bytes once they stop changing (a call's buffers come back after its answer left). */
    private static long settled(io.etserve.runtime.DirectBufferPool pool) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        long last = -1;
        long now = pool.retainedBytes();
        while ((now == 0 || now != last) && System.nanoTime() < deadline) {
            last = now;
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
            now = pool.retainedBytes();
        }
        return now;
    }

    /** As REST answers: while registration is off, whatever the request holds (a uint64 past 2^63 - 1 too). */
    @Test
    void sharedMemoryRegistrationsAreUnimplementedWhileOff() {
        StatusRuntimeException system = org.junit.jupiter.api.Assertions.assertThrows(StatusRuntimeException.class,
                () -> stub.systemSharedMemoryRegister(SystemSharedMemoryRegisterRequest.newBuilder().setName("r")
                        .setKey("/k").setOffset(-1).setByteSize(-1).build()));
        assertThat(system.getStatus().getCode()).isEqualTo(Status.Code.UNIMPLEMENTED);
        assertThat(system.getStatus().getDescription()).startsWith("Client shared memory is off");
        StatusRuntimeException cuda = org.junit.jupiter.api.Assertions.assertThrows(StatusRuntimeException.class,
                () -> stub.cudaSharedMemoryRegister(CudaSharedMemoryRegisterRequest.newBuilder().setName("r")
                        .setByteSize(-1).build()));
        assertThat(cuda.getStatus().getCode()).isEqualTo(Status.Code.UNIMPLEMENTED);
        assertThat(cuda.getStatus().getDescription()).startsWith("Client shared memory is off");
    }

    @Test
    void typedContentsWorkAsRawDoes() {
        Reference ref = Reference.load(TestPaths.demoModels().resolve("demo-portable/1/reference.json"));
        Reference.Case c = ref.cases().get(0);
        Reference.TensorValue in = c.inputs().get(0);
        InferTensorContents.Builder contents = InferTensorContents.newBuilder();
        in.data().forEach(v -> contents.addFp32Contents(v.floatValue()));
        ModelInferRequest.Builder req = ModelInferRequest.newBuilder().setModelName("demo-portable");
        req.addInputsBuilder().setName("x").setDatatype("FP32").addShape(1).addShape(16).setContents(contents);
        assertMatches(ref, c, stub.modelInfer(req.build()));
    }

    @Test
    void errorsAreStatusCodesWithTheRestMessages() {
        assertStatus(Status.Code.NOT_FOUND, "no-such-model", request("no-such-model", 16, 64));
        // a client's shape mistake: refused before execution, as REST's 400
        assertStatus(Status.Code.INVALID_ARGUMENT, "x", request("demo-portable", 8, 32));
        assertStatus(Status.Code.INVALID_ARGUMENT, "need 64", request("demo-portable", 16, 60));
        ModelInferRequest.Builder badType = request("demo-portable", 16, 64).toBuilder();
        badType.getInputsBuilder(0).setDatatype("FP33");
        assertStatus(Status.Code.INVALID_ARGUMENT, "unknown datatype", badType.build());
        // Triton's reserved parameters, wrongly typed; a uint64 priority (as tritonclient sends it) is served
        ModelInferRequest.Builder badFlag = request("demo-portable", 16, 64).toBuilder()
                .putParameters("sequence_start", InferParameter.newBuilder().setInt64Param(1).build());
        assertStatus(Status.Code.INVALID_ARGUMENT, "'sequence_start' must be a boolean", badFlag.build());
        ModelInferRequest.Builder badPriority = request("demo-portable", 16, 64).toBuilder()
                .putParameters("priority", InferParameter.newBuilder().setInt64Param(-1).build());
        assertStatus(Status.Code.INVALID_ARGUMENT, "'priority' must be a whole number", badPriority.build());
        Reference.Case first = Reference.load(TestPaths.demoModels().resolve("demo-portable/1/reference.json")).cases().get(0);
        ModelInferRequest prioritized = request("demo-portable", first).toBuilder()
                .putParameters("priority", InferParameter.newBuilder().setUint64Param(2).build()).build();
        assertThat(stub.modelInfer(prioritized).getOutputsCount()).isPositive();
        StatusRuntimeException broken = assertStatus(Status.Code.UNAVAILABLE, "broken", request("broken", 16, 64));
        assertThat(broken.getStatus().getDescription()).doesNotContain(REPO.root().toString());
        assertStatus(Status.Code.UNAVAILABLE, "did not load",
                ModelMetadataRequest.newBuilder().setName("broken").build());
        // the service still answers after every refusal
        assertThat(stub.serverReady(ServerReadyRequest.getDefaultInstance()).getReady()).isTrue();
    }

    @Test
    void overloadIsResourceExhaustedWithRetryInfo(@Autowired io.etserve.repository.ModelRegistry registry)
            throws Exception {
        ModelInferRequest slow = probe(2500);
        stub.modelInfer(probe(0));  // warm: the burst measures admission, not first-call costs
        var first = GRPCInferenceServiceGrpc.newFutureStub(channel).modelInfer(slow);
        ModelActivity.awaitNoIdleInstance(registry, "slow");  // the slow call holds the only instance now
        StatusRuntimeException e = assertStatus(Status.Code.RESOURCE_EXHAUSTED, "slow", probe(0));
        com.google.rpc.RetryInfo retry = e.getTrailers().get(
                io.grpc.protobuf.ProtoUtils.keyForProto(com.google.rpc.RetryInfo.getDefaultInstance()));
        assertThat(retry).as("RetryInfo trailer").isNotNull();
        assertThat(retry.getRetryDelay().getSeconds() * 1000 + retry.getRetryDelay().getNanos() / 1_000_000)
                .isPositive();
        assertThat(first.get(30, TimeUnit.SECONDS).getOutputsCount()).isEqualTo(1);
    }

    @Test
    void callsAreCountedByProtocolModelAndAnswer(@Autowired io.micrometer.core.instrument.MeterRegistry meters,
            @org.springframework.beans.factory.annotation.Value("${local.server.port}") int httpPort) {
        Reference ref = Reference.load(TestPaths.demoModels().resolve("demo-portable/1/reference.json"));
        ModelInferRequest.Builder ok = ModelInferRequest.newBuilder().setModelName("demo-portable");
        Reference.TensorValue in = ref.cases().get(0).inputs().get(0);
        ok.addInputsBuilder().setName("x").setDatatype("FP32").addShape(1).addShape(16);
        ok.addRawInputContents(ByteString.copyFrom(in.bytes()));
        double grpcOk = count(meters, "grpc", "demo-portable", "OK");
        double grpcUnknown = count(meters, "grpc", "unknown", "NOT_FOUND");
        double restOk = count(meters, "rest", "demo-portable", "200");
        double restUnknown = count(meters, "rest", "unknown", "404");
        stub.modelInfer(ok.build());
        stub.modelInfer(ok.build());
        catchStatus(() -> stub.modelInfer(request("made-up-name", 16, 64)));
        io.etserve.support.Http http = io.etserve.support.Http.local(httpPort);
        String json = "{\"inputs\":[" + in.json() + "]}";
        assertThat(http.post("/v2/models/demo-portable/infer", json).status()).isEqualTo(200);
        assertThat(http.post("/v2/models/made-up-name/infer", json).status()).isEqualTo(404);
        assertThat(count(meters, "grpc", "demo-portable", "OK") - grpcOk).isEqualTo(2);
        assertThat(count(meters, "grpc", "unknown", "NOT_FOUND") - grpcUnknown).isEqualTo(1);
        // REST records once the exchange is over, which may be just after the client has its answer.
        assertThat(awaitCount(meters, "rest", "demo-portable", "200", restOk + 1) - restOk).isEqualTo(1);
        assertThat(awaitCount(meters, "rest", "unknown", "404", restUnknown + 1) - restUnknown).isEqualTo(1);
        // a client's made-up name is never a series of its own
        assertThat(meters.find(io.etserve.metrics.ProtocolMetrics.NAME).tag("model", "made-up-name").timers()).isEmpty();
    }

    /** The count once it reaches {@code atLeast}, or as it is after 5 s. */
    private static double awaitCount(io.micrometer.core.instrument.MeterRegistry meters, String protocol, String model,
            String code, double atLeast) {
        long deadline = System.nanoTime() + 5_000_000_000L;
        double n = count(meters, protocol, model, code);
        while (n < atLeast && System.nanoTime() < deadline) {
            java.util.concurrent.locks.LockSupport.parkNanos(1_000_000);
            n = count(meters, protocol, model, code);
        }
        return n;
    }

    private static double count(io.micrometer.core.instrument.MeterRegistry meters, String protocol, String model,
            String code) {
        var timer = meters.find(io.etserve.metrics.ProtocolMetrics.NAME).tag("protocol", protocol).tag("model", model)
                .tag("code", code).timer();
        return timer == null ? 0 : timer.count();
    }

    private static void catchStatus(Runnable call) {
        assertThat(org.assertj.core.api.Assertions.catchThrowable(call::run)).isInstanceOf(StatusRuntimeException.class);
    }

    @Test
    void repositoryIndexAnswersAndLoadIsRefusedOutsideExplicitMode() {
        var index = stub.repositoryIndex(io.etserve.grpc.protocol.RepositoryIndexRequest.getDefaultInstance());
        assertThat(index.getModelsList()).extracting(m -> m.getName() + "/" + m.getVersion() + " " + m.getState())
                .contains("demo-portable/1 READY", "broken/1 FAILED");
        var readyOnly = stub.repositoryIndex(io.etserve.grpc.protocol.RepositoryIndexRequest.newBuilder().setReady(true).build());
        assertThat(readyOnly.getModelsList()).extracting(m -> m.getName()).doesNotContain("broken");
        StatusRuntimeException e = (StatusRuntimeException) org.assertj.core.api.Assertions.catchThrowable(() ->
                stub.repositoryModelLoad(io.etserve.grpc.protocol.RepositoryModelLoadRequest.newBuilder()
                        .setModelName("demo-portable").build()));
        assertThat(e.getStatus().getCode()).isEqualTo(Status.Code.INVALID_ARGUMENT);
        assertThat(e.getStatus().getDescription()).contains("etserve.repository.mode is startup");
    }

    @Test
    void aMessageOverTheConfiguredSizeIsRefusedByGrpcItself() {
        assertStatus(Status.Code.RESOURCE_EXHAUSTED, "", request("demo-portable", 16, 2 << 20));
        assertThat(stub.serverReady(ServerReadyRequest.getDefaultInstance()).getReady()).isTrue();
    }

    @Test
    void compressedMessagesThatInflateTooFarOrAreNotWhatTheySayAreRefusedWithTheirReason() throws Exception {
        io.grpc.CompressorRegistry real = io.grpc.CompressorRegistry.newEmptyInstance();
        real.register(new io.grpc.Codec.Gzip());
        // A "gzip" that sends the message as it is: flagged compressed, and not gzip data.
        io.grpc.CompressorRegistry fake = io.grpc.CompressorRegistry.newEmptyInstance();
        fake.register(new io.grpc.Codec() {
            @Override
            public String getMessageEncoding() {
                return "gzip";
            }

            @Override
            public java.io.OutputStream compress(java.io.OutputStream os) {
                return os;
            }

            @Override
            public java.io.InputStream decompress(java.io.InputStream is) {
                return is;
            }
        });
        ManagedChannel gzip = Grpc.newChannelBuilderForAddress("127.0.0.1", server.port(),
                InsecureChannelCredentials.create()).compressorRegistry(real).build();
        ManagedChannel notGzip = Grpc.newChannelBuilderForAddress("127.0.0.1", server.port(),
                InsecureChannelCredentials.create()).compressorRegistry(fake).build();
        try {
            // 2 MiB of zeros compress to a few KiB: under the 1MB limit on the wire, over it inflated.
            ModelInferRequest zeros = request("demo-portable", 16, 2 << 20);
            StatusRuntimeException bomb = (StatusRuntimeException) org.assertj.core.api.Assertions.catchThrowable(() ->
                    GRPCInferenceServiceGrpc.newBlockingStub(gzip).withCompression("gzip")
                            .withDeadlineAfter(30, TimeUnit.SECONDS).modelInfer(zeros));
            assertThat(bomb.getStatus().getCode()).isEqualTo(Status.Code.RESOURCE_EXHAUSTED);
            assertThat(bomb.getStatus().getDescription()).contains("ModelInfer request is too large");
            Reference.Case c = Reference.load(TestPaths.demoModels().resolve("demo-xnnpack/1/reference.json")).cases().get(0);
            StatusRuntimeException plain = (StatusRuntimeException) org.assertj.core.api.Assertions.catchThrowable(() ->
                    GRPCInferenceServiceGrpc.newBlockingStub(notGzip).withCompression("gzip")
                            .withDeadlineAfter(30, TimeUnit.SECONDS).modelInfer(request("demo-xnnpack", c)));
            assertThat(plain.getStatus().getCode()).as("%s", plain.getStatus()).isEqualTo(Status.Code.INVALID_ARGUMENT);
            assertThat(plain.getStatus().getDescription()).contains("not gzip data");
        } finally {
            gzip.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
            notGzip.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        }
        assertThat(stub.serverReady(ServerReadyRequest.getDefaultInstance()).getReady()).isTrue();
    }

    @Test
    void stoppingTheServerLetsCallsInFlightFinishAndRefusesNewOnes(
            @Autowired io.etserve.repository.ModelRegistry registry) throws Exception {
        GrpcServer second = secondServer(1 << 20, new io.etserve.inference.InflightBytes(1 << 30));
        ManagedChannel ch = Grpc.newChannelBuilderForAddress("127.0.0.1", second.port(),
                InsecureChannelCredentials.create()).build();
        try {
            var future = GRPCInferenceServiceGrpc.newFutureStub(ch).modelInfer(probe(2500));
            ModelActivity.awaitNoIdleInstance(registry, "slow");  // in flight
            second.stop();  // returns once the call in flight is done
            assertThat(ModelActivity.idleNow(registry, "slow")).as("stop waited for the call's forward").isTrue();
            assertThat(future.get(5, TimeUnit.SECONDS).getOutputsCount()).isEqualTo(1);
            StatusRuntimeException refused = (StatusRuntimeException) org.assertj.core.api.Assertions.catchThrowable(
                    () -> GRPCInferenceServiceGrpc.newBlockingStub(ch).withDeadlineAfter(5, TimeUnit.SECONDS)
                            .serverLive(ServerLiveRequest.getDefaultInstance()));
            assertThat(refused.getStatus().getCode()).isEqualTo(Status.Code.UNAVAILABLE);
        } finally {
            ch.shutdownNow();
            second.stop();
        }
    }

    @Test
    void messagesShareTheInflightBudgetAndOneOverItIsResourceExhausted() throws Exception {
        // A server of its own whose budget (256 KiB) is under its message limit (4 MiB).
        io.etserve.inference.InflightBytes budget = new io.etserve.inference.InflightBytes(256 << 10);
        GrpcServer small = secondServer(4 << 20, budget);
        ManagedChannel ch = Grpc.newChannelBuilderForAddress("127.0.0.1", small.port(),
                InsecureChannelCredentials.create()).build();
        try {
            var client = GRPCInferenceServiceGrpc.newBlockingStub(ch).withDeadlineAfter(30, TimeUnit.SECONDS);
            StatusRuntimeException refused = (StatusRuntimeException) org.assertj.core.api.Assertions.catchThrowable(
                    () -> client.modelInfer(request("demo-portable", 16, 1 << 20)));
            assertThat(refused.getStatus().getCode()).isEqualTo(Status.Code.RESOURCE_EXHAUSTED);
            assertThat(refused.getStatus().getDescription()).contains("too many request bytes in flight");
            // What the refused call held went back; one within the budget is served, then gives its bytes back too.
            Reference ref = Reference.load(TestPaths.demoModels().resolve("demo-portable/1/reference.json"));
            assertMatches(ref, ref.cases().get(0), client.modelInfer(request("demo-portable", ref.cases().get(0))));
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (budget.held() != 0 && System.nanoTime() < until) {
                Thread.sleep(2);  // the reservation ends when the stream closes, just after the answer
            }
            assertThat(budget.held()).isZero();
            // Only inference counts: with the budget spent, readiness and metadata still answer.
            io.etserve.inference.InflightBytes.Reservation all = budget.open();
            all.grow(256 << 10);
            try {
                assertThat(client.modelReady(ModelReadyRequest.newBuilder().setName("demo-portable").build()).getReady())
                        .isTrue();
                assertThat(client.modelMetadata(ModelMetadataRequest.newBuilder().setName("demo-portable").build())
                        .getName()).isEqualTo("demo-portable");
            } finally {
                all.close();
            }
        } finally {
            ch.shutdownNow();
            small.stop();
        }
    }

    /**
     * 4 MiB in and out (affine-4mib: y = 2x + 1 over 1M floats, values exact in FP32): the request
     * is parsed over Netty's buffers (InPlaceRequests), answered exactly, and its buffers go back.
     */
    @Test
    void aLargeTensorIsReadWhereItArrivedAndAnsweredExactly() throws Exception {
        try (LargeMessages large = largeMessages()) {
            InPlaceRequests inPlace = large.inPlace();
            ManagedChannel ch = large.channel();
            var client = GRPCInferenceServiceGrpc.newBlockingStub(ch).withDeadlineAfter(60, TimeUnit.SECONDS);
            for (int round = 0; round < 2; round++) {
                float offset = round * 0.5f;
                ModelInferResponse r = client.modelInfer(affine4MiB(offset));
                assertThat(r.getOutputs(0).getShapeList()).containsExactly(1L, 1L << 20);
                java.nio.FloatBuffer y = r.getRawOutputContents(0).asReadOnlyByteBuffer()
                        .order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer();
                assertThat(y.remaining()).isEqualTo(1 << 20);
                for (int i = 0; i < y.remaining(); i++) {
                    float want = 2 * affineInput(i, offset) + 1;
                    if (y.get(i) != want) {
                        throw new AssertionError("y[" + i + "] = " + y.get(i) + ", want " + want);
                    }
                }
            }
            assertThat(inPlace.parsedInPlace()).isEqualTo(2);
            awaitNothingHeld(inPlace);
        }
    }

    /**
     * Calls that never reach their handler let their request's buffers go: one cancelled before
     * its half-close, one whose first message was unreadable (refused) before a large one came.
     */
    @Test
    void largeRequestsThatNeverReachTheirHandlerLetTheirBuffersGo() throws Exception {
        try (LargeMessages large = largeMessages()) {
            InPlaceRequests inPlace = large.inPlace();
            ManagedChannel ch = large.channel();
            var cancelled = ch.newCall(GRPCInferenceServiceGrpc.getModelInferMethod(), CallOptions.DEFAULT);
            cancelled.start(new io.grpc.ClientCall.Listener<>() {}, new io.grpc.Metadata());
            cancelled.request(1);
            cancelled.sendMessage(affine4MiB(0));  // no half-close: the handler waits for it
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (inPlace.heldCount() == 0 && System.nanoTime() < until) {
                Thread.sleep(2);
            }
            assertThat(inPlace.heldCount()).as("the server holds the parsed request").isEqualTo(1);
            cancelled.cancel("the client gives up", null);
            awaitNothingHeld(inPlace);

            MethodDescriptor<byte[], byte[]> raw = GRPCInferenceServiceGrpc.getModelInferMethod()
                    .toBuilder(RawBytes.INSTANCE, RawBytes.INSTANCE).build();
            var refused = ch.newCall(raw, CallOptions.DEFAULT.withDeadlineAfter(30, TimeUnit.SECONDS));
            java.util.concurrent.CompletableFuture<Status> closed = new java.util.concurrent.CompletableFuture<>();
            refused.start(new io.grpc.ClientCall.Listener<>() {
                @Override
                public void onClose(Status status, io.grpc.Metadata trailers) {
                    closed.complete(status);
                }
            }, new io.grpc.Metadata());
            refused.request(2);
            refused.sendMessage(new byte[] {(byte) 0xff, (byte) 0xff, 0x01});
            refused.sendMessage(affine4MiB(0).toByteArray());
            refused.halfClose();
            assertThat(closed.get(30, TimeUnit.SECONDS).getCode()).isEqualTo(Status.Code.INVALID_ARGUMENT);
            awaitNothingHeld(inPlace);
            assertThat(GRPCInferenceServiceGrpc.newBlockingStub(ch).withDeadlineAfter(60, TimeUnit.SECONDS)
                    .modelInfer(affine4MiB(0)).getRawOutputContents(0).size()).isEqualTo(4 << 20);
            awaitNothingHeld(inPlace);
        }
    }

    /** A second server taking messages of up to 16 MiB, with its own InPlaceRequests, and a channel to it. */
    private record LargeMessages(InPlaceRequests inPlace, GrpcServer server, ManagedChannel channel)
            implements AutoCloseable {
        @Override
        public void close() {
            channel.shutdownNow();
            server.stop();
        }
    }

    private LargeMessages largeMessages() {
        InPlaceRequests inPlace = new InPlaceRequests(GRPCInferenceServiceGrpc.getModelInferMethod());
        GrpcServer server = secondServer(16 << 20, new io.etserve.inference.InflightBytes(1 << 30), inPlace);
        return new LargeMessages(inPlace, server, Grpc.newChannelBuilderForAddress("127.0.0.1", server.port(),
                InsecureChannelCredentials.create()).maxInboundMessageSize(16 << 20).build());
    }

    /** Whole numbers and quarters from -512 up, shifted: exact in FP32, and so is 2x + 1. */
    private static float affineInput(int i, float offset) {
        return (i % 4096) * 0.25f - 512f + offset;
    }

    private static ModelInferRequest affine4MiB(float offset) {
        ByteBuffer x = ByteBuffer.allocate(4 << 20).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < 1 << 20; i++) {
            x.putFloat(affineInput(i, offset));
        }
        ModelInferRequest.Builder req = ModelInferRequest.newBuilder().setModelName("affine-4mib");
        req.addInputsBuilder().setName("x").setDatatype("FP32").addShape(1).addShape(1L << 20);
        return req.addRawInputContents(ByteString.copyFrom(x.array())).build();
    }

    /** The buffers go back when the handler has read the request, or at the call's end, just after the answer. */
    private static void awaitNothingHeld(InPlaceRequests inPlace) throws InterruptedException {
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (inPlace.heldCount() != 0 && System.nanoTime() < until) {
            Thread.sleep(2);
        }
        assertThat(inPlace.heldCount()).isZero();
    }

    /**
     * A second server over this context's services, started, so the context's own keeps serving
     * the other tests: its own message limit and in-flight budget.
     */
    private GrpcServer secondServer(int maxMessageBytes, io.etserve.inference.InflightBytes budget) {
        return secondServer(maxMessageBytes, budget, new InPlaceRequests(GRPCInferenceServiceGrpc.getModelInferMethod()));
    }

    private GrpcServer secondServer(int maxMessageBytes, io.etserve.inference.InflightBytes budget,
            InPlaceRequests inPlace) {
        io.etserve.repository.ModelRegistry registry = context.getBean(io.etserve.repository.ModelRegistry.class);
        io.etserve.health.ProbeHealth probes = context.getBean(io.etserve.health.ProbeHealth.class);
        GrpcServer server = new GrpcServer("127.0.0.1", 0, maxMessageBytes, 4, 2, java.time.Duration.ofSeconds(20),
                new InferenceGrpcService(registry, context.getBean(io.etserve.execution.InferenceService.class),
                        context.getBean(io.etserve.health.ServerReadiness.class), probes,
                        new io.etserve.protocol.DecodeLimits(1 << 20, 16),
                        context.getBean(io.etserve.protocol.PublicMessages.class), "test", List.of(),
                        new io.etserve.metrics.ProtocolMetrics(new io.micrometer.core.instrument.simple.SimpleMeterRegistry(),
                                registry::knows),
                        new io.etserve.repository.RepositoryControl(registry, io.etserve.repository.RepositoryControl.Mode.STARTUP),
                        context.getBean(io.etserve.triton.TritonExtensions.class),
                        new io.etserve.runtime.DirectBufferPool(1 << 20), inPlace,
                        context.getBean(io.etserve.sharedmemory.SharedMemoryRegions.class), budget),
                EventLoopCalls.NONE, probes, budget, inPlace);
        server.start();
        return server;
    }

    /** A reference case as a raw-contents request. */
    static ModelInferRequest request(String model, Reference.Case c) {
        ModelInferRequest.Builder req = ModelInferRequest.newBuilder().setModelName(model).setId("case");
        for (Reference.TensorValue in : c.inputs()) {
            req.addInputsBuilder().setName(in.name()).setDatatype(in.datatype())
                    .addAllShape(java.util.Arrays.stream(in.shape()).boxed().toList());
            req.addRawInputContents(ByteString.copyFrom(in.bytes()));
        }
        return req.build();
    }

    /** The probe program: x = [0, host milliseconds to hold the instance]. */
    private static ModelInferRequest probe(float hostMillis) {
        ModelInferRequest.Builder req = ModelInferRequest.newBuilder().setModelName("slow");
        req.addInputsBuilder().setName("x").setDatatype("FP32").addShape(2)
                .setContents(InferTensorContents.newBuilder().addFp32Contents(0).addFp32Contents(hostMillis));
        return req.build();
    }

    private static ModelInferRequest request(String model, int features, int rawBytes) {
        ModelInferRequest.Builder req = ModelInferRequest.newBuilder().setModelName(model);
        req.addInputsBuilder().setName("x").setDatatype("FP32").addShape(1).addShape(features);
        req.addRawInputContents(ByteString.copyFrom(new byte[rawBytes]));
        return req.build();
    }

    private StatusRuntimeException assertStatus(Status.Code code, String messagePart, Object request) {
        StatusRuntimeException e = (StatusRuntimeException) org.assertj.core.api.Assertions.catchThrowable(() -> {
            if (request instanceof ModelInferRequest r) {
                stub.modelInfer(r);
            } else {
                stub.modelMetadata((ModelMetadataRequest) request);
            }
        });
        assertThat(e).as("a %s status", code).isNotNull();
        assertThat(e.getStatus().getCode()).isEqualTo(code);
        assertThat(e.getStatus().getDescription()).contains(messagePart);
        return e;
    }

    static void assertMatches(Reference ref, Reference.Case c, ModelInferResponse res) {
        assertThat(res.getOutputsCount()).isEqualTo(c.outputs().size());
        for (int i = 0; i < c.outputs().size(); i++) {
            Reference.TensorValue want = c.outputs().get(i);
            assertThat(res.getOutputs(i).getName()).isEqualTo(want.name());
            assertThat(res.getOutputs(i).getDatatype()).isEqualTo(want.datatype());
            assertThat(res.getOutputs(i).getShapeList()).containsExactlyElementsOf(
                    java.util.Arrays.stream(want.shape()).boxed().toList());
            ByteBuffer got = res.getRawOutputContents(i).asReadOnlyByteBuffer().order(ByteOrder.LITTLE_ENDIAN);
            assertThat(got.remaining()).isEqualTo(want.data().size() * 4);
            for (int k = 0; k < want.data().size(); k++) {
                float actual = got.getFloat(k * 4);
                assertThat(ref.close(actual, want.data().get(k))).as("%s[%d] = %s, reference %s", want.name(), k,
                        actual, want.data().get(k)).isTrue();
            }
        }
    }
}
