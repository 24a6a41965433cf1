package io.etserve.rest;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.protobuf.ByteString;
import io.etserve.grpc.GrpcServer;
import io.etserve.grpc.protocol.CudaSharedMemoryRegisterRequest;
import io.etserve.grpc.protocol.CudaSharedMemoryStatusRequest;
import io.etserve.grpc.protocol.CudaSharedMemoryUnregisterRequest;
import io.etserve.grpc.protocol.GRPCInferenceServiceGrpc;
import io.etserve.grpc.protocol.InferParameter;
import io.etserve.grpc.protocol.ModelInferRequest;
import io.etserve.grpc.protocol.ModelInferResponse;
import io.etserve.grpc.protocol.SystemSharedMemoryRegisterRequest;
import io.etserve.grpc.protocol.SystemSharedMemoryStatusRequest;
import io.etserve.grpc.protocol.SystemSharedMemoryStatusResponse;
import io.etserve.grpc.protocol.SystemSharedMemoryUnregisterRequest;
import io.etserve.inference.InflightBytes;
import io.etserve.support.Http;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.RawConnection;
import io.etserve.support.Reference;
import io.etserve.support.RequestMutator;
import io.etserve.support.TestPaths;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assertions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import tools.jackson.databind.JsonNode;

/**
 * Triton's system shared-memory extension over real HTTP and gRPC, on real POSIX shared-memory
 * objects (files under /dev/shm, as a client's shm_open makes them) and the real runtime: inputs
 * read from a region, outputs written into one, checked against PyTorch's reference; the
 * registration calls; and the refusals of references that do not fit.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
@ExtendWith(OutputCaptureExtension.class)
class SharedMemoryApiTest {

    static final ModelRepositoryFixture REPO = ModelRepositoryFixture.create("etserve-shm-")
            .copy(TestPaths.demoModels(), "demo-portable");
    static final Reference REF = Reference.load(TestPaths.demoModels().resolve("demo-portable/1/reference.json"));
    static final Path SHM = Path.of("/dev/shm");
    static final long SEED = Long.getLong("etserve.test.mutation-seed", 20261207L);

    @DynamicPropertySource
    static void properties(DynamicPropertyRegistry r) {
        r.add("etserve.model-repository", () -> REPO.root().toString());
        r.add("management.server.port", () -> "0");
        r.add("etserve.shared-memory.enabled", () -> "true");
    }

    @Value("${local.server.port}")
    int port;

    @Autowired
    GrpcServer grpcServer;

    @Autowired
    InflightBytes inflight;

    Http http;
    ManagedChannel channel;
    GRPCInferenceServiceGrpc.GRPCInferenceServiceBlockingStub grpc;
    /** This test's objects: a unique prefix, so parallel runs on one host do not meet. */
    String prefix;
    Path inObject;
    Path outObject;

    @BeforeEach
    void setUp() throws IOException {
        http = Http.local(port);
        channel = Grpc.newChannelBuilderForAddress("127.0.0.1", grpcServer.port(), InsecureChannelCredentials.create())
                .build();
        grpc = GRPCInferenceServiceGrpc.newBlockingStub(channel);
        prefix = "etserve-test-" + UUID.randomUUID();
        // The input at byte 128 of its object, after bytes that are not it.
        ByteBuffer in = ByteBuffer.allocate(128 + 64).order(ByteOrder.LITTLE_ENDIAN);
        in.put(new byte[128]).put(input().bytes());
        inObject = Files.write(SHM.resolve(prefix + "-in"), in.array());
        outObject = Files.write(SHM.resolve(prefix + "-out"), new byte[256]);
    }

    @AfterEach
    void tearDown() throws IOException {
        http.post("/v2/systemsharedmemory/unregister", "");
        channel.shutdownNow();
        Files.deleteIfExists(inObject);
        Files.deleteIfExists(outObject);
    }

    static Reference.TensorValue input() {
        return REF.cases().get(0).inputs().get(0);
    }

    static Reference.TensorValue expected() {
        return REF.cases().get(0).outputs().get(0);
    }

    void register(String name, Path object, long offset, long byteSize) {
        Http.Response r = http.post("/v2/systemsharedmemory/region/" + name + "/register",
                "{\"key\":\"/" + object.getFileName() + "\",\"offset\":" + offset + ",\"byte_size\":" + byteSize + "}");
        assertThat(r.status()).as(r.text()).isEqualTo(200);
        assertThat(r.body()).as("Triton's answer to a change: no body").isEmpty();
    }

    /** The output's 4 floats as written at {@code at} in the output object. */
    float[] outputAt(int at) throws IOException {
        ByteBuffer bytes = ByteBuffer.wrap(Files.readAllBytes(outObject)).order(ByteOrder.LITTLE_ENDIAN);
        float[] out = new float[4];
        for (int i = 0; i < 4; i++) {
            out[i] = bytes.getFloat(at + 4 * i);
        }
        return out;
    }

    void assertReference(float[] actual) {
        assertThat(actual).hasSize(expected().data().size());
        for (int i = 0; i < actual.length; i++) {
            double want = expected().data().get(i);
            assertThat(REF.close(actual[i], want)).as("element %d: %s vs %s", i, actual[i], want).isTrue();
        }
    }

    /** demo-portable's successful and failed requests in Triton's statistics. */
    long[] successAndFailures() {
        JsonNode stats = http.get("/v2/models/demo-portable/stats").json().path("model_stats").get(0)
                .path("inference_stats");
        return new long[] {stats.path("success").path("count").asLong(), stats.path("fail").path("count").asLong()};
    }

    String shmInput(String region, long byteSize, long offset) {
        return "{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,16],\"parameters\":{\"shared_memory_region\":\""
                + region + "\",\"shared_memory_byte_size\":" + byteSize + ",\"shared_memory_offset\":" + offset + "}}";
    }

    Http.Response infer(String body) {
        return http.post("/v2/models/demo-portable/infer", body);
    }

    @Test
    void inputFromARegionAndOutputIntoOneOverRest() throws IOException {
        register("in", inObject, 64, 128);
        register("out", outObject, 32, 200);
        assertThat(http.get("/v2/systemsharedmemory/status").json().toString()).isEqualTo(
                "[{\"name\":\"in\",\"key\":\"/" + prefix + "-in\",\"offset\":64,\"byte_size\":128},"
                        + "{\"name\":\"out\",\"key\":\"/" + prefix + "-out\",\"offset\":32,\"byte_size\":200}]");

        Http.Response r = infer("{\"inputs\":[" + shmInput("in", 64, 64) + "],\"outputs\":[{\"name\":\"y\","
                + "\"parameters\":{\"shared_memory_region\":\"out\",\"shared_memory_byte_size\":16,"
                + "\"shared_memory_offset\":8,\"binary_data\":false}}]}");

        assertThat(r.status()).as(r.text()).isEqualTo(200);
        // As Triton answers an output in shared memory: name, datatype and shape; no data, no parameters.
        assertThat(r.json().path("outputs").toString()).isEqualTo("[{\"name\":\"y\",\"datatype\":\"FP32\",\"shape\":[1,4]}]");
        assertReference(outputAt(32 + 8));

        // The input from shared memory, the output in the answer.
        Http.Response json = infer("{\"inputs\":[" + shmInput("in", 64, 64) + "]}");
        assertThat(json.status()).as(json.text()).isEqualTo(200);
        float[] data = new float[4];
        for (int i = 0; i < 4; i++) {
            data[i] = json.json().path("outputs").get(0).path("data").get(i).floatValue();
        }
        assertReference(data);
    }

    /** Triton's C++ client (perf_analyzer's) posts the registration as libcurl's default form type. */
    @Test
    void aRegistrationPostedAsAFormIsReadAsTheJsonItIs() {
        Http.Response r = http.post("/v2/systemsharedmemory/region/form/register", ("{\"key\":\"/"
                + inObject.getFileName() + "\",\"offset\":0,\"byte_size\":64}").getBytes(StandardCharsets.UTF_8),
                Map.of("Content-Type", "application/x-www-form-urlencoded"));
        assertThat(r.status()).as(r.text()).isEqualTo(200);
        assertThat(http.get("/v2/systemsharedmemory/region/form/status").json().toString()).isEqualTo(
                "[{\"name\":\"form\",\"key\":\"/" + inObject.getFileName() + "\",\"offset\":0,\"byte_size\":64}]");
    }

    @Test
    void inputFromARegionAndOutputIntoOneOverGrpc() throws IOException {
        grpc.systemSharedMemoryRegister(SystemSharedMemoryRegisterRequest.newBuilder().setName("in")
                .setKey("/" + inObject.getFileName()).setOffset(128).setByteSize(64).build());
        grpc.systemSharedMemoryRegister(SystemSharedMemoryRegisterRequest.newBuilder().setName("out")
                .setKey("/" + outObject.getFileName()).setByteSize(256).build());
        SystemSharedMemoryStatusResponse status = grpc.systemSharedMemoryStatus(
                SystemSharedMemoryStatusRequest.newBuilder().setName("in").build());
        assertThat(status.getRegionsMap()).containsOnlyKeys("in");
        assertThat(status.getRegionsOrThrow("in").getOffset()).isEqualTo(128);
        assertThat(grpc.systemSharedMemoryStatus(SystemSharedMemoryStatusRequest.getDefaultInstance()).getRegionsMap())
                .containsOnlyKeys("in", "out");

        ModelInferResponse response = grpc.modelInfer(ModelInferRequest.newBuilder().setModelName("demo-portable")
                .addInputs(ModelInferRequest.InferInputTensor.newBuilder().setName("x").setDatatype("FP32")
                        .addShape(1).addShape(16)
                        .putParameters("shared_memory_region", string("in"))
                        .putParameters("shared_memory_byte_size", int64(64)))
                .addOutputs(ModelInferRequest.InferRequestedOutputTensor.newBuilder().setName("y")
                        .putParameters("shared_memory_region", string("out"))
                        .putParameters("shared_memory_byte_size", int64(16))
                        .putParameters("shared_memory_offset", int64(100)))
                .build());

        assertThat(response.getOutputs(0).getShapeList()).containsExactly(1L, 4L);
        // One raw section per output, empty for one in shared memory: the indexes stay the outputs'.
        assertThat(response.getRawOutputContentsList()).containsExactly(ByteString.EMPTY);
        assertReference(outputAt(100));
        // The input's 64 bytes were held in the in-flight budget until the call's buffers went back.
        long deadline = System.nanoTime() + 5_000_000_000L;
        while (inflight.held() != 0 && System.nanoTime() < deadline) {
            Thread.onSpinWait();
        }
        assertThat(inflight.held()).isZero();

        grpc.systemSharedMemoryUnregister(SystemSharedMemoryUnregisterRequest.newBuilder().setName("in").build());
        StatusRuntimeException gone = Assertions.assertThrows(StatusRuntimeException.class,
                () -> grpc.systemSharedMemoryStatus(SystemSharedMemoryStatusRequest.newBuilder().setName("in").build()));
        assertThat(gone.getStatus().getCode()).isEqualTo(Status.Code.NOT_FOUND);

        // On a host without a CUDA device, CUDA shared memory is not served: nothing to list or
        // unregister, a registration UNIMPLEMENTED (REST 501) with the reason.
        assertThat(grpc.cudaSharedMemoryStatus(CudaSharedMemoryStatusRequest.getDefaultInstance()).getRegionsMap())
                .isEmpty();
        grpc.cudaSharedMemoryUnregister(CudaSharedMemoryUnregisterRequest.getDefaultInstance());
        StatusRuntimeException cuda = Assertions.assertThrows(StatusRuntimeException.class,
                () -> grpc.cudaSharedMemoryRegister(CudaSharedMemoryRegisterRequest.newBuilder().setName("c")
                        .setRawHandle(ByteString.copyFrom(new byte[64])).setByteSize(4).build()));
        assertThat(cuda.getStatus().getCode()).isEqualTo(Status.Code.UNIMPLEMENTED);
        assertThat(cuda.getStatus().getDescription()).startsWith("CUDA shared memory is not served here:");
        Http.Response rest = http.post("/v2/cudasharedmemory/region/c/register",
                "{\"raw_handle\": {\"b64\": \"" + "A".repeat(88) + "\"}, \"device_id\": 0, \"byte_size\": 4}");
        assertThat(rest.status()).isEqualTo(501);
        assertThat(rest.json().path("error").asString()).startsWith("CUDA shared memory is not served here:");
        // A system region's name is not a CUDA region's.
        assertThat(http.get("/v2/cudasharedmemory/region/out/status").json().path("error").asString())
                .isEqualTo("The region named 'out' is registered as system shared memory, not CUDA shared memory");
    }

    @Test
    void referencesThatDoNotFitAreRefusedWithTheReason() {
        register("in", inObject, 128, 64);
        register("out", outObject, 0, 256);
        assertRefused(infer("{\"inputs\":[" + shmInput("nope", 64, 0) + "]}"), 400,
                "Input 'x' names shared memory region 'nope', which is not registered.");
        assertRefused(infer("{\"inputs\":[" + shmInput("in", 60, 0) + "]}"), 400,
                "Input 'x' has shared_memory_byte_size 60, but 16 FP32 elements (shape [1, 16]) need 64 bytes.");
        assertRefused(infer("{\"inputs\":[" + shmInput("in", 64, 4) + "]}"), 400,
                "Input 'x' reaches past shared memory region 'in': shared_memory_offset 4 + shared_memory_byte_size 64"
                        + " > the region's 64 bytes.");
        long[] before = successAndFailures();
        assertRefused(infer("{\"inputs\":[" + shmInput("in", 64, 0) + "],\"outputs\":[{\"name\":\"y\",\"parameters\":"
                + "{\"shared_memory_region\":\"out\",\"shared_memory_byte_size\":15}}]}"), 400,
                "Requested output 'y' holds 16 bytes, more than the 15 of its shared_memory_byte_size.");
        // The model ran, but the request failed: Triton's statistics count a failure, not a success.
        long[] after = successAndFailures();
        assertThat(after[0] - before[0]).as("successes").isZero();
        assertThat(after[1] - before[1]).as("failures").isEqualTo(1);
        assertRefused(infer("{\"inputs\":[" + shmInput("in", 64, 0).replace("\"parameters\"", "\"data\":" + input().json().path("data") + ",\"parameters\"")
                + "]}"), 400, "Input 'x' has 'data' and shared_memory_region; give one of them.");
        assertRefused(http.post("/v2/systemsharedmemory/region/x/register", "{\"key\":\"/../etc/passwd\",\"byte_size\":1}"),
                400, "Shared memory key '/../etc/passwd' is not the name of a POSIX shared-memory object: '/' then 1 to"
                        + " 255 characters, none of them '/' (not '.' or '..').");
        assertRefused(http.post("/v2/systemsharedmemory/region/x/register", "{\"key\":\"/k\"}"), 400,
                "Shared memory register request has no 'byte_size' field.");
        assertRefused(http.post("/v2/systemsharedmemory/region/in/register",
                "{\"key\":\"/" + inObject.getFileName() + "\",\"byte_size\":1}"), 400,
                "Shared memory region 'in' was not registered: a region of that name is registered already;"
                        + " unregister it first.");
        assertRefused(http.get("/v2/systemsharedmemory/region/x/status"), 404,
                "Unable to find system shared memory region: 'x'");

        // After every refusal, the regions still serve the reference answer.
        assertThat(infer("{\"inputs\":[" + shmInput("in", 64, 0) + "]}").status()).isEqualTo(200);
        http.post("/v2/systemsharedmemory/region/in/unregister", "");
        assertRefused(infer("{\"inputs\":[" + shmInput("in", 64, 0) + "]}"), 400,
                "Input 'x' names shared memory region 'in', which is not registered.");
    }

    /**
     * Seeded variants of a valid shared-memory request and of a registration (values replaced,
     * removed, added; bytes flipped and cut): each is answered or refused with a client's status
     * and a message that says what is wrong, never a 5xx or an ERROR in the log, and the regions
     * still give the reference answer after. Replay a seed with {@code -Detserve.test.mutation-seed=N}.
     */
    @Test
    void mutatedSharedMemoryRequestsAreAnsweredOrRefusedClearly(CapturedOutput output) throws IOException {
        register("in", inObject, 0, 192);
        register("out", outObject, 0, 256);
        JsonNode valid = Http.JSON.readTree("{\"inputs\":[" + shmInput("in", 64, 128) + "],\"outputs\":[{\"name\":"
                + "\"y\",\"parameters\":{\"shared_memory_region\":\"out\",\"shared_memory_byte_size\":16,"
                + "\"shared_memory_offset\":8}}]}");
        JsonNode registration = Http.JSON.readTree("{\"key\":\"/" + outObject.getFileName() + "\",\"offset\":0,"
                + "\"byte_size\":64}");
        Mutated sent = sendMutated(port, http, "systemsharedmemory", valid, registration, 8);
        assertThat(sent.problems()).as("seed %d", SEED).isEmpty();
        assertThat(sent.answered()).as("answered variants").isPositive();
        assertThat(output.getAll()).doesNotContain(" ERROR ");
        Files.write(outObject, new byte[256]);
        assertThat(infer(Http.JSON.writeValueAsString(valid)).status()).isEqualTo(200);
        assertReference(outputAt(8));
    }

    /** What {@link #sendMutated} saw: each variant answered or refused unclearly, and how many were answered. */
    record Mutated(List<String> problems, int answered) {}

    /**
     * 400 variants, from {@link #SEED}, of {@code request} (an inference on demo-portable) and of
     * {@code registration} (a register body of the {@code extension}, "systemsharedmemory" or
     * "cudasharedmemory", each under a name of its own and unregistered after): values replaced,
     * removed, added in the JSON tree, bytes flipped and cut in its text. {@code requestTenths} of
     * them change the request, the rest the registration.
     */
    static Mutated sendMutated(int port, Http http, String extension, JsonNode request, JsonNode registration,
            int requestTenths) throws IOException {
        RequestMutator mutator = new RequestMutator(SEED);
        List<String> problems = new ArrayList<>();
        int answered = 0;
        for (int i = 0; i < 400; i++) {
            int kind = mutator.random().nextInt(10);
            String path = "/v2/models/demo-portable/infer";
            byte[] body;
            if (kind < requestTenths - 2) {
                body = Http.JSON.writeValueAsBytes(mutator.mutate(request));
            } else if (kind < requestTenths) {
                body = mutator.mutate(Http.JSON.writeValueAsBytes(request));
            } else {
                path = "/v2/" + extension + "/region/m" + i + "/register";
                body = kind < 9 ? Http.JSON.writeValueAsBytes(mutator.mutate(registration))
                        : mutator.mutate(Http.JSON.writeValueAsBytes(registration));
            }
            RawConnection.Response r = MutatedRequestsApiTest.post(port, path, "application/json", Map.of(), body);
            String problem = MutatedRequestsApiTest.problem(r);
            if (problem != null) {
                problems.add("#" + i + " " + path + " " + problem + "; sent "
                        + new String(body, StandardCharsets.ISO_8859_1));
            } else if (r.status() == 200) {
                answered++;
            }
            if (path.endsWith("/register")) {
                http.post("/v2/" + extension + "/region/m" + i + "/unregister", "");
            }
        }
        return new Mutated(problems, answered);
    }

    static void assertRefused(Http.Response r, int status, String error) {
        assertThat(r.status()).as(r.text()).isEqualTo(status);
        assertThat(r.json().path("error").asString()).isEqualTo(error);
    }

    static InferParameter string(String s) {
        return InferParameter.newBuilder().setStringParam(s).build();
    }

    static InferParameter int64(long n) {
        return InferParameter.newBuilder().setInt64Param(n).build();
    }
}
