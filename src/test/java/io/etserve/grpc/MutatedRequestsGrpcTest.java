package io.etserve.grpc;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.protobuf.ByteString;
import io.etserve.grpc.protocol.GRPCInferenceServiceGrpc;
import io.etserve.grpc.protocol.InferParameter;
import io.etserve.grpc.protocol.ModelInferRequest;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.Reference;
import io.etserve.support.RequestMutator;
import io.etserve.support.TestPaths;
import io.grpc.CallOptions;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.ClientCalls;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Seeded, random variants of a valid ModelInfer request over real gRPC: fields changed (model
 * names and versions, datatypes, shapes, tensor contents of the wrong kind or count, raw
 * contents added or dropped, unknown parameters) and serialized messages with bytes flipped, cut
 * or added. Each answer is the model's result or a refusal whose status is the client's
 * (INVALID_ARGUMENT, NOT_FOUND, ...) with a description, never INTERNAL or UNKNOWN, never an
 * ERROR in the log; and the model still gives the reference answer after all of them. Replay one
 * seed with {@code -Detserve.test.mutation-seed=N}.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
@ExtendWith(OutputCaptureExtension.class)
class MutatedRequestsGrpcTest {

    static final ModelRepositoryFixture REPO = ModelRepositoryFixture.create("etserve-grpc-mutated-")
            .copy(TestPaths.demoModels(), "demo-portable")
            .copy(TestPaths.demoModels(), "demo-xnnpack");
    static final Reference REF = Reference.load(TestPaths.demoModels().resolve("demo-portable/1/reference.json"));
    static final long SEED = Long.getLong("etserve.test.mutation-seed", 20261207L);
    static final int REQUESTS = 500;
    /** The statuses that are the caller's to fix: what a refusal of a malformed request may be. */
    static final Set<Status.Code> CLIENTS = Set.of(Status.Code.INVALID_ARGUMENT, Status.Code.NOT_FOUND,
            Status.Code.OUT_OF_RANGE, Status.Code.RESOURCE_EXHAUSTED, Status.Code.FAILED_PRECONDITION);

    @DynamicPropertySource
    static void properties(DynamicPropertyRegistry r) {
        r.add("etserve.model-repository", () -> REPO.root().toString());
        r.add("etserve.grpc.max-message-size", () -> "256KB");
        r.add("management.server.port", () -> "0");
    }

    @Autowired
    GrpcServer server;

    static final List<String> NAMES = List.of("", "x", "y", "demo-portable", "demo-xnnpack", "..", "../etc", "\u0000",
            "a".repeat(5000), "\u00e9", "demo-portable/1");
    static final List<String> DATATYPES = List.of("FP32", "FP16", "BF16", "INT64", "BYTES", "BOOL", "UINT8", "", "fp32",
            "FP64", "x".repeat(100));
    static final List<long[]> SHAPES = List.of(new long[] {1, 16}, new long[] {16}, new long[] {1, 16, 1}, new long[0],
            new long[] {0}, new long[] {-1, 16}, new long[] {1, 1L << 40}, new long[] {1L << 62, 1L << 62},
            ones(40),
            new long[] {2, 16}, new long[] {1, 15}, new long[] {Long.MIN_VALUE});

    @Test
    void everyVariantIsAnsweredOrRefusedAsTheClientsAndTheModelStillAnswersRight(CapturedOutput output)
            throws InterruptedException {
        ManagedChannel channel = Grpc.newChannelBuilderForAddress("127.0.0.1", server.port(),
                InsecureChannelCredentials.create()).build();
        try {
            MethodDescriptor<byte[], byte[]> raw = GRPCInferenceServiceGrpc.getModelInferMethod()
                    .toBuilder(GrpcApiTest.RawBytes.INSTANCE, GrpcApiTest.RawBytes.INSTANCE).build();
            RequestMutator mutator = new RequestMutator(SEED);
            Random random = mutator.random();
            List<String> problems = new ArrayList<>();
            int answered = 0;
            for (int i = 0; i < REQUESTS; i++) {
                byte[] request;
                String what;
                if (random.nextInt(10) < 6) {
                    ModelInferRequest changed = mutate(valid(random.nextBoolean()), random);
                    request = changed.toByteArray();
                    what = changed.toString();
                } else {
                    request = mutator.mutate(valid(random.nextBoolean()).toByteArray());
                    what = request.length + " changed bytes";
                }
                try {
                    ClientCalls.blockingUnaryCall(channel, raw, CallOptions.DEFAULT.withDeadlineAfter(30,
                            TimeUnit.SECONDS), request);
                    answered++;
                } catch (StatusRuntimeException e) {
                    Status s = e.getStatus();
                    if (!CLIENTS.contains(s.getCode()) || s.getDescription() == null || s.getDescription().isBlank()) {
                        problems.add("#" + i + " " + s + "; sent " + what.substring(0, Math.min(what.length(), 400)));
                    }
                }
            }
            assertThat(problems).as("seed %d", SEED).isEmpty();
            assertThat(answered).as("answered variants").isPositive();
            assertThat(output.getAll()).doesNotContain(" ERROR ");
            GrpcApiTest.assertMatches(REF, REF.cases().get(0), GRPCInferenceServiceGrpc.newBlockingStub(channel)
                    .withDeadlineAfter(30, TimeUnit.SECONDS).modelInfer(GrpcApiTest.request("demo-portable",
                            REF.cases().get(0))));
        } finally {
            channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        }
    }

    /** The reference's input, as raw contents or as typed contents. */
    static ModelInferRequest valid(boolean rawContents) {
        Reference.TensorValue x = REF.cases().get(0).inputs().get(0);
        ModelInferRequest.Builder b = ModelInferRequest.newBuilder().setModelName("demo-portable").setId("m");
        var input = b.addInputsBuilder().setName(x.name()).setDatatype(x.datatype()).addShape(1).addShape(16);
        if (rawContents) {
            b.addRawInputContents(ByteString.copyFrom(x.bytes()));
        } else {
            x.data().forEach(v -> input.getContentsBuilder().addFp32Contents(v.floatValue()));
        }
        b.addOutputsBuilder().setName("y");
        return b.build();
    }

    /** One to three changes of the kinds a client gets wrong. */
    static ModelInferRequest mutate(ModelInferRequest request, Random random) {
        ModelInferRequest.Builder b = request.toBuilder();
        for (int n = 1 + random.nextInt(3); n > 0; n--) {
            var input = b.getInputsCount() > 0 ? b.getInputsBuilder(0) : b.addInputsBuilder();
            switch (random.nextInt(13)) {
                case 0 -> b.setModelName(pick(NAMES, random));
                case 1 -> b.setModelVersion(pick(List.of("", "1", "2", "-1", "01", "99999999999999999999", "a"), random));
                case 2 -> input.setDatatype(pick(DATATYPES, random));
                case 3 -> input.clearShape().addAllShape(java.util.Arrays.stream(pick(SHAPES, random)).boxed().toList());
                case 4 -> input.setName(pick(NAMES, random));
                case 5 -> {
                    byte[] bytes = new byte[pick(List.of(0, 1, 63, 64, 65, 128, 4096), random)];
                    random.nextBytes(bytes);
                    b.addRawInputContents(ByteString.copyFrom(bytes));
                }
                case 6 -> b.clearRawInputContents();
                case 7 -> {
                    for (int k = pick(List.of(1, 16, 17), random); k > 0; k--) {
                        input.getContentsBuilder().addInt64Contents(random.nextLong());
                    }
                }
                case 8 -> input.getContentsBuilder().addBytesContents(ByteString.copyFromUtf8("abc"));
                case 9 -> b.addInputsBuilder().setName(pick(NAMES, random)).setDatatype(pick(DATATYPES, random))
                        .addAllShape(java.util.Arrays.stream(pick(SHAPES, random)).boxed().toList());
                case 10 -> b.addOutputsBuilder().setName(pick(NAMES, random));
                case 11 -> b.putParameters(pick(List.of("binary_data_output", "priority", "timeout", "sequence_id", "x",
                        ""), random), InferParameter.newBuilder().setInt64Param(pick(List.of(-1L, 0L, 1L << 62),
                                random)).build());
                default -> {
                    for (int k = pick(List.of(1, 16, 100_000), random); k > 0; k--) {
                        input.getContentsBuilder().addFp32Contents(Float.NaN);
                    }
                }
            }
        }
        return b.build();
    }

    private static long[] ones(int rank) {
        long[] shape = new long[rank];
        java.util.Arrays.fill(shape, 1);
        return shape;
    }

    private static <T> T pick(List<T> from, Random random) {
        return from.get(random.nextInt(from.size()));
    }
}
