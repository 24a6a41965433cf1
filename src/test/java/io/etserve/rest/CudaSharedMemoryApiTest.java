package io.etserve.rest;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.protobuf.ByteString;
import io.etserve.config.EtServeProperties;
import io.etserve.cuda.CudaException;
import io.etserve.grpc.GrpcServer;
import io.etserve.grpc.protocol.CudaSharedMemoryRegisterRequest;
import io.etserve.grpc.protocol.CudaSharedMemoryStatusRequest;
import io.etserve.grpc.protocol.CudaSharedMemoryStatusResponse;
import io.etserve.grpc.protocol.CudaSharedMemoryUnregisterRequest;
import io.etserve.grpc.protocol.GRPCInferenceServiceGrpc;
import io.etserve.grpc.protocol.InferTensorContents;
import io.etserve.grpc.protocol.ModelInferRequest;
import io.etserve.grpc.protocol.ServerMetadataRequest;
import io.etserve.health.CudaFaultMonitor;
import io.etserve.sharedmemory.HostAllocations;
import io.etserve.sharedmemory.SharedMemoryRegions;
import io.etserve.support.Http;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.Reference;
import io.etserve.support.TestPaths;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.Base64;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assertions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.TestConfiguration;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Primary;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import tools.jackson.databind.JsonNode;

/**
 * Triton's CUDA shared-memory calls through both protocols, end to end but for the device: the
 * regions' memory is a pretend device's ({@link HostAllocations}, behind the real registry), so
 * that registration bodies, status answers, inputs read at an offset, outputs written, and the
 * refusals are checked on a host without a GPU. The real device memory, through Triton's own
 * client, is checked on the GPU host (scripts/gpu/cuda-shm.sh).
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
@ExtendWith(OutputCaptureExtension.class)
class CudaSharedMemoryApiTest {

    static final ModelRepositoryFixture REPO = ModelRepositoryFixture.create("etserve-cuda-shm-")
            .copy(TestPaths.demoModels(), "demo-portable");
    static final Reference REF = Reference.load(TestPaths.demoModels().resolve("demo-portable/1/reference.json"));
    static final HostAllocations DEVICE = new HostAllocations();

    @DynamicPropertySource
    static void properties(DynamicPropertyRegistry r) {
        r.add("etserve.model-repository", () -> REPO.root().toString());
        r.add("management.server.port", () -> "0");
        r.add("etserve.shared-memory.enabled", () -> "true");
    }

    /** The service's registry with the pretend device's opener in place of CudaIpc. */
    @TestConfiguration
    static class PretendDevice {
        @Bean
        @Primary
        SharedMemoryRegions pretendDeviceRegions(EtServeProperties props, CudaFaultMonitor faults) {
            return new SharedMemoryRegions(SharedMemoryRegions.POSIX_SHARED_MEMORY, true,
                    props.sharedMemory().maxRegions(), props.inference().maxRequestSize().toBytes(), DEVICE, null,
                    faults);
        }
    }

    /** The input read from region "in" at 128, the output written into region "out" at 40. */
    static final String IN_AND_OUT = "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,16],"
            + "\"parameters\":{\"shared_memory_region\":\"in\",\"shared_memory_byte_size\":64,"
            + "\"shared_memory_offset\":128}}],\"outputs\":[{\"name\":\"y\",\"parameters\":{"
            + "\"shared_memory_region\":\"out\",\"shared_memory_byte_size\":16,\"shared_memory_offset\":40}}]}";

    @Value("${local.server.port}")
    int port;

    @Value("${local.management.port}")
    int managementPort;

    @Autowired
    GrpcServer grpcServer;

    Http http;
    ManagedChannel channel;
    GRPCInferenceServiceGrpc.GRPCInferenceServiceBlockingStub grpc;

    @BeforeEach
    void setUp() {
        http = Http.local(port);
        channel = Grpc.newChannelBuilderForAddress("127.0.0.1", grpcServer.port(), InsecureChannelCredentials.create())
                .build();
        grpc = GRPCInferenceServiceGrpc.newBlockingStub(channel);
    }

    @AfterEach
    void tearDown() {
        DEVICE.failCopies(null);
        http.post("/v2/cudasharedmemory/unregister", "");
        channel.shutdownNow();
    }

    /** An allocation holding the reference's input at byte {@code at}, after bytes that are not it. */
    static byte[] inputAllocation(int at) {
        byte[] handle = DEVICE.allocate(at + 64, 0);
        ByteBuffer.wrap(DEVICE.bytes(handle), at, 64).put(REF.cases().get(0).inputs().get(0).bytes());
        return handle;
    }

    Http.Response register(String name, byte[] handle, long byteSize) {
        return http.post("/v2/cudasharedmemory/region/" + name + "/register", "{\"raw_handle\":{\"b64\":\""
                + Base64.getEncoder().encodeToString(handle) + "\"},\"device_id\":0,\"byte_size\":" + byteSize + "}");
    }

    @Test
    void inputFromDeviceMemoryAtAnOffsetAndOutputIntoItOverRest() {
        byte[] in = inputAllocation(128);
        byte[] out = DEVICE.allocate(256, 0);
        assertThat(http.get("/v2").json().path("extensions").toString()).contains("\"cuda_shared_memory\"");
        Http.Response r = register("in", in, 128 + 64);
        assertThat(r.status()).as(r.text()).isEqualTo(200);
        assertThat(r.body()).as("Triton's answer to a change: no body").isEmpty();
        assertThat(register("out", out, 256).status()).isEqualTo(200);
        assertThat(http.get("/v2/cudasharedmemory/status").json().toString()).isEqualTo(
                "[{\"name\":\"in\",\"device_id\":0,\"byte_size\":192},{\"name\":\"out\",\"device_id\":0,\"byte_size\":256}]");
        assertThat(http.get("/v2/cudasharedmemory/region/out/status").json().toString())
                .isEqualTo("[{\"name\":\"out\",\"device_id\":0,\"byte_size\":256}]");
        assertThat(http.get("/v2/systemsharedmemory/status").json().toString()).isEqualTo("[]");
        Http.Response system = http.get("/v2/systemsharedmemory/region/in/status");
        assertThat(system.status()).isEqualTo(404);
        assertThat(system.json().path("error").asString())
                .isEqualTo("The region named 'in' is registered as CUDA shared memory, not system shared memory");

        Http.Response answer = http.post("/v2/models/demo-portable/infer", IN_AND_OUT);

        assertThat(answer.status()).as(answer.text()).isEqualTo(200);
        assertThat(answer.json().path("outputs").toString()).isEqualTo("[{\"name\":\"y\",\"datatype\":\"FP32\",\"shape\":[1,4]}]");
        assertReferenceAt40(out);
        assertThat(DEVICE.bytes(out)[39]).as("the byte before the output is the allocation's own").isEqualTo((byte) 39);

        assertThat(http.post("/v2/cudasharedmemory/region/in/unregister", "").status()).isEqualTo(200);
        assertThat(DEVICE.closed(in)).isEqualTo(1);
        assertThat(http.get("/v2/cudasharedmemory/region/in/status").status()).isEqualTo(404);
    }

    /** The reference's output at byte 40 of the allocation {@code out}. */
    static void assertReferenceAt40(byte[] out) {
        ByteBuffer written = ByteBuffer.wrap(DEVICE.bytes(out)).order(ByteOrder.LITTLE_ENDIAN);
        var expected = REF.cases().get(0).outputs().get(0).data();
        for (int i = 0; i < 4; i++) {
            float got = written.getFloat(40 + 4 * i);
            assertThat(REF.close(got, expected.get(i))).as("element %d: %s vs %s", i, got, expected.get(i)).isTrue();
        }
    }

    /**
     * Seeded variants of a request naming CUDA regions and of a CUDA registration (values
     * replaced, removed, added; bytes flipped and cut): each is answered or refused with a
     * client's status and a message that says what is wrong, never a 5xx or an ERROR in the log,
     * and the regions still give the reference answer after. Replay a seed with
     * {@code -Detserve.test.mutation-seed=N}.
     */
    @Test
    void mutatedCudaRequestsAndRegistrationsAreAnsweredOrRefusedClearly(CapturedOutput output) throws IOException {
        byte[] in = inputAllocation(128);
        byte[] out = DEVICE.allocate(256, 0);
        assertThat(register("in", in, 192).status()).isEqualTo(200);
        assertThat(register("out", out, 256).status()).isEqualTo(200);
        JsonNode valid = Http.JSON.readTree(IN_AND_OUT);
        JsonNode registration = Http.JSON.readTree("{\"raw_handle\":{\"b64\":\""
                + Base64.getEncoder().encodeToString(DEVICE.allocate(64, 0)) + "\"},\"device_id\":0,\"byte_size\":64}");
        // Three tenths registrations (the system test sends two): their parsing is this extension's own.
        SharedMemoryApiTest.Mutated sent = SharedMemoryApiTest.sendMutated(port, http, "cudasharedmemory", valid,
                registration, 7);
        assertThat(sent.problems()).as("seed %d", SharedMemoryApiTest.SEED).isEmpty();
        assertThat(sent.answered()).as("answered variants").isPositive();
        assertThat(output.getAll()).doesNotContain(" ERROR ");
        assertThat(http.get("/v2/cudasharedmemory/status").json().toString())
                .isEqualTo("[{\"name\":\"in\",\"device_id\":0,\"byte_size\":192},"
                        + "{\"name\":\"out\",\"device_id\":0,\"byte_size\":256}]");
        Arrays.fill(DEVICE.bytes(out), (byte) 0);
        assertThat(http.post("/v2/models/demo-portable/infer", IN_AND_OUT).status()).isEqualTo(200);
        assertReferenceAt40(out);
    }

    @Test
    void registrationBodiesThatCannotBeARegionAreRefusedWithTheReason() {
        byte[] handle = DEVICE.allocate(64, 0);
        String b64 = Base64.getEncoder().encodeToString(handle);
        String[][] cases = {
            {"{\"device_id\":0,\"byte_size\":8}", "Shared memory register request has no 'raw_handle' field."},
            {"{\"raw_handle\":\"" + b64 + "\",\"device_id\":0,\"byte_size\":8}", "'raw_handle' must be {\"b64\""},
            {"{\"raw_handle\":{\"b64\":\"not base64!\"},\"device_id\":0,\"byte_size\":8}", "'raw_handle' is not base64"},
            {"{\"raw_handle\":{\"b64\":\"" + b64 + "\"},\"device_id\":\"0\",\"byte_size\":8}", "'device_id' must be a whole number"},
            {"{\"raw_handle\":{\"b64\":\"" + b64 + "\"},\"device_id\":0}", "has no 'byte_size' field"},
            {"{\"raw_handle\":{\"b64\":\"" + b64 + "\"},\"device_id\":1,\"byte_size\":8}", "no allocation has that handle"},
            {"{\"raw_handle\":{\"b64\":\"" + b64 + "\"},\"device_id\":0,\"byte_size\":65}",
                "its byte_size 65 is more than the 64 bytes the handle's allocation holds"},
            {"{\"raw_handle\":{\"b64\":\"AAAA\"},\"device_id\":0,\"byte_size\":8}",
                "its raw_handle must be a CUDA IPC handle of 64 bytes (got 3 bytes)"},
            {"[1]", "The register request's body must be a JSON object"},
        };
        for (String[] c : cases) {
            Http.Response r = http.post("/v2/cudasharedmemory/region/r/register", c[0]);
            assertThat(r.status()).as(c[0]).isEqualTo(400);
            assertThat(r.json().path("error").asString()).as(c[0]).contains(c[1]);
        }
        assertThat(http.get("/v2/cudasharedmemory/status").json().toString()).isEqualTo("[]");
    }

    @Test
    void theSameCallsOverGrpc() {
        assertThat(grpc.serverMetadata(ServerMetadataRequest.getDefaultInstance()).getExtensionsList())
                .contains("cuda_shared_memory");
        byte[] handle = inputAllocation(0);
        grpc.cudaSharedMemoryRegister(CudaSharedMemoryRegisterRequest.newBuilder().setName("g")
                .setRawHandle(ByteString.copyFrom(handle)).setDeviceId(0).setByteSize(64).build());
        CudaSharedMemoryStatusResponse status = grpc.cudaSharedMemoryStatus(CudaSharedMemoryStatusRequest.getDefaultInstance());
        assertThat(status.getRegionsMap()).containsOnlyKeys("g");
        assertThat(status.getRegionsOrThrow("g").getByteSize()).isEqualTo(64);

        StatusRuntimeException huge = Assertions.assertThrows(StatusRuntimeException.class,
                () -> grpc.cudaSharedMemoryRegister(CudaSharedMemoryRegisterRequest.newBuilder().setName("h")
                        .setRawHandle(ByteString.copyFrom(handle)).setByteSize(-1).build()));
        assertThat(huge.getStatus().getCode()).isEqualTo(Status.Code.INVALID_ARGUMENT);
        assertThat(huge.getStatus().getDescription()).contains("18446744073709551615 is more than any allocation holds");

        grpc.cudaSharedMemoryUnregister(CudaSharedMemoryUnregisterRequest.newBuilder().setName("g").build());
        assertThat(DEVICE.closed(handle)).isEqualTo(1);
        StatusRuntimeException gone = Assertions.assertThrows(StatusRuntimeException.class,
                () -> grpc.cudaSharedMemoryStatus(CudaSharedMemoryStatusRequest.newBuilder().setName("g").build()));
        assertThat(gone.getStatus().getCode()).isEqualTo(Status.Code.NOT_FOUND);
        assertThat(gone.getStatus().getDescription()).isEqualTo("Unable to find cuda shared memory region: 'g'");
    }

    /**
     * A copy that meets a sticky CUDA error (the context is lost) fails its request and takes
     * liveness down, as a forward call's would: on this host, which serves no device's pool, the
     * process is to be restarted. Runs last: liveness stays down for the rest of the class.
     */
    @Test
    @Order(Integer.MAX_VALUE)
    void aStickyCudaErrorInACopyFailsTheRequestAndTakesLivenessDown() {
        Http management = Http.local(managementPort);
        assertThat(management.get("/actuator/health/liveness").status()).isEqualTo(200);
        assertThat(register("lost", inputAllocation(0), 64).status()).isEqualTo(200);
        DEVICE.failCopies(new CudaException("cudaMemcpyAsync", 700, "cudaErrorIllegalAddress",
                "an illegal memory access was encountered"));

        Http.Response answer = http.post("/v2/models/demo-portable/infer", "{\"inputs\":[{\"name\":\"x\","
                + "\"datatype\":\"FP32\",\"shape\":[1,16],\"parameters\":{\"shared_memory_region\":\"lost\","
                + "\"shared_memory_byte_size\":64}}]}");

        assertThat(answer.status()).as(answer.text()).isEqualTo(500);
        assertThat(answer.json().path("error").asString()).isEqualTo("inference failed: cudaMemcpyAsync failed:"
                + " cudaErrorIllegalAddress (700): an illegal memory access was encountered");
        // Over gRPC, an output written into the region: INTERNAL.
        assertThat(register("lost-out", DEVICE.allocate(64, 0), 64).status()).isEqualTo(200);
        StatusRuntimeException failed = Assertions.assertThrows(StatusRuntimeException.class,
                () -> grpc.modelInfer(ModelInferRequest.newBuilder().setModelName("demo-portable")
                        .addInputs(ModelInferRequest.InferInputTensor.newBuilder().setName("x").setDatatype("FP32")
                                .addShape(1).addShape(16)
                                .setContents(InferTensorContents.newBuilder().addAllFp32Contents(REF.cases().get(0)
                                        .inputs().get(0).data().stream().map(Double::floatValue).toList())))
                        .addOutputs(ModelInferRequest.InferRequestedOutputTensor.newBuilder().setName("y")
                                .putParameters("shared_memory_region", SharedMemoryApiTest.string("lost-out"))
                                .putParameters("shared_memory_byte_size", SharedMemoryApiTest.int64(16)))
                        .build()));
        assertThat(failed.getStatus().getCode()).isEqualTo(Status.Code.INTERNAL);
        assertThat(failed.getStatus().getDescription()).isEqualTo("inference failed: cudaMemcpyAsync failed:"
                + " cudaErrorIllegalAddress (700): an illegal memory access was encountered");
        assertThat(management.get("/actuator/health/liveness").status()).isEqualTo(503);
    }
}
